"""Forecast a training run at scale: step time, tokens/s per GPU, MFU / HFU, memory per GPU, fit, cost.

The step (docs/method.md §19), for the fullest pipeline stage of one data rank:

1. **one micro-batch's kernels** (:func:`tilecast.forecast.train_graph.micro_batch_graph`, priced by the kernel
   predictors like every other graph): forward, backward, the tp all-reduces between them (exposed: they
   sit on the critical path), per block and outside the blocks; full checkpointing adds each block's
   forward again before its backward, selective the attention's; context parallelism's ring exchange of
   keys and values runs under the block's attention and only its excess is exposed;
2. **the data-parallel collectives** on a second stream (:mod:`tilecast.forecast.overlap`,
   :mod:`tilecast.forecast.netcomm`): ZeRO-3 / FSDP all-gathers each block's bf16 weights before its forward
   (the next one prefetched, at most :data:`~tilecast.forecast.train_memory.UNITS_IN_FLIGHT` in flight) and
   again before its backward, and reduce-scatters its gradients after it, every micro-batch; ZeRO-2 gathers
   in the forward only; hybrid sharding also all-reduces each gradient shard across the nodes' replicas;
   DDP (``none``) and ZeRO-1 all-reduce (reduce-scatter) each block's gradients under the backward of the
   last micro-batch only (``no_sync`` before); the root (embeddings, head) is gathered before the forward and
   reduced after the backward;
3. **the step**: ``grad_accum`` micro-batches (``grad_accum + pp - 1`` stage times with pipeline stages:
   the 1F1B / GPipe fill and drain, plus a send / receive per micro-batch and direction), the optimizer's
   fused update over the rank's shard of the trainable parameters (its fp32 tensors read and written once
   at the memory bandwidth), the gradient-norm clip (the gradients read once), and ZeRO-1's all-gather of the
   updated weights.

Each collective kind is reported with its total time and the part compute waited for it (exposed); the
rest ran hidden under compute. Memory: :mod:`tilecast.forecast.train_memory`. A run that does not fit is
still forecast, with ``fits = False``, the memory it needs and the smallest change that fits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.mfu import flops_per_token, hardware_flops_per_token, utilisation_pct
from tilecast.forecast.netcomm import NetworkComm, placement
from tilecast.forecast.ops import op_latency_matrix
from tilecast.forecast.overlap import Schedule, Timeline, simulate
from tilecast.forecast.train_graph import micro_batch_graph
from tilecast.forecast.train_memory import (
    UNITS_IN_FLIGHT,
    FitAdvice,
    RankShape,
    TrainMemory,
    fitting_change,
    rank_shape,
    stage_layers,
    train_memory,
)
from tilecast.forecast.workload import check_gpu_dtype, graph_frame
from tilecast.graph.build import recorded, scalable, with_blocks
from tilecast.specs import GpuSpec, Workload, get_gpu
from tilecast.specs.train_run import LORA_BASE_BYTES, OPTIMIZERS, TrainRun
from tilecast.tiles.dtypes import DTYPE_BYTES, compute_dtype, op_dtype

GIB = float(2**30)
S_PER_DAY = 86400.0
#: FSDP gathers the weights in the compute dtype (mixed precision's ``param_dtype``)
GATHER_BYTES = 2
#: collective kinds of the step, in report order
COMM_KINDS = ("tp_all_reduce", "cp_ring", "all_gather", "reduce_scatter", "all_reduce", "pp_send_recv",
              "post_step_all_gather")


@dataclass(frozen=True)
class MicroBatchTimes:
    """ms one rank spends on one micro-batch's kernels: per block (``*_layer``) and outside (``pro`` before the
    blocks, ``epi`` after them, loss included), tp all-reduces included; ``attn_fw_layer`` is the attention's
    share of a block's forward (what selective checkpointing recomputes), ``tp_*`` the tp all-reduces'."""

    fw_pro: float
    fw_layer: float
    fw_epi: float
    bw_pro: float
    bw_layer: float
    bw_epi: float
    acc_layer: float
    acc_root: float
    attn_fw_layer: float
    attn_bw_layer: float
    tp_layer: float = 0.0
    tp_root: float = 0.0


def micro_batch_times(frame: pd.DataFrame, ms: np.ndarray, num_layers: int) -> MicroBatchTimes:
    """Sum an op frame's per-instance ``ms`` by phase and section (per block for the layers)."""
    total = ms * frame["count"].to_numpy(dtype=float)
    kind = frame["kind"].to_numpy(dtype=object)
    phase, section = frame["phase"].to_numpy(dtype=object), frame["section"].to_numpy(dtype=object)
    comm = np.isin(kind, ("allreduce", "sendrecv"))
    L = max(1, num_layers)

    def s(ph: str, sec: str, mask: np.ndarray | None = None) -> float:
        m = (phase == ph) & (section == sec)
        return float(total[m if mask is None else m & mask].sum())

    attn_names = set(frame.loc[frame["kind"] == "attn", "name"])
    core = (kind == "attn") | np.isin(frame["name"].to_numpy(dtype=object), [f"{n}.grad" for n in attn_names])
    if not attn_names:  # eager attention: the score / context GEMMs and the softmax
        core = (kind == "bmm") | (frame["op"].to_numpy(dtype=object) == "softmax")
    layer = section == "layer"
    return MicroBatchTimes(
        fw_pro=s("fw", "prologue"), fw_layer=s("fw", "layer") / L, fw_epi=s("fw", "epilogue"),
        bw_pro=s("bw", "prologue"), bw_layer=s("bw", "layer") / L, bw_epi=s("bw", "epilogue"),
        acc_layer=s("acc", "layer") / L, acc_root=s("acc", "prologue") + s("acc", "epilogue"),
        attn_fw_layer=float(total[(phase == "fw") & layer & core].sum()) / L,
        attn_bw_layer=float(total[(phase == "bw") & layer & core].sum()) / L,
        tp_layer=float(total[layer & comm].sum()) / L, tp_root=float(total[~layer & comm].sum()))


