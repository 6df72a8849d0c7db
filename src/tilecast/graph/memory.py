"""Device-memory footprint of a workload (for the forecasts' fit flag).

From the recorded forward pass:

- parameters: every tensor the model owns, tied ones once, at ``dtype``;
- gradients (training): one per parameter, at ``dtype``;
- optimizer (training, AdamW): two fp32 moments per parameter, plus an fp32 master copy when the
  model runs below fp32 (mixed precision); ``optimizer=None`` leaves it out, as in the labels'
  training runs (forward, loss and backward, no optimizer step);
- activations kept for backward (training): each tensor a backward rule reads, once (the input of
  a GEMM, norm or activation; the output of softmax and tanh; an operand of a product whose other
  operand needs a gradient, so ``scores / const`` keeps nothing), plus one byte per element for
  dropout masks;
- transient: the largest working set of a single kernel (its inputs and output), the peak on top
  of what is kept (the logits or the attention scores, usually).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tilecast.graph.build import as_workload, record
from tilecast.graph.tape import EXTERNAL, Node, Tape
from tilecast.specs import ModelSpec, Workload

#: bytes per element of each compute dtype
DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
ADAM_STATE_BYTES = 8  # exp_avg + exp_avg_sq, fp32
MASTER_COPY_BYTES = 4  # fp32 weights kept by mixed-precision training

#: grad rules whose backward reads their tensor inputs / their own output
_SAVES_INPUTS = frozenset({"linear", "bmm", "conv", "powu", "ln", "rmsnorm", "gelu", "relu", "silu", "sigmoid"})
_SAVES_OUTPUT = frozenset({"softmax", "tanh"})
_PRODUCTS = frozenset({"mul", "div", "pow"})  # an operand is kept when another operand needs a gradient


@dataclass(frozen=True)
class MemoryFootprint:
    """Bytes a workload needs on one device, by kind; ``dtype`` is the compute dtype."""

    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    transient_bytes: int
    dtype: str = "fp32"

    @property
    def total_bytes(self) -> int:
        return (self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes
                + self.transient_bytes)

    def fits(self, capacity_bytes: float) -> bool:
        """Whether the footprint fits in ``capacity_bytes`` of device memory."""
        return self.total_bytes <= capacity_bytes

    def as_dict(self) -> dict[str, int | str]:
        return {**asdict(self), "total_bytes": self.total_bytes}


def _saved_tensors(tape: Tape) -> dict[int, int]:
    """Producer node id -> elements of every activation some backward rule reads."""
    saved: dict[int, int] = {}

    def keep(node_id: int, numel: int) -> None:
        saved[node_id] = max(saved.get(node_id, 0), numel)

    for node in tape.nodes:
        if node.grad in _SAVES_OUTPUT:
            keep(node.id, node.out_numel)
        elif node.grad in _SAVES_INPUTS:
            for t in node.inputs:
                if t.node != EXTERNAL:
                    keep(t.node, t.numel)
        elif node.grad in _PRODUCTS:
            # an external operand needs no gradient unless it is one of the node's parameters
            needs_grad = [t.node != EXTERNAL or t.numel in node.params for t in node.inputs]
            for i, t in enumerate(node.inputs):
                if t.node != EXTERNAL and any(g for j, g in enumerate(needs_grad) if j != i):
                    keep(t.node, t.numel)
    return saved


def _working_set(node: Node) -> int:
    return sum(node.in_numels) + node.out_numel


OPTIMIZERS = ("adamw", None)


def footprint_of(tape: Tape, training: bool, dtype: str = "fp32", optimizer: str | None = "adamw") \
        -> MemoryFootprint:
    """The footprint of a recorded forward pass (see the module docstring for each part)."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be 'adamw' or None, got {optimizer!r}")
    size = DTYPE_BYTES[dtype]
    n_params = tape.num_params
    params = n_params * size
    transient = max((_working_set(n) for n in tape.nodes), default=0) * size
    if not training:
        return MemoryFootprint(params, 0, 0, 0, transient, dtype)
    per_param = ADAM_STATE_BYTES + (MASTER_COPY_BYTES if size < 4 else 0)
    optimizer_bytes = n_params * per_param if optimizer else 0
    masks = sum(n.out_numel for n in tape.nodes if n.kind == "mem" and n.saved)
    activations = sum(_saved_tensors(tape).values()) * size + masks
    return MemoryFootprint(params, params, optimizer_bytes, activations, transient, dtype)


def memory_footprint(model: ModelSpec | str | Workload, batch: int | None = None, seq_len: int | None = None,
                     mode: str = "inference", dtype: str = "fp32", optimizer: str | None = "adamw") \
        -> MemoryFootprint:
    """The device-memory footprint of ``model`` at ``batch`` x ``seq_len`` in ``mode`` at ``dtype``
    (``optimizer=None``: training without optimizer state, as the labels were measured)."""
    wl = as_workload(model, batch, seq_len, mode)
    return footprint_of(record(wl), wl.training, dtype, optimizer)
