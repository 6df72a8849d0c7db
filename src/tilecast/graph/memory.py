"""Device-memory footprint of a workload (for the forecasts' fit flag).

From the recorded forward pass:

- parameters: every tensor the model owns, tied ones once, at ``dtype`` (``fp8`` / ``fp4``: the linear layers'
  weights in that dtype, the rest in bf16; ``amp_bf16``: fp32 weights, autocast keeps a bf16 copy of each
  during the step, counted with the activations);
- gradients (training): one per parameter, at ``dtype`` (``amp_bf16``: fp32);
- optimizer (training, AdamW): two fp32 moments per parameter, plus an fp32 master copy when the
  model's weights are below fp32 (bf16 / fp16 training); ``optimizer=None`` leaves it out, as in the
  labels' training runs (forward, loss and backward, no optimizer step);
- activations kept for backward (training): each tensor a backward rule reads, once (the input of
  a GEMM, norm or activation; the output of softmax and tanh; an operand of a product whose other
  operand needs a gradient, so ``scores / const`` keeps nothing), plus one byte per element for
  dropout masks;
- transient (training): the largest working set of a single kernel (its inputs and output), the
  peak on top of what is kept (the logits or the attention scores, usually).

Inference runs under ``torch.no_grad`` (eager PyTorch, one pass): nothing is kept for a backward,
and a tensor is freed as soon as the last kernel reading it has run, except what the pass returns
(the tape's ``held`` outputs: the logits and, for decoders with ``use_cache``, every block's key /
value cache, which stays allocated whole when it is a view of a larger tensor, GPT-2's fused QKV).
The footprint is the peak of that walk over the kernels in order: ``activations`` are the held
outputs allocated at the peak, ``transient`` every other live tensor then (the last block's
attention scores in flight, two ``B x heads x S x S`` tensors, or the logits being written).
Views (``alias`` nodes) allocate nothing. Not modelled: the CUDA context and the allocator's
caching and fragmentation (the fit policy's reserve is for those).

Repeated blocks need not be recorded one by one (:mod:`tilecast.graph.build`): every part is a sum
over blocks, or a peak that sits in the last block or after it, so it is affine in the number of
blocks and :func:`memory_footprint` scales two short recordings (checked; else it records all).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

from tilecast.errors import UserError
from tilecast.graph.build import SHORT_BLOCKS, as_workload, recorded, scalable, with_blocks
from tilecast.graph.tape import EXTERNAL, Node, Tape
from tilecast.graph.work import expert_weight_bytes
from tilecast.specs import ModelSpec, Workload
from tilecast.tiles.dtypes import DTYPE_BYTES, QUANTISED_DTYPES, check_workload_dtype, compute_dtype

ADAM_STATE_BYTES = 8  # exp_avg + exp_avg_sq, fp32
MASTER_COPY_BYTES = 4  # fp32 weights kept by mixed-precision training

#: grad rules whose backward reads their tensor inputs / their own output
_SAVES_INPUTS = frozenset({"linear", "bmm", "conv", "powu", "ln", "rmsnorm", "gelu", "relu", "silu", "sigmoid",
                           "rope", "conv1d"})
_SAVES_OUTPUT = frozenset({"softmax", "tanh"})
_PRODUCTS = frozenset({"mul", "div", "pow"})  # an operand is kept when another operand needs a gradient
#: grad rules of fused kernels whose backward reads their inputs and output
_FUSED_KERNELS = frozenset({"attn", "mla_prefill", "moe", "gdn_prefill"})


def moe_inner_elements(node: Node) -> int:
    """Elements a fused MoE layer keeps for its backward besides its input and output: the gate / up
    projections' output of every routed token-expert pair on this GPU."""
    a = dict(node.attrs)
    tokens, _, inter = node.dims[1], node.dims[2], node.dims[3]
    pairs = tokens * a["topk"] // a["moe_ep"]
    return pairs * (2 if a.get("gated", True) else 1) * inter // a["moe_tp"]


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
        if node.grad in _FUSED_KERNELS:  # FlashAttention / fused MoE / GDN: inputs and output (+ row stats)
            keep(node.id, node.out_numel)
            for t in node.inputs:
                if t.node != EXTERNAL:
                    keep(t.node, t.numel)
            if node.kind == "moe":  # the grouped GEMMs' inner activations: gate-up output of every routed pair
                keep(-2 - node.id, moe_inner_elements(node))
        elif node.grad in _SAVES_OUTPUT:
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


def saved_activations(tape: Tape) -> dict[int, int]:
    """Producer node id -> elements of every activation a backward rule reads (what training keeps)."""
    return _saved_tensors(tape)


def working_set(node: Node) -> int:
    """Elements one kernel touches: its inputs and its output (the transient peak on top of what is kept)."""
    return _working_set(node)


OPTIMIZERS = ("adamw", None)


def live_peak(tape: Tape) -> tuple[int, int, int]:
    """Walk the kernels in order, freeing each tensor after its last reader (held outputs never):
    ``(peak live elements, of which held outputs, the node at the peak)``."""
    nodes = tape.nodes
    base = list(range(len(nodes)))  # the tensor whose storage a node's output is (views: their input's)
    last = list(range(len(nodes)))  # the last node that reads each storage
    for node in nodes:
        if node.alias and node.inputs and node.inputs[0].node != EXTERNAL:
            base[node.id] = base[node.inputs[0].node]
        for t in node.inputs:
            if t.node != EXTERNAL:
                b = base[t.node]
                last[b] = max(last[b], node.id)
    held = {base[i] for i in tape.held}
    frees: dict[int, list[int]] = {}
    for i, at in enumerate(last):
        if base[i] == i and i not in held:
            frees.setdefault(max(at, last[i]), []).append(i)
    live = held_live = 0
    peak = (0, 0, -1)
    for node in nodes:
        if base[node.id] == node.id:
            live += node.out_numel
            if node.id in held:
                held_live += node.out_numel
        if live > peak[0]:
            peak = (live, held_live, node.id)
        for i in frees.get(node.id, ()):
            live -= nodes[i].out_numel
    return peak