@dataclass(frozen=True)
class CommSizes:
    """Bytes of each data-parallel collective of one micro-batch (the messages' full sizes)."""

    gather_layer: float  # one block's weights, gathered
    reduce_layer: float  # one block's gradients, reduce-scattered / all-reduced
    gather_root: float
    reduce_root: float


def comm_sizes(run: TrainRun, shape: RankShape) -> CommSizes:
    """Collective sizes from the rank's parameter counts: weights gathered at bf16 (a frozen nf4 base in nf4),
    gradients reduced in ``grad_reduce_dtype``."""
    red = DTYPE_BYTES[run.grad_reduce_dtype]
    root_params = shape.pro_params + shape.epi_params - (shape.tied if run.pp == 1 else 0.0)
    root_train = shape.pro_trainable + shape.epi_trainable
    if run.lora_rank:
        base = LORA_BASE_BYTES[run.lora_base_dtype]
        frozen_layer = shape.layer_params - shape.layer_trainable
        gather_layer = frozen_layer * min(base, GATHER_BYTES) + shape.layer_trainable * GATHER_BYTES
        gather_root = root_params * GATHER_BYTES
    else:
        gather_layer, gather_root = shape.layer_params * GATHER_BYTES, root_params * GATHER_BYTES
    return CommSizes(gather_layer, shape.layer_trainable * red, gather_root, root_train * red)


@dataclass(frozen=True)
class StepParts:
    """One step's wall-clock parts (ms) and the collectives' totals, exposed parts (compute waited for them) and
    contention (compute slowed while they ran hidden under it: NCCL's SMs), ms per step."""

    step_ms: float
    micro_batches_ms: float
    optimizer_ms: float
    clip_ms: float
    bubble_ms: float
    compute_ms: float
    recompute_ms: float
    comm_total_ms: dict[str, float]
    comm_exposed_ms: dict[str, float]
    comm_contention_ms: dict[str, float] = field(default_factory=dict)


def _per_layer_compute(run: TrainRun, mb: MicroBatchTimes, cp_fw_ms: float, cp_bw_ms: float
                       ) -> tuple[float, float, float]:
    """(forward, backward incl. recompute and accumulation, recompute) ms of one block on the compute stream,
    the exposed part of context parallelism's exchange included."""
    recompute = {"full": mb.fw_layer, "selective": mb.attn_fw_layer}.get(run.activation_checkpointing, 0.0)
    acc = mb.acc_layer / run.shard_group if run.sharding in ("zero2", "zero3", "hybrid") else mb.acc_layer
    fw = mb.fw_layer + max(0.0, cp_fw_ms - mb.attn_fw_layer)
    bw = mb.bw_layer + acc + recompute + max(0.0, cp_bw_ms - mb.attn_bw_layer)
    return fw, bw, recompute


