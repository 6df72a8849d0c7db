"""A training run at scale: model, sequence, batch split and layout over GPUs (frozen, validated).

The layout is a value: ``n_gpus`` GPUs in nodes of ``gpus_per_node``, split into ``tp`` (tensor) x ``pp``
(pipeline stages) x ``cp`` (context) x ``dp`` (data) ranks, ``dp = n_gpus / (tp pp cp)``. Each data rank runs
``grad_accum`` micro-batches of ``micro_batch`` sequences of ``seq_len`` tokens per step, so the global batch is
``micro_batch x grad_accum x dp`` sequences (give ``grad_accum`` or ``global_batch``). ``sharding`` says what the
data ranks (x context ranks) split among themselves (:data:`SHARDINGS`): nothing (``none``, DDP), the optimizer
state (``zero1``), + the gradients (``zero2``, FSDP ``SHARD_GRAD_OP``), + the weights (``zero3``, FSDP
``FULL_SHARD``), or ``hybrid`` (FSDP ``HYBRID_SHARD``: zero3 inside a node, replicas across nodes).
``activation_checkpointing`` is ``none``, ``full`` (every block's forward recomputed in backward) or
``selective`` (the attention core recomputed). ``dtype``: ``amp_bf16`` (bf16 compute, fp32 weights, grads and
optimizer), ``bf16`` (bf16 weights and grads, fp32 master and optimizer) or ``fp8`` (fp8 linears, the rest as
bf16). ``optimizer``: ``adamw`` (two fp32 moments), ``lion`` or ``sgd`` (momentum: one). ``lora_rank > 0``
fine-tunes low-rank adapters on every linear of the blocks, the base frozen in ``lora_base_dtype`` (bf16, or
``nf4``: 4-bit, QLoRA). ``network`` overrides the GPU's catalog network (fabric and Gb/s per GPU).

Bad input raises a named :class:`~tilecast.specs.SpecError` (a job's exit 2): :class:`LayoutError`,
:class:`BatchSplitError`, :class:`UnknownShardingError`, :class:`LoraError`, :class:`TrainRunError`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from tilecast.specs.layout import LayoutError  # the one layout error: GPUs that do not split into the layout
from tilecast.specs.model import ModelSpec, get_model
from tilecast.specs.workload import WorkloadError


class TrainRunError(WorkloadError):
    """A training run that cannot be built (names the setting and the value)."""


class BatchSplitError(TrainRunError):
    """A global batch that does not split into ``micro_batch x grad_accum x dp``."""


class UnknownShardingError(TrainRunError):
    """A sharding strategy that is not one of :data:`SHARDINGS` (lists the known ones)."""


class LoraError(TrainRunError):
    """LoRA asked of a model it cannot apply to (no linear layer in its blocks), or a bad rank / base dtype."""


#: sharding strategy -> what the data ranks split: the names people use (DeepSpeed ZeRO stages, PyTorch FSDP)
SHARDINGS: dict[str, str] = {
    "none": "none", "ddp": "none", "no_shard": "none",
    "zero1": "zero1",
    "zero2": "zero2", "shard_grad_op": "zero2",
    "zero3": "zero3", "fsdp": "zero3", "fsdp_full": "zero3", "full_shard": "zero3",
    "hybrid": "hybrid", "hybrid_shard": "hybrid", "hsdp": "hybrid",
    "_hybrid_shard_zero2": "hybrid",  # FSDP's ZeRO-2 inside a node: modelled as hybrid (weights gathered in backward)
}
#: the canonical strategies, least sharded first
SHARDING_LEVELS = ("none", "zero1", "zero2", "zero3", "hybrid")
#: activation checkpointing setting -> canonical (``true`` / ``false`` as llm-foundry's yamls spell them)
CHECKPOINTING: dict[str, str] = {"none": "none", "false": "none", "off": "none", "full": "full", "true": "full",
                                 "on": "full", "selective": "selective"}


@dataclass(frozen=True)
class Optimizer:
    """An optimizer's fp32 state per trainable parameter and its step's memory traffic per parameter."""

    name: str
    state_bytes: int  # fp32 moments kept per parameter
    step_passes: int  # fp32 tensors the fused step reads + writes per parameter (param, grad, states)


#: optimizer -> its state (AdamW: exp_avg and exp_avg_sq; Lion and SGD with momentum: one buffer)
OPTIMIZERS: dict[str, Optimizer] = {
    "adamw": Optimizer("adamw", 8, 7),  # reads param, grad, m, v; writes param, m, v
    "lion": Optimizer("lion", 4, 5),  # reads param, grad, m; writes param, m
    "sgd": Optimizer("sgd", 4, 5),  # momentum: reads param, grad, buf; writes param, buf
}
#: workload dtypes a training run computes in
TRAIN_DTYPES = ("amp_bf16", "bf16", "fp8")
#: frozen-base storage of LoRA: bytes per weight (nf4: 4 bits plus one bf16 absmax per 64 weights, QLoRA's
#: double quantisation leaves ~0.127 bits of constants per weight)
LORA_BASE_BYTES: dict[str, float] = {"bf16": 2.0, "nf4": 0.5 + 0.127 / 8}
PP_SCHEDULES = ("1f1b", "gpipe")
#: fabrics a network override may name (the link efficiency is the same for all: nothing here measures a
#: difference; docs/method.md §19)
FABRICS = ("roce", "infiniband", "ethernet", "nvlink")
#: gradient reduction dtypes (FSDP mixed precision: composer's DEFAULT reduces in fp32, PURE in bf16)
REDUCE_DTYPES = ("bf16", "fp32")


@dataclass(frozen=True)
class Network:
    """The scale-out network: ``fabric`` and ``gbps_per_gpu`` Gb/s per GPU per direction (one NIC per GPU on
    rail-optimised nodes: 8 x 200 Gb/s = a 1600 Gb/s node)."""

    fabric: str
    gbps_per_gpu: float

    def __post_init__(self) -> None:
        if self.fabric not in FABRICS:
            raise TrainRunError(f"network fabric {self.fabric!r} is not one of {', '.join(FABRICS)}")
        g = self.gbps_per_gpu
        if isinstance(g, bool) or not isinstance(g, int | float) or not g > 0 or g != g or g == float("inf"):
            raise TrainRunError(f"network Gb/s per GPU must be a positive number, got {g!r}")

    @property
    def gbs(self) -> float:
        """GB/s per GPU per direction."""
        return self.gbps_per_gpu / 8.0

    @property
    def tag(self) -> str:
        return f"{self.fabric}:{self.gbps_per_gpu:g}"


_NETWORK = re.compile(r"^(?P<fabric>[a-z]+)\s*[:@ ]\s*(?P<gbps>[0-9.]+)\s*(?:gb/?s|gbps)?(?:/gpu)?$")


def parse_network(value: Any) -> Network | None:
    """``None`` / "" -> None (the GPU's catalog network); ``"roce:200"`` (Gb/s per GPU), a mapping
    ``{fabric, gbps_per_gpu}`` or a :class:`Network` -> :class:`Network`; anything else a :class:`TrainRunError`."""
    if value is None or isinstance(value, Network):
        return value
    if isinstance(value, dict) or hasattr(value, "items"):
        items = dict(value.items())
        unknown = sorted(set(items) - {"fabric", "gbps_per_gpu"})
        if unknown or "gbps_per_gpu" not in items:
            raise TrainRunError(f"network={items!r}: expected {{fabric: roce|infiniband|..., gbps_per_gpu: <Gb/s>}}")
        return Network(str(items.get("fabric", "infiniband")).lower(), items["gbps_per_gpu"])
    text = str(value).strip().lower()
    if text in ("", "none", "null", "catalog"):
        return None
    m = _NETWORK.match(text)
    if not m:
        raise TrainRunError(f"network={value!r} is not <fabric>:<Gb/s per GPU> (e.g. roce:200, infiniband:400)")
    return Network(m["fabric"], float(m["gbps"]))


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise TrainRunError(f"{name} must be a positive integer, got {value!r}")
    return value


def _choice(name: str, value: Any, table: dict[str, str] | tuple[str, ...], error: type = TrainRunError) -> str:
    key = str(value).strip().lower() if value is not None else "none"
    known = table if isinstance(table, tuple) else tuple(table)
    if key not in known:
        raise error(f"unknown {name} {value!r}; known: {', '.join(known)}")
    return table[key] if isinstance(table, dict) else key


@dataclass(frozen=True)
class TrainRun:
    """One training (or LoRA fine-tuning) run; see the module docstring. Construction validates and normalises
    every setting (``sharding="full_shard"`` -> ``zero3``, ``activation_checkpointing=True`` -> ``full``) and
    derives ``dp``, ``grad_accum`` and ``global_batch``."""

    model: ModelSpec
    seq_len: int
    micro_batch: int
    n_gpus: int
    grad_accum: int | None = None
    global_batch: int | None = None  # sequences per step
    gpus_per_node: int = 8
    dtype: str = "amp_bf16"
    sharding: str = "none"
    tp: int = 1
    pp: int = 1
    cp: int = 1
    pp_schedule: str = "1f1b"
    activation_checkpointing: Any = "none"
    optimizer: str = "adamw"
    lora_rank: int = 0
    lora_base_dtype: str = "bf16"
    grad_reduce_dtype: str = "bf16"
    network: Any = None  # Network | "roce:200" | None: the GPU's catalog network

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 - frozen: normalise in place
        if isinstance(self.model, str):
            set_("model", get_model(self.model))
        if not isinstance(self.model, ModelSpec):
            raise TrainRunError(f"model must be a ModelSpec or a catalog key, got {self.model!r}")
        for name in ("seq_len", "micro_batch", "n_gpus", "gpus_per_node", "tp", "pp", "cp"):
            _positive(name, getattr(self, name))
        if not isinstance(self.lora_rank, int) or isinstance(self.lora_rank, bool) or self.lora_rank < 0:
            raise LoraError(f"lora_rank must be a non-negative integer (0: full training), got {self.lora_rank!r}")
        set_("sharding", _choice("sharding", self.sharding, SHARDINGS, UnknownShardingError))
        ckpt = self.activation_checkpointing
        set_("activation_checkpointing", _choice("activation_checkpointing",
                                                 str(ckpt).lower() if isinstance(ckpt, bool) else ckpt,
                                                 CHECKPOINTING))
        set_("optimizer", _choice("optimizer", self.optimizer, tuple(OPTIMIZERS)))
        set_("dtype", _choice("dtype", self.dtype, TRAIN_DTYPES))
        set_("pp_schedule", _choice("pp_schedule", self.pp_schedule, PP_SCHEDULES))
        set_("grad_reduce_dtype", _choice("grad_reduce_dtype", self.grad_reduce_dtype, REDUCE_DTYPES))
        set_("lora_base_dtype", _choice("lora_base_dtype", self.lora_base_dtype, tuple(LORA_BASE_BYTES), LoraError))
        set_("network", parse_network(self.network))
        self._check_layout()
        self._check_batch()
        self._check_model()

    def _check_layout(self) -> None:
        split = self.tp * self.pp * self.cp
        if self.n_gpus % split:
            raise LayoutError(f"n_gpus={self.n_gpus} is not divisible by tp x pp x cp = {self.tp} x {self.pp} x "
                              f"{self.cp} = {split}")
        g = self.gpus_per_node
        if self.n_gpus > g and self.n_gpus % g:
            raise LayoutError(f"n_gpus={self.n_gpus} spans more than one node of gpus_per_node={g} but is not whole "
                              f"nodes ({self.n_gpus} % {g} = {self.n_gpus % g}); a multi-node layout needs whole nodes")
        if self.sharding == "hybrid":
            if self.n_gpus % g:
                raise LayoutError(f"sharding=hybrid shards inside a node and replicates across nodes: n_gpus="
                                  f"{self.n_gpus} must be whole nodes of gpus_per_node={g}")
            if g % (self.tp * self.cp) and (self.tp * self.cp) % g:
                raise LayoutError(f"sharding=hybrid: tp x cp = {self.tp * self.cp} does not tile a node of "
                                  f"gpus_per_node={g}")

    def _check_batch(self) -> None:
        dp, per_step = self.dp, self.micro_batch * self.dp
        if self.grad_accum is None and self.global_batch is None:
            raise BatchSplitError("give grad_accum or global_batch (sequences per step)")
        if self.grad_accum is not None:
            _positive("grad_accum", self.grad_accum)
        if self.global_batch is not None:
            _positive("global_batch", self.global_batch)
            if self.global_batch % per_step:
                raise BatchSplitError(f"global_batch={self.global_batch} is not divisible by micro_batch x dp = "
                                      f"{self.micro_batch} x {dp} = {per_step}")
            ga = self.global_batch // per_step
            if self.grad_accum is not None and self.grad_accum != ga:
                raise BatchSplitError(f"grad_accum={self.grad_accum} disagrees with global_batch={self.global_batch} "
                                      f"/ (micro_batch x dp = {per_step}) = {ga}")
            object.__setattr__(self, "grad_accum", ga)
        object.__setattr__(self, "global_batch", self.micro_batch * self.grad_accum * dp)

    def _check_model(self) -> None:
        m = self.model
        for field_ in ("num_heads", "num_kv_heads", "intermediate_size"):
            value = getattr(m, field_)
            if self.tp > 1 and value % self.tp:
                raise LayoutError(f"tp={self.tp} does not divide {m.key}'s {field_}={value}")
        layers = m.num_layers + m.num_decoder_layers
        if self.pp > layers:
            raise LayoutError(f"pp={self.pp} pipeline stages but {m.key} has {layers} layers")
        if self.cp > 1 and self.seq_len % (2 * self.cp):
            raise LayoutError(f"cp={self.cp}: seq_len={self.seq_len} must split into 2 x cp = {2 * self.cp} equal "
                              "chunks (load-balanced causal context parallel)")
        if m.max_positions and self.seq_len > m.max_positions:
            raise TrainRunError(f"seq_len={self.seq_len} exceeds {m.key}'s {m.max_positions} positions")
        if self.lora_rank and self.lora_base_dtype == "nf4" and self.dtype == "fp8":
            raise LoraError("lora_base_dtype=nf4 dequantises to bf16: use dtype=bf16 or amp_bf16 with it")

    # ------------------------------------------------------------------------------------------ derived

    @property
    def dp(self) -> int:
        """Data-parallel ranks: ``n_gpus / (tp x pp x cp)``."""
        return self.n_gpus // (self.tp * self.pp * self.cp)

    @property
    def nodes(self) -> int:
        return max(1, -(-self.n_gpus // self.gpus_per_node))

    @property
    def shard_group(self) -> int:
        """Ranks a sharded state is split over: dp x cp (zero1/2/3), the dp x cp ranks of one node (hybrid), 1."""
        if self.sharding == "none":
            return 1
        group = self.dp * self.cp
        if self.sharding == "hybrid":
            return max(1, min(group, self.gpus_per_node // (self.tp * self.cp) * self.cp))
        return group

    @property
    def replicas(self) -> int:
        """Copies of each shard across the data ranks (hybrid: the nodes' replicas; else dp x cp / shard group)."""
        return max(1, self.dp * self.cp // self.shard_group)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    @property
    def training_lora(self) -> bool:
        return self.lora_rank > 0

    def with_(self, **changes: Any) -> TrainRun:
        """The same run with ``changes`` (re-validated; ``global_batch`` kept unless changed)."""
        base = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if "grad_accum" not in changes and ("micro_batch" in changes or "n_gpus" in changes or "tp" in changes
                                            or "pp" in changes or "cp" in changes):
            base["grad_accum"] = None
        base.update(changes)
        return TrainRun(**base)

    def describe(self) -> str:
        """One line for people."""
        layout = " ".join(f"{k}={getattr(self, k)}" for k in ("tp", "pp", "cp") if getattr(self, k) > 1)
        lora = f" lora_rank={self.lora_rank} ({self.lora_base_dtype} base)" if self.lora_rank else ""
        net = f" network={self.network.tag}" if self.network else ""
        return (f"{self.model.key} seq_len={self.seq_len} micro_batch={self.micro_batch} grad_accum={self.grad_accum} "
                f"global_batch={self.global_batch} on {self.n_gpus} GPUs ({self.nodes} node(s) of {self.gpus_per_node})"
                f" dp={self.dp}{' ' + layout if layout else ''} {self.dtype} sharding={self.sharding} "
                f"checkpointing={self.activation_checkpointing} {self.optimizer}{lora}{net}")


__all__ = ["BatchSplitError", "CHECKPOINTING", "FABRICS", "LORA_BASE_BYTES", "LayoutError", "LoraError", "Network",
           "OPTIMIZERS", "Optimizer", "SHARDINGS", "SHARDING_LEVELS", "TRAIN_DTYPES", "TrainRun", "TrainRunError",
           "UnknownShardingError", "parse_network"]
