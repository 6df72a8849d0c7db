"""Memory per GPU of a training run, and the smallest change that makes one fit (docs/method.md §19).

From the rank's recorded tape (tp shards and LoRA adapters applied, as :mod:`tilecast.forecast.train_graph`
builds it), per block and outside the blocks: parameters (trainable or frozen), the activations backward
reads (:func:`tilecast.graph.memory.saved_activations`), the block's input and the attention core's share.
Per GPU of a pipeline stage holding ``ceil(layers / pp)`` blocks (the first stage the embeddings, the last
the head; the larger of the two):

- **weights**: ``amp_bf16`` fp32, ``bf16`` / ``fp8`` bf16 (LoRA: the frozen base in bf16 or nf4, adapters as
  trainable weights); ``zero3`` / ``hybrid`` keep ``1 / shard_group`` of them, plus the unsharded bf16 copies
  of the blocks in flight (FSDP's ``limit_all_gathers``: two) and of the root (embeddings, head);
- **bf16 working copies** without weight sharding: autocast's cached casts of fp32 weights (``amp_bf16``), or
  the all-gathered bf16 weights ``zero2`` keeps from forward to backward;
- **gradients**: one per trainable parameter (``amp_bf16`` fp32, else bf16), ``1 / shard_group`` from zero2
  on, plus one block's unsharded gradient before it is reduce-scattered;
- **optimizer**: the optimizer's fp32 state (+ an fp32 master copy below fp32 weights), ``1 / shard_group``
  from zero1 on;
- **activations** of one micro-batch at the compute dtype: everything backward reads (no checkpointing),
  the blocks' inputs plus one block recomputed at a time (``full``), or all but the attention core's
  (``selective``); a pipeline stage holds ``min(pp, grad_accum)`` micro-batches in flight (1F1B) or all
  ``grad_accum`` (GPipe); plus the largest kernel's working set (the logits, usually);
- **reserve**: the CUDA context and NCCL's buffers, :data:`CONTEXT_GIB`, and the caching allocator's
  fragmentation, :data:`FRAGMENTATION` of the activations and working set.

A run fits when the total is at most the GPU's listed memory read as GiB. :func:`fitting_change` finds the
smallest change that fits, in the order of :data:`CHANGES`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from tilecast.graph.build import recorded, scalable, with_blocks
from tilecast.graph.memory import saved_activations, working_set
from tilecast.graph.parallel import Parallel, tensor_parallel_tape
from tilecast.graph.tape import Tape
from tilecast.specs import GpuSpec
from tilecast.specs.layout import LayoutError
from tilecast.specs.train_run import LORA_BASE_BYTES, OPTIMIZERS, SHARDING_LEVELS, TrainRun, TrainRunError
from tilecast.tiles.dtypes import DTYPE_BYTES, compute_dtype

GIB = float(2**30)
#: CUDA context (~0.5 GiB) and NCCL's communicator buffers (AIConfigurator's systems yamls: 342-392 MB)
CONTEXT_GIB = 1.0
#: share of the activations and working set the caching allocator loses to fragmentation (an assumption:
#: nothing here measures it; every public run of data/llm_foundry fits with it, tests/forecast/test_train_run.py)
FRAGMENTATION = 0.10
#: fp32 weights / grads for amp, bf16 otherwise (fp8 training keeps bf16 weights, as TransformerEngine does)
WEIGHT_BYTES: dict[str, int] = {"amp_bf16": 4, "bf16": 2, "fp8": 2}
#: FSDP's prefetch: blocks whose unsharded weights are alive at once (``limit_all_gathers``)
UNITS_IN_FLIGHT = 2
#: node kinds / ops of the attention core (what selective checkpointing recomputes)
_ATTENTION_CORE_KINDS = frozenset({"attn", "bmm"})
_ATTENTION_CORE_OPS = frozenset({"softmax"})


@dataclass(frozen=True)
class RankShape:
    """Per-rank counts from the recorded tape: parameters and saved activation elements per block and outside."""

    layers: int
    layer_params: float
    layer_trainable: float
    pro_params: float  # embeddings (+ free tables)
    epi_params: float  # final norm, head (a tied head counted here too; ``tied`` removes it on one stage)
    tied: float
    pro_trainable: float
    epi_trainable: float
    layer_saved: float  # elements backward reads, per block
    layer_core_saved: float  # of which the attention core's
    outside_saved: float
    layer_input: float  # elements of a block's input (what full checkpointing keeps)
    transient: float  # elements of the largest kernel's working set
    adapters_per_layer: float = 0.0

    @property
    def params(self) -> float:
        return self.layers * self.layer_params + self.pro_params + self.epi_params - self.tied


def rank_shape(run: TrainRun) -> RankShape:
    """:class:`RankShape` of a run's rank (two recorded blocks, or every block where they do not repeat); what
    it depends on (model, sequence share, micro-batch, tp, LoRA, dtype) is computed once per process."""
    return _rank_shape(run.model, run.seq_len // run.cp, run.micro_batch, run.tp, run.lora_rank, run.dtype)


@functools.lru_cache(maxsize=256)
def _rank_shape(model, seq_len: int, micro_batch: int, tp: int, lora_rank: int, dtype: str) -> RankShape:
    from tilecast.forecast.train_graph import lora_tape
    from tilecast.specs import Workload

    run = _Shape(model, tp, lora_rank, dtype)
    wl = Workload(model, micro_batch, seq_len, "training", dtype=dtype)
    blocks = 2 if scalable(wl.model) else wl.model.num_layers + wl.model.num_decoder_layers
    base = recorded(with_blocks(wl, blocks) if blocks == 2 else wl)
    sharded = tensor_parallel_tape(base, Parallel("tp", run.tp), run.model.vocab_size)[0] if run.tp > 1 else base
    tape = sharded
    if run.lora_rank:
        tape = lora_tape(base, run.lora_rank)
        if run.tp > 1:
            tape = tensor_parallel_tape(tape, Parallel("tp", run.tp), run.model.vocab_size)[0]

    def params(t: Tape, section: str) -> float:
        return float(sum(sum(n.params) for n in t.nodes if n.section == section))

    saved = saved_activations(tape)
    by_section = {"prologue": 0.0, "layer": 0.0, "epilogue": 0.0}
    core = 0.0
    for node_id, numel in saved.items():
        node = tape.nodes[node_id]
        by_section[node.section] += numel
        if node.section == "layer" and (node.kind in _ATTENTION_CORE_KINDS or node.op in _ATTENTION_CORE_OPS):
            core += numel
    masks = sum(n.out_numel for n in tape.nodes if n.kind == "mem" and n.saved) / DTYPE_BYTES[compute_dtype(
        run.dtype)]
    free = float(sum(p for p in base.param_numels if p > 0))
    tied = float(-sum(p for p in base.param_numels if p < 0))
    all_params = {s: params(sharded, s) for s in ("prologue", "layer", "epilogue")}
    trainable = {s: params(tape, s) for s in ("prologue", "layer", "epilogue")}
    full = not run.lora_rank
    if full:  # full training: everything trains
        trainable["prologue"] += free
    layer_input = next((float(n.in_numels[0]) for n in tape.nodes if n.section == "layer" and n.in_numels), 0.0)
    return RankShape(
        layers=wl.model.num_layers + wl.model.num_decoder_layers,
        layer_params=all_params["layer"] / blocks, layer_trainable=trainable["layer"] / blocks,
        pro_params=all_params["prologue"] + free, epi_params=all_params["epilogue"], tied=tied,
        pro_trainable=trainable["prologue"], epi_trainable=trainable["epilogue"] - (tied if full else 0.0),
        layer_saved=(by_section["layer"] + masks) / blocks, layer_core_saved=core / blocks,
        outside_saved=by_section["prologue"] + by_section["epilogue"], layer_input=layer_input,
        transient=float(max((working_set(n) for n in tape.nodes), default=0)),
        adapters_per_layer=trainable["layer"] / blocks if run.lora_rank else 0.0)


@dataclass(frozen=True)
class _Shape:
    """The settings :func:`_rank_shape` reads besides the workload."""

    model: object
    tp: int
    lora_rank: int
    dtype: str


@dataclass(frozen=True)
class TrainMemory:
    """Bytes per GPU by kind (see the module docstring), the capacity, and whether it fits."""

    weights_bytes: float
    working_bytes: float  # unsharded bf16 copies (FSDP units in flight, autocast casts, zero2's gathered weights)
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    transient_bytes: float
    reserve_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.working_bytes + self.grads_bytes + self.optimizer_bytes
                + self.activations_bytes + self.transient_bytes + self.reserve_bytes)

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    def as_gib(self) -> dict[str, float]:
        return {k.replace("_bytes", "_gib"): v / GIB for k, v in {**asdict(self), "total_bytes": self.total_bytes}
                .items()}


def stage_layers(run: TrainRun, layers: int) -> int:
    """Blocks on the fullest pipeline stage."""
    return math.ceil(layers / run.pp)


def train_memory(run: TrainRun, gpu: GpuSpec, shape: RankShape | None = None) -> TrainMemory:
    """Bytes one GPU of ``run`` needs (module docstring)."""
    s = shape or rank_shape(run)
    n_layers = stage_layers(run, s.layers)
    if run.pp == 1:
        params = s.params
        trainable = n_layers * s.layer_trainable + s.pro_trainable + s.epi_trainable
        root = s.pro_params + s.epi_params - s.tied
    else:
        stage_root = max(s.pro_params, s.epi_params)
        params = n_layers * s.layer_params + stage_root
        trainable = n_layers * s.layer_trainable + max(s.pro_trainable, s.epi_trainable)
        root = stage_root
    w_bytes = WEIGHT_BYTES[run.dtype]
    half = DTYPE_BYTES[compute_dtype(run.dtype)]
    level = run.sharding
    n = run.shard_group
    shard_w = level in ("zero3", "hybrid")
    shard_g = level in ("zero2", "zero3", "hybrid")
    shard_o = level != "none"
    if run.lora_rank:
        frozen = params - trainable
        weights = frozen * LORA_BASE_BYTES[run.lora_base_dtype] + trainable * w_bytes
    else:
        weights = params * w_bytes
    if shard_w:
        weights /= n
        working = (UNITS_IN_FLIGHT * s.layer_params + root) * half
    elif level == "zero2" or w_bytes > half:
        working = params * half  # zero2's gathered weights / autocast's casts of fp32 weights
        if run.lora_rank:
            working = (params - trainable) * half if run.lora_base_dtype == "nf4" else trainable * half
    else:
        working = 0.0
    grads = trainable * w_bytes
    if shard_g:
        grads = grads / n + s.layer_trainable * half
    opt = OPTIMIZERS[run.optimizer]
    optimizer = trainable * (opt.state_bytes + (4 if w_bytes < 4 else 0))
    if shard_o:
        optimizer /= n
    ckpt = run.activation_checkpointing
    if ckpt == "full":
        per_mb = s.outside_saved + n_layers * s.layer_input + s.layer_saved
    elif ckpt == "selective":
        per_mb = s.outside_saved + n_layers * (s.layer_saved - s.layer_core_saved)
    else:
        per_mb = s.outside_saved + n_layers * s.layer_saved
    in_flight = 1 if run.pp == 1 else (min(run.pp, run.grad_accum) if run.pp_schedule == "1f1b" else run.grad_accum)
    activations = per_mb * half * in_flight
    transient = s.transient * half
    reserve = CONTEXT_GIB * GIB + FRAGMENTATION * (activations + transient)
    return TrainMemory(weights, working, grads, optimizer, activations, transient, reserve, gpu.mem_gb * GIB)


#: what :func:`fitting_change` changes, cheapest first: shard more, checkpoint, smaller micro-batches (the global
#: batch kept), tensor parallel inside the node, more GPUs
CHANGES = ("sharding", "activation_checkpointing", "micro_batch", "tp", "n_gpus")


def _steps(run: TrainRun) -> list[tuple[str, Callable[[TrainRun], TrainRun]]]:
    """Single changes of ``run`` in :data:`CHANGES` order, as (label, apply)."""
    out: list[tuple[str, Callable[[TrainRun], TrainRun]]] = []
    current = SHARDING_LEVELS.index("zero3" if run.sharding == "hybrid" else run.sharding)
    for lv in SHARDING_LEVELS[current + 1:4]:
        out.append((f"sharding={lv}", lambda r, lv=lv: r.with_(sharding=lv)))
    order = ("none", "selective", "full")
    for ck in order[order.index(run.activation_checkpointing) + 1:]:
        out.append((f"activation_checkpointing={ck}", lambda r, ck=ck: r.with_(activation_checkpointing=ck)))
    mb = run.micro_batch // 2
    while mb >= 1:
        out.append((f"micro_batch={mb}", lambda r, mb=mb: r.with_(micro_batch=mb, global_batch=r.global_batch)))
        mb //= 2
    for tp in (2, 4, 8):
        if run.tp < tp <= run.gpus_per_node:
            out.append((f"tp={tp}", lambda r, tp=tp: r.with_(tp=tp, global_batch=None, grad_accum=r.grad_accum)))
    for factor in (2, 4, 8, 16):
        out.append((f"n_gpus={run.n_gpus * factor} ({factor}x GPUs)", lambda r, f=factor: _more_gpus(r, f)))
    return out


def _more_gpus(run: TrainRun, factor: int) -> TrainRun:
    """``factor`` x GPUs, the global batch kept where it splits, else the gradient accumulation kept; ZeRO-3 where
    nothing was sharded (more GPUs only help memory when something is split)."""
    sharding = run.sharding if run.sharding != "none" else "zero3"
    try:
        return run.with_(n_gpus=run.n_gpus * factor, global_batch=run.global_batch, sharding=sharding)
    except (TrainRunError, LayoutError):
        return run.with_(n_gpus=run.n_gpus * factor, grad_accum=run.grad_accum, global_batch=None, sharding=sharding)


@dataclass(frozen=True)
class FitAdvice:
    """The smallest change that fits (None: none of :data:`CHANGES` found one) and the memory it needs."""

    change: str | None
    run: TrainRun | None
    memory: TrainMemory | None


def fitting_change(run: TrainRun, gpu: GpuSpec) -> FitAdvice:
    """The smallest change that makes ``run`` fit on ``gpu`` (memory only, no forecast): the first single change
    of :func:`_steps` that fits; else the cheapest changes together (greedily, in :data:`CHANGES` order, each kept
    only while it lowers the memory) until the run fits."""
    steps = _steps(run)
    for label, apply in steps:
        try:
            candidate = apply(run)
        except (TrainRunError, LayoutError):
            continue
        mem = train_memory(candidate, gpu)
        if mem.fits:
            return FitAdvice(label, candidate, mem)
    current, labels, best = run, [], train_memory(run, gpu).total_bytes
    for label, apply in steps:
        try:
            candidate = apply(current)
        except (TrainRunError, LayoutError):
            continue
        mem = train_memory(candidate, gpu)
        if mem.total_bytes >= best:
            continue
        current, best = candidate, mem.total_bytes
        labels = [lab for lab in labels if lab.split("=")[0] != label.split("=")[0]] + [label]
        if mem.fits:
            return FitAdvice(" ".join(labels), current, mem)
    return FitAdvice(None, None, None)


__all__ = ["CHANGES", "CONTEXT_GIB", "FRAGMENTATION", "FitAdvice", "RankShape", "TrainMemory", "fitting_change",
           "rank_shape", "stage_layers", "train_memory"]