def _micro_batch(run: TrainRun, mb: MicroBatchTimes, times: dict[str, float], n_layers: int, first: bool,
                 last: bool, with_dp_comm: bool, contention: float = 0.0) -> Timeline:
    """Simulate one micro-batch of one pipeline stage (``first`` / ``last``: holds the embeddings / the head)."""
    s = Schedule()
    level = run.sharding
    gathers_fw = with_dp_comm and level in ("zero2", "zero3", "hybrid")
    gathers_bw = with_dp_comm and level in ("zero3", "hybrid")
    reduces = with_dp_comm
    red_kind = "all_reduce" if level == "none" else "reduce_scatter"
    fw_l, bw_l = times["fw_layer"], times["bw_layer"]
    root = first or last
    root_ag = s.comm(times["gather_root"], "all_gather") if gathers_fw and root else None
    prev = s.compute(mb.fw_pro + (mb.tp_root if first else 0.0), "fw", root_ag) if first else None
    depth = max(1, UNITS_IN_FLIGHT)  # blocks gathered at once (FSDP's limit_all_gathers)
    ag: dict[int, int] = {}
    if gathers_fw:
        for i in range(min(depth, n_layers)):
            ag[i] = s.comm(times["gather_layer"], "all_gather")
    for i in range(n_layers):
        prev = s.compute(fw_l, "fw", ag.get(i), prev)
        if gathers_fw and i + depth < n_layers:
            ag[i + depth] = s.comm(times["gather_layer"], "all_gather", prev)
    if last:
        prev = s.compute(mb.fw_epi + mb.bw_epi, "fw", prev)
    bag: dict[int, int] = {}
    if gathers_bw:
        for i in range(n_layers - 1, max(-1, n_layers - 1 - depth), -1):
            bag[i] = s.comm(times["gather_layer"], "all_gather", prev)
    for i in range(n_layers - 1, -1, -1):
        prev = s.compute(bw_l, "bw", bag.get(i), prev)
        if gathers_bw and i - depth >= 0:
            bag[i - depth] = s.comm(times["gather_layer"], "all_gather", prev)
        if reduces:
            r = s.comm(times["reduce_layer"], red_kind, prev)
            if level == "hybrid":
                s.comm(times["replica_layer"], "all_reduce", r)
    if first:
        prev = s.compute(mb.bw_pro + mb.acc_root, "bw", prev)
    if reduces and root:
        r = s.comm(times["reduce_root"], red_kind, prev)
        if level == "hybrid":
            s.comm(times["replica_root"], "all_reduce", r)
    return simulate(s.tasks, contention)


def _collective_times(run: TrainRun, gpu: GpuSpec, comm: NetworkComm, sizes: CommSizes) -> dict[str, float]:
    """ms of each data-parallel collective (module docstring), on the placement of its group."""
    g = run.gpus_per_node
    shard = placement(run.shard_group if run.sharding != "none" else run.dp * run.cp, run.tp, g)
    gather = lambda b: float(comm.collective_ms("all_gather", b, gpu, shard))  # noqa: E731
    reduce_op = "all_reduce" if run.sharding == "none" else "reduce_scatter"
    reduce = lambda b: float(comm.collective_ms(reduce_op, b, gpu, shard))  # noqa: E731
    out = {"gather_layer": gather(sizes.gather_layer), "gather_root": gather(sizes.gather_root),
           "reduce_layer": reduce(sizes.reduce_layer), "reduce_root": reduce(sizes.reduce_root)}
    if run.sharding == "hybrid":
        replicas = placement(run.replicas, g, g)
        n = run.shard_group
        out["replica_layer"] = float(comm.collective_ms("all_reduce", sizes.reduce_layer / n, gpu, replicas))
        out["replica_root"] = float(comm.collective_ms("all_reduce", sizes.reduce_root / n, gpu, replicas))
    return out