def footprint_of(tape: Tape, training: bool, dtype: str = "fp32", optimizer: str | None = "adamw") \
        -> MemoryFootprint:
    """The footprint of a recorded forward pass (see the module docstring for each part)."""
    check_workload_dtype(dtype)
    if optimizer not in OPTIMIZERS:
        raise UserError(f"optimizer must be 'adamw' or None, got {optimizer!r}")
    size = DTYPE_BYTES[compute_dtype(dtype)]  # activations, KV cache, working sets
    n_params = tape.num_params
    params, weight_size = _params_bytes(tape, dtype), DTYPE_BYTES.get(dtype, 4)
    if not training:
        live, held, _ = live_peak(tape)
        return MemoryFootprint(params, 0, 0, held * size, (live - held) * size, dtype)
    transient = max((_working_set(n) for n in tape.nodes), default=0) * size
    amp = dtype == "amp_bf16"
    per_param = ADAM_STATE_BYTES + (MASTER_COPY_BYTES if not amp and weight_size < 4 else 0)
    optimizer_bytes = n_params * per_param if optimizer else 0
    masks = sum(n.out_numel for n in tape.nodes if n.kind == "mem" and n.saved)
    activations = sum(_saved_tensors(tape).values()) * size + masks + (n_params * size if amp else 0)
    return MemoryFootprint(params, params, optimizer_bytes, activations, transient, dtype)


def _params_bytes(tape: Tape, dtype: str) -> int:
    """Bytes of the parameters at ``dtype``: fp8 / fp4 keep the linear layers' weights in that dtype (fp4 with
    its block scales) and the rest (embeddings, norms, biases) in bf16; ``amp_bf16`` keeps fp32 weights. Routed
    experts are held in :func:`~tilecast.graph.work.expert_format` (gpt-oss's mxfp4 experts stay mxfp4 in a bf16
    workload; DeepSeek's fp8 experts carry their 128 x 128 block scales)."""
    if dtype == "amp_bf16":
        return tape.num_params * DTYPE_BYTES["fp32"]
    experts = [(n.params[0], dict(n.attrs).get("ckpt", "")) for n in tape.nodes if n.kind == "moe" and n.params]
    expert_elements = sum(e for e, _ in experts)
    expert_bytes = sum(e * expert_weight_bytes(dtype, ckpt) for e, ckpt in experts)
    if dtype not in QUANTISED_DTYPES:
        return int(round((tape.num_params - expert_elements) * DTYPE_BYTES[dtype] + expert_bytes))
    linear_weights = sum(n.params[0] for n in tape.nodes if n.kind == "linear" and n.params)
    rest = tape.num_params - linear_weights - expert_elements
    return int(round(linear_weights * DTYPE_BYTES[dtype] + expert_bytes + rest * DTYPE_BYTES["bf16"]))


_FIELDS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "transient_bytes")


def _scaled_footprint(wl: Workload, dtype: str, optimizer: str | None) -> MemoryFootprint | None:
    """The footprint of all blocks from 2- and 3-block recordings; None when it would not be affine:
    an inference peak before the blocks, or a peak part that differs between the two."""
    tapes = [recorded(with_blocks(wl, n)) for n in SHORT_BLOCKS]
    if not wl.training:
        for tape in tapes:
            at = live_peak(tape)[2]
            if at < 0 or tape.nodes[at].section == "prologue":
                return None
    short, long = (footprint_of(t, wl.training, dtype, optimizer) for t in tapes)
    if short.transient_bytes != long.transient_bytes:
        return None
    extra = wl.model.num_layers - SHORT_BLOCKS[-1]
    step = SHORT_BLOCKS[-1] - SHORT_BLOCKS[0]
    values = {}
    for name in _FIELDS:
        a, b = getattr(short, name), getattr(long, name)
        if (b - a) % step or b < a:
            return None
        values[name] = b + extra * (b - a) // step
    return dataclasses.replace(long, **values)


def memory_footprint(model: ModelSpec | str | Workload, batch: int | None = None, seq_len: int | None = None,
                     mode: str = "inference", dtype: str | None = None, optimizer: str | None = "adamw",
                     scale_layers: bool = True) -> MemoryFootprint:
    """The device-memory footprint of ``model`` at ``batch`` x ``seq_len`` in ``mode`` at ``dtype``
    (``optimizer=None``: training without optimizer state, as the labels were measured; ``dtype=None``:
    the workload's, fp32 by default).
    ``scale_layers=False`` records every block instead of scaling two short recordings (same result)."""
    wl = as_workload(model, batch, seq_len, mode, dtype=dtype or "fp32")
    if dtype is not None and dtype != wl.dtype:
        wl = dataclasses.replace(wl, dtype=check_workload_dtype(dtype))
    dtype = wl.dtype
    if scale_layers and scalable(wl.model):
        scaled = _scaled_footprint(wl, dtype, optimizer)
        if scaled is not None:
            return scaled
    return footprint_of(recorded(wl), wl.training, dtype, optimizer)