def _cp_exchange_ms(run: TrainRun, gpu: GpuSpec, comm: NetworkComm) -> tuple[float, float]:
    """Context parallelism's ring of keys and values per block: forward sends ``cp - 1`` chunks of K and V,
    backward those again and their gradients."""
    if run.cp == 1:
        return 0.0, 0.0
    spec = run.model
    kv_heads = max(1, spec.num_kv_heads // run.tp) if spec.num_kv_heads >= run.tp else 1
    chunk = run.micro_batch * run.seq_len // run.cp * kv_heads * spec.head_dim * 2 * DTYPE_BYTES[
        compute_dtype(run.dtype)]
    where = placement(run.cp, run.tp, run.gpus_per_node)
    one = float(comm.sendrecv_ms(chunk * (run.cp - 1), gpu, not where.intra_node))
    return one, 2.0 * one


#: thread blocks NCCL's data-parallel collectives hold while they run (one per channel, each on an SM the compute
#: stream then lacks): NCCL's channel cap of the 2023 releases (``MAXCHANNELS``), an upper bound of the SM share and
#: not fitted; ``benchmarks/training_at_scale.md`` shows what 0-64 would give
NCCL_CHANNELS = 32.0


def nccl_sm_share(gpu: GpuSpec, channels: float = NCCL_CHANNELS) -> float:
    """Share of ``gpu``'s SMs NCCL's ``channels`` hold while a collective runs (the compute stream's loss)."""
    return min(0.9, max(0.0, float(channels)) / max(1, gpu.num_sm))


def step_parts(run: TrainRun, gpu: GpuSpec, mb: MicroBatchTimes, shape: RankShape, comm: NetworkComm,
               nccl_channels: float | None = None) -> StepParts:
    """Assemble one step from a micro-batch's kernel times (module docstring); ``nccl_channels``: the SMs NCCL's
    collectives hold while compute runs (None: :data:`NCCL_CHANNELS`)."""
    contention = nccl_sm_share(gpu, NCCL_CHANNELS if nccl_channels is None else nccl_channels)
    cp_fw, cp_bw = _cp_exchange_ms(run, gpu, comm)
    fw_l, bw_l, recompute = _per_layer_compute(run, mb, cp_fw, cp_bw)
    times = {"fw_layer": fw_l + mb.tp_layer * _tp_fw_share(mb), "bw_layer": bw_l + mb.tp_layer * (
        1 - _tp_fw_share(mb)), **_collective_times(run, gpu, comm, comm_sizes(run, shape))}
    n_layers = stage_layers(run, shape.layers)
    ga, pp = run.grad_accum, run.pp
    stages = [(True, True)] if pp == 1 else [(True, False), (False, True)]
    per_stage = []
    for first, last in stages:
        dp_every = run.sharding in ("zero2", "zero3", "hybrid")
        with_comm = _micro_batch(run, mb, times, n_layers, first, last, True, contention)
        plain = with_comm if dp_every else _micro_batch(run, mb, times, n_layers, first, last, False)
        per_stage.append((with_comm, plain))
    slow = max(range(len(per_stage)), key=lambda i: per_stage[i][1].end_ms)
    with_comm, plain = per_stage[slow]
    dp_every = run.sharding in ("zero2", "zero3", "hybrid")
    slots = ga + pp - 1
    sendrecv = 0.0
    if pp > 1:
        spec = run.model
        act = run.micro_batch * run.seq_len // run.cp * spec.hidden_size * DTYPE_BYTES[compute_dtype(run.dtype)]
        across = run.n_gpus // pp >= run.gpus_per_node
        sendrecv = 2.0 * float(comm.sendrecv_ms(act, gpu, across))
    stage_ms = (with_comm.end_ms if dp_every else plain.end_ms) + sendrecv
    micro_ms = slots * stage_ms + (0.0 if dp_every else with_comm.end_ms - plain.end_ms)
    bubble = (pp - 1) * stage_ms
    # optimizer and clipping over the rank's shard of the trainable parameters
    trainable = n_layers * shape.layer_trainable + (shape.pro_trainable + shape.epi_trainable if pp == 1 else max(
        shape.pro_trainable, shape.epi_trainable))
    local = trainable / (run.shard_group if run.sharding != "none" else 1)
    bytes_per_ms = gpu.mem_bw_gbs * GIB / 1e3
    optimizer = local * 4 * OPTIMIZERS[run.optimizer].step_passes / bytes_per_ms
    grad_bytes = 4 if run.dtype == "amp_bf16" else 2
    clip = local * grad_bytes / bytes_per_ms
    post = 0.0
    if run.sharding == "zero1":
        shard = placement(run.shard_group, run.tp, run.gpus_per_node)
        post = float(comm.collective_ms("all_gather", trainable * GATHER_BYTES, gpu, shard))
    totals: dict[str, float] = {k: 0.0 for k in COMM_KINDS}
    exposed: dict[str, float] = {k: 0.0 for k in COMM_KINDS}
    slowed: dict[str, float] = {k: 0.0 for k in COMM_KINDS}
    n_comm = slots if dp_every else 1
    for kind, ms in with_comm.comm_ms.items():
        totals[kind] += ms * n_comm
    for kind, ms in with_comm.exposed_ms.items():
        exposed[kind] += ms * n_comm
    for kind, ms in with_comm.contention_ms.items():
        slowed[kind] += ms * n_comm
    totals["tp_all_reduce"] = exposed["tp_all_reduce"] = (mb.tp_layer * n_layers + mb.tp_root) * slots
    totals["cp_ring"] = (cp_fw + cp_bw) * n_layers * slots
    exposed["cp_ring"] = (max(0.0, cp_fw - mb.attn_fw_layer) + max(0.0, cp_bw - mb.attn_bw_layer)) * n_layers * slots
    totals["pp_send_recv"] = exposed["pp_send_recv"] = sendrecv * slots
    totals["post_step_all_gather"] = exposed["post_step_all_gather"] = post
    compute = (plain.compute_ms if not dp_every else with_comm.compute_ms) * slots
    step = micro_ms + optimizer + clip + post
    return StepParts(step, micro_ms, optimizer, clip, bubble, compute, recompute * n_layers * slots,
                     {k: v for k, v in totals.items() if v > 0}, {k: v for k, v in exposed.items() if v > 0},
                     {k: v for k, v in slowed.items() if v > 0})


def _tp_fw_share(mb: MicroBatchTimes) -> float:
    """Share of a block's tp all-reduce time in its forward (Megatron: one per row-parallel linear forward,
    one per column-parallel input gradient backward: about half each)."""
    return 0.5 if mb.tp_layer else 0.0


def mfu_peak_flops(gpu: GpuSpec, dtype: str) -> float:
    """The peak MFU is measured against: the GPU's dense bf16 peak (as llm-foundry's tables count it, fp8 runs
    included), else the peak of the dtype the linears run in."""
    ref = "bf16" if gpu.supports("bf16") else op_dtype(dtype, "linear")
    return gpu.peak_gflops(ref) * 1e9


def model_params(run: TrainRun) -> float:
    """Parameters of the model as the run trains it (tied once, the position table at the run's length), the
    ``N`` of llm-foundry's MFU."""
    spec = run.model
    wl = Workload(spec, 1, 1, "training")
    if not scalable(spec):
        return float(recorded(wl).num_params)
    two, three = (recorded(with_blocks(wl, n)).num_params for n in (2, 3))
    return float(three + (spec.num_layers - 3) * (three - two))


@dataclass(frozen=True)
class TrainRunForecast:
    """A training run's forecast: per step, per token, per GPU; see :func:`forecast_train_run`."""

    run: TrainRun
    gpu: str
    parts: StepParts
    memory: TrainMemory
    mfu_pct: float
    hfu_pct: float
    n_params: float
    advice: FitAdvice | None = None
    usd_per_gpu_hour: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def step_s(self) -> float:
        return self.parts.step_ms / 1e3

    @property
    def tokens_per_s(self) -> float:
        return self.run.tokens_per_step / self.step_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.run.n_gpus

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def usd_per_1b_tokens(self) -> float | None:
        if self.usd_per_gpu_hour is None:
            return None
        return self.usd_per_gpu_hour * self.run.n_gpus / 3600.0 / self.tokens_per_s * 1e9

    def days_to_train(self, tokens: float) -> float:
        """Days to train on ``tokens`` tokens at this rate."""
        return tokens / self.tokens_per_s / S_PER_DAY

    def to_dict(self, train_tokens: float | None = None) -> dict[str, Any]:
        """JSON-ready: the run, step time, throughput, utilisation, time parts, collectives (total, exposed,
        hidden), memory (GiB), fit and the change that fits, cost."""
        r, p = self.run, self.parts
        out = {
            "model": r.model.key, "gpu": self.gpu, "n_gpus": r.n_gpus, "gpus_per_node": r.gpus_per_node,
            "nodes": r.nodes, "seq_len": r.seq_len, "micro_batch": r.micro_batch, "grad_accum": r.grad_accum,
            "global_batch": r.global_batch, "dtype": r.dtype, "sharding": r.sharding, "tp": r.tp, "pp": r.pp,
            "cp": r.cp, "dp": r.dp, "activation_checkpointing": r.activation_checkpointing,
            "optimizer": r.optimizer, "lora_rank": r.lora_rank,
            "network": r.network.tag if r.network else None,
            "step_s": self.step_s, "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu, "mfu_pct": self.mfu_pct, "hfu_pct": self.hfu_pct,
            "n_params": self.n_params,
            "time_ms": {"micro_batches": p.micro_batches_ms, "compute": p.compute_ms, "recompute": p.recompute_ms,
                        "pipeline_bubble": p.bubble_ms, "optimizer": p.optimizer_ms, "grad_clip": p.clip_ms},
            "collectives_ms": {k: {"total": p.comm_total_ms[k], "exposed": p.comm_exposed_ms.get(k, 0.0),
                                   "hidden": p.comm_total_ms[k] - p.comm_exposed_ms.get(k, 0.0),
                                   "contention": p.comm_contention_ms.get(k, 0.0)}
                               for k in COMM_KINDS if k in p.comm_total_ms},
            "memory_gib": self.memory.as_gib(), "fits": self.fits,
            "fits_with": self.advice.change if self.advice else None,
            "fits_with_memory_gib": self.advice.memory.total_bytes / GIB if self.advice and self.advice.memory
            else None,
            "usd_per_gpu_hour": self.usd_per_gpu_hour, "usd_per_1b_tokens": self.usd_per_1b_tokens,
            "notes": list(self.notes),
        }
        if train_tokens:
            out["train_tokens"] = train_tokens
            out["days_to_train"] = self.days_to_train(train_tokens)
        return out

    def describe(self, train_tokens: float | None = None) -> str:
        """Lines for people: step, throughput, MFU, where the time goes, collectives, memory, fit, cost (not the
        notes: the caller prints them with its own)."""
        p, m = self.parts, self.memory.as_gib()
        lines = [f"{self.run.describe()} on {self.gpu}",
                 f"  step {self.step_s:.3f} s   {self.tokens_per_s_per_gpu:,.0f} tokens/s/GPU   "
                 f"{self.tokens_per_s:,.0f} tokens/s   MFU {self.mfu_pct:.1f}%   HFU {self.hfu_pct:.1f}%",
                 f"  micro-batches {p.micro_batches_ms:.1f} ms (compute {p.compute_ms:.1f}, of which recompute "
                 f"{p.recompute_ms:.1f}; pipeline bubble {p.bubble_ms:.1f})   optimizer {p.optimizer_ms:.2f} ms   "
                 f"grad clip {p.clip_ms:.2f} ms"]
        for k in COMM_KINDS:
            if k in p.comm_total_ms:
                tot, exp = p.comm_total_ms[k], p.comm_exposed_ms.get(k, 0.0)
                slow = p.comm_contention_ms.get(k, 0.0)
                lines.append(f"  {k:<22}{tot:10.2f} ms per step: {exp:.2f} exposed, {tot - exp:.2f} hidden"
                             + (f" (slowing compute by {slow:.2f})" if slow > 0 else ""))
        lines.append("  memory per GPU " + ", ".join(f"{k.replace('_gib', '')} {v:.2f}" for k, v in m.items()
                                                      if k not in ("capacity_gib", "total_gib"))
                     + f" GiB: {m['total_gib']:.2f} of {m['capacity_gib']:.0f} GiB "
                     + ("(fits)" if self.fits else "(DOES NOT FIT)"))
        if not self.fits:
            lines.append("  fits with " + (f"{self.advice.change} ({self.advice.memory.total_bytes / GIB:.2f} GiB)"
                                           if self.advice and self.advice.change else
                                           "none of the changes tried (sharding, checkpointing, micro-batch, tp, "
                                           "up to 16x GPUs)"))
        if self.usd_per_gpu_hour is not None:
            cost = f"  cost {self.usd_per_1b_tokens:,.2f} USD per 1B tokens ({self.usd_per_gpu_hour:.2f} USD/GPU-h)"
            if train_tokens:
                cost += f"; {train_tokens:.3g} tokens in {self.days_to_train(train_tokens):,.2f} days"
            lines.append(cost)
        return "\n".join(lines)


def comm_model(run: TrainRun) -> NetworkComm:
    """The collectives' timing for ``run``: its network override's bandwidth, else the GPU's catalog one."""
    return NetworkComm(nic_gbs=run.network.gbs if run.network else None)


def micro_batch_frame(run: TrainRun) -> pd.DataFrame:
    """The op frame of one micro-batch on one rank (``attrs``: num_layers, degree = tp)."""
    return graph_frame(micro_batch_graph(run))


#: a fused attention's backward as a multiple of its forward kernel's predicted time. FlashAttention's backward
#: recomputes the forward's tiles and runs five matmuls where the forward runs two (2.5x its FLOPs) at a lower FLOP
#: rate than the forward (atomics on dQ, more shared-memory traffic), and the attention predictors learn inference
#: forward kernels only. Fitted on the public llm-foundry rows (one number; kernel predictors as registered, NCCL
#: contention at :data:`NCCL_CHANNELS`) by ``benchmarks/training_at_scale.py``, which validates it leave one GPU
#: out, leave one model size out and leave one sequence length out; it is about twice the FLOP ratio.
FLASH_BACKWARD_FACTOR = 5.0


def flash_backward(frame: pd.DataFrame, ms: np.ndarray, factor: float | None = None) -> np.ndarray:
    """``ms`` with each fused attention's backward priced as ``factor`` (default :data:`FLASH_BACKWARD_FACTOR`) x
    its forward kernel's predicted time, spread over the graph's backward ops of it (the training expansion's five
    GEMMs over the causal half, which as standalone GEMMs would write the score matrix FlashAttention never
    materialises)."""
    out = ms.copy()
    names = frame["name"].to_numpy(dtype=object)
    fw = (frame["kind"].to_numpy(dtype=object) == "attn") & (frame["phase"].to_numpy(dtype=object) == "fw")
    count = frame["count"].to_numpy(dtype=float)
    for i in np.flatnonzero(fw):
        grads = np.flatnonzero(names == f"{names[i]}.grad")
        if len(grads):
            instances = count[grads].sum() / max(count[i], 1.0)  # backward ops per forward instance
            out[grads] = (FLASH_BACKWARD_FACTOR if factor is None else factor) * ms[i] / instances
    return out


#: how a fused attention's backward is priced: ``flash`` (the default, :func:`flash_backward`) or ``gemms`` (the
#: training expansion's five GEMMs as the GEMM predictor prices them, docs/method.md §15: 4x the forward at head
#: size 128, 6.7x at 64); benchmarks/training_at_scale.md measures both
ATTENTION_BACKWARD = ("flash", "gemms")
DEFAULT_ATTENTION_BACKWARD = "flash"


def attention_backward_ms(frame: pd.DataFrame, ms: np.ndarray, how: str = DEFAULT_ATTENTION_BACKWARD,
                          factor: float | None = None) -> np.ndarray:
    """Kernel ``ms`` of a micro-batch frame with its fused attentions' backward priced ``how``
    (:data:`ATTENTION_BACKWARD`); what every training forecast (the scorer's too) applies to the predictors' ms."""
    if how not in ATTENTION_BACKWARD:
        raise ValueError(f"attention_backward must be one of {', '.join(ATTENTION_BACKWARD)}, got {how!r}")
    return flash_backward(frame, ms, factor) if how == "flash" else ms


def price_ms(frame: pd.DataFrame, run: TrainRun, gpu: GpuSpec, predict: FamilyPredictor | None,
             comm: NetworkComm, attention_backward: str = DEFAULT_ATTENTION_BACKWARD) -> np.ndarray:
    """Per-instance ms of the frame's ops: kernels by ``predict`` (a fused attention's backward as
    ``attention_backward`` says, :func:`attention_backward_ms`), tp all-reduces over the tp group's placement."""
    ms, _ = price_matrix(frame, run, [gpu], predict, comm, attention_backward, strict=True)
    return ms[:, 0]


def price_matrix(frame: pd.DataFrame, run: TrainRun, gpus: list[GpuSpec], predict: FamilyPredictor | None,
                 comm: NetworkComm, attention_backward: str = DEFAULT_ATTENTION_BACKWARD, strict: bool = False
                 ) -> tuple[np.ndarray, dict[str, str]]:
    """:func:`price_ms` on several GPUs at once: ms of shape (ops, GPUs), every kernel predicted once for all of
    them (:func:`~tilecast.forecast.ops.op_latency_matrix`), and the error of each GPU whose predictions failed
    (``strict``: raise instead)."""
    if attention_backward not in ATTENTION_BACKWARD:
        raise ValueError(f"attention_backward must be one of {', '.join(ATTENTION_BACKWARD)}, got "
                         f"{attention_backward!r}")
    ms, errors = op_latency_matrix(frame, gpus, predict, strict=strict)
    ar = frame["kind"].to_numpy(dtype=object) == "allreduce"
    where = placement(run.tp, 1, run.gpus_per_node) if ar.any() else None
    nbytes = frame["bytes"].to_numpy(dtype=float)[ar]
    for j, gpu in enumerate(gpus):
        ms[:, j] = attention_backward_ms(frame, ms[:, j], attention_backward)
        if where is not None:
            ms[ar, j] = comm.collective_ms("all_reduce", nbytes, gpu, where)
    return ms, errors


def assemble(run: TrainRun, gpu: GpuSpec, mb: MicroBatchTimes, shape: RankShape | None = None,
             pricing: Mapping[str, float] | None = None, advise: bool = True, nccl_channels: float | None = None,
             comm: NetworkComm | None = None) -> TrainRunForecast:
    """The forecast from one micro-batch's kernel times (what the grid scorer computes for many GPUs at once);
    ``nccl_channels``: see :func:`step_parts`; ``comm``: the collectives' timing (None: :func:`comm_model`)."""
    shape = shape or rank_shape(run)
    comm = comm or comm_model(run)
    parts = step_parts(run, gpu, mb, shape, comm, nccl_channels)
    mem = train_memory(run, gpu, shape)
    n_params = model_params(run)
    spec = run.model
    peak = mfu_peak_flops(gpu, run.dtype)
    tps_gpu = run.tokens_per_step / (parts.step_ms / 1e3) / run.n_gpus
    mfu = utilisation_pct(tps_gpu, flops_per_token(n_params, shape.layers, spec.hidden_size, run.seq_len), peak)
    hfu = utilisation_pct(tps_gpu, hardware_flops_per_token(n_params, shape.layers, spec.hidden_size, run.seq_len,
                                                            run.activation_checkpointing), peak)
    advice = fitting_change(run, gpu) if advise and not mem.fits else None
    notes = []
    if not run.network and not gpu.network_gbs and run.nodes > 1:
        notes.append(f"{gpu.key} lists no network bandwidth: 25 GB/s per GPU assumed (give network=<fabric>:<Gb/s>)")
    price = None if pricing is None else pricing.get(gpu.key.split("+", 1)[0])
    return TrainRunForecast(run, gpu.key, parts, mem, mfu, hfu, n_params, advice, price, tuple(notes))


def forecast_train_run(run: TrainRun, gpu: GpuSpec | str, predict: FamilyPredictor | None = None,
                       pricing: Mapping[str, float] | None = None,
                       attention_backward: str = DEFAULT_ATTENTION_BACKWARD
                       ) -> TrainRunForecast:
    """Forecast ``run`` on ``gpu`` with kernel predictor ``predict`` (default: the roofline); ``pricing``: USD per
    GPU-hour by GPU key (for the cost); ``attention_backward``: see :func:`price_ms`. A dtype the GPU has no peak
    for raises :class:`~tilecast.specs.UnsupportedDtypeError`; a bad run was refused when it was built."""
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    check_gpu_dtype(gpu, run.dtype)
    frame = micro_batch_frame(run)
    ms = price_ms(frame, run, gpu, predict, comm_model(run), attention_backward)
    mb = micro_batch_times(frame, ms, int(frame.attrs["num_layers"]))
    return assemble(run, gpu, mb, pricing=pricing)


__all__ = ["ATTENTION_BACKWARD", "COMM_KINDS", "DEFAULT_ATTENTION_BACKWARD", "FLASH_BACKWARD_FACTOR", "NCCL_CHANNELS",
           "CommSizes", "MicroBatchTimes", "StepParts", "TrainRunForecast", "assemble", "attention_backward_ms",
           "comm_model", "comm_sizes", "flash_backward", "forecast_train_run", "micro_batch_frame", "micro_batch_times",
           "model_params", "nccl_sm_share", "price_matrix", "price_ms", "step_parts"]
