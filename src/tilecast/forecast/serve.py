"""LLM serving forecasts: a serving engine's steps under the fixed-concurrency benchmark client.

A :class:`ServeWorkload` is ``model, dtype, tp, isl, osl, concurrency``: the benchmark keeps ``concurrency``
requests in flight, each of ``isl`` prompt tokens and ``osl`` output tokens, and replaces a finished request at
once (the client of AIConfigurator's ``serving.csv``). A forecast names the engine it is for (``vllm`` by default,
``sglang``, ``trtllm``; :mod:`tilecast.serving.engines`) and runs it as that engine schedules
(docs/method.md, "Serving as engines run it"):

- :mod:`tilecast.serving.step`: the time of one engine step of ``d`` decodes and ``p`` prefill tokens, from the
  kernel forecasts of the model's graphs on a small grid (GEMMs at ``M = d + p``, prefill and decode attention, the
  engine's own all-reduce), plus the engine's host time (:mod:`tilecast.serving.policy`);
- :mod:`tilecast.serving.steady`: TTFT and TPOT of the benchmark (first wave, steady state, prefills mixed into
  decode steps as the engine's policy does), checked against the step-by-step simulation of
  :mod:`tilecast.serving.simulate`.

Left out: prefix caching, speculative decoding, pipeline parallelism.

Memory per GPU: weights / tp, the KV cache ``2 x layers x KV heads x head dim x bytes`` per token
(GQA-aware; KV heads replicated when fewer than the ranks) for ``concurrency x (isl + osl)`` tokens, and
the prefill's activation workspace; :func:`max_concurrency` is the largest batch whose cache fits.

Mixture-of-experts models (family ``moe``) run on a :class:`~tilecast.specs.layout.Layout` (``tp``, attention
``dp``, ``ep``; ``ServeWorkload.layout``, default ``tp`` alone): the graphs are one GPU's share of it, the weights
one GPU's (its ``1 / ep`` of the experts, ``1 / moe_tp`` of each), the cache what each request keeps on one GPU
(:mod:`tilecast.graph.kv_cache`: MLA's latent, windows bounding sliding layers, linear-attention states), and
throughput per GPU is over the layout's ``tp x dp`` GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.workload import check_gpu_dtype
from tilecast.graph import kv_cache
from tilecast.graph.layout_graph import LAYOUT_FAMILIES
from tilecast.graph.memory import memory_footprint
from tilecast.serving.engines import resolve_version
from tilecast.serving.policy import EnginePolicy, engine_policy
from tilecast.serving.steady import steady_state
from tilecast.serving.step import step_costs
from tilecast.specs import GpuSpec, ModelSpec, Workload, WorkloadError, get_gpu, get_model
from tilecast.specs.layout import Layout
from tilecast.specs.model import check_checkpoint_dtype
from tilecast.tiles.dtypes import DTYPE_BYTES, compute_dtype

#: dtypes a serve workload runs in
SERVE_DTYPES = ("bf16", "fp16", "fp8", "fp4")
#: model families a serve workload runs
SERVE_FAMILIES = ("llama", "moe")
GIB = float(2**30)
#: the share of a GPU's memory a serving engine takes (vLLM's ``gpu_memory_utilization`` default) and what it
#: leaves aside besides (CUDA context, NCCL buffers, allocator slack)
SERVE_USABLE_FRACTION = 0.9
SERVE_RESERVE_GIB = 1.0
#: the engine a forecast is for when none is named
DEFAULT_ENGINE = "vllm"


@dataclass(frozen=True)
class ServeWorkload:
    """A serving configuration, validated on construction (errors name the value)."""

    model: ModelSpec
    dtype: str | None = None  # None: the model's (a quantised variant's dtype, else bf16)
    tp: int = 1
    isl: int = 1024
    osl: int = 1024
    concurrency: int = 1
    pp: int = 1
    layout: Layout | None = None  # a mixture-of-experts model's (tp, attention dp, ep); None: tp alone

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            object.__setattr__(self, "model", get_model(self.model))
        if self.dtype is None:
            object.__setattr__(self, "dtype", self.model.default_dtype)
        if self.layout is not None:
            if self.tp not in (1, self.layout.tp):
                raise WorkloadError(f"tp={self.tp} disagrees with layout {self.layout.tag}")
            object.__setattr__(self, "tp", self.layout.tp)
        if self.dtype not in SERVE_DTYPES:
            raise WorkloadError(f"serve dtype must be one of {', '.join(SERVE_DTYPES)}, got {self.dtype!r}")
        for name in ("tp", "isl", "osl", "concurrency", "pp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise WorkloadError(f"{name} must be a positive integer, got {value!r}")
        if self.pp != 1:
            raise WorkloadError(f"pp={self.pp}: pipeline-parallel serving is not modelled; use tp")
        spec = self.model
        if spec.family not in SERVE_FAMILIES:
            raise WorkloadError(f"{spec.key}: serving is modelled for decoders of the families "
                                f"{', '.join(SERVE_FAMILIES)}, not {spec.family!r}")
        check_checkpoint_dtype(spec, self.dtype)
        if spec.max_positions and self.isl + self.osl > spec.max_positions:
            raise WorkloadError(f"isl + osl = {self.isl + self.osl} exceeds {spec.key}'s {spec.max_positions} "
                                "positions")
        if spec.family in LAYOUT_FAMILIES:
            object.__setattr__(self, "layout", (self.layout or Layout(self.tp)).check(spec))
            return
        if self.layout is not None:
            if self.layout != Layout(self.tp):
                raise WorkloadError(f"{spec.key}: layout {self.layout.tag}: a dense model serves tensor parallel "
                                    "only (tp<n>)")
            object.__setattr__(self, "layout", None)
        if spec.num_heads % self.tp:
            raise WorkloadError(f"tp={self.tp} does not divide {spec.key}'s {spec.num_heads} attention heads")
        if spec.num_kv_heads % self.tp and self.tp % spec.num_kv_heads:
            raise WorkloadError(f"tp={self.tp} neither divides nor is a multiple of {spec.key}'s "
                                f"{spec.num_kv_heads} KV heads")

    @property
    def parallel(self) -> str | Layout | None:
        """What the graph builder splits by: the layout (mixture-of-experts models), else ``tp<n>``."""
        if self.layout is not None:
            return self.layout
        return f"tp{self.tp}" if self.tp > 1 else None

    @property
    def n_gpus(self) -> int:
        """GPUs of one serving instance (``tp x dp``)."""
        return self.layout.gpus if self.layout is not None else self.tp

    @property
    def kv_heads_per_gpu(self) -> int:
        return max(1, self.model.num_kv_heads // self.tp)


@dataclass(frozen=True)
class ServeMemory:
    """Bytes one GPU of the tensor-parallel group needs."""

    weights_bytes: float
    kv_cache_bytes: float
    workspace_bytes: float
    kv_bytes_per_token: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.workspace_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    def max_concurrency(self, tokens_per_request: int) -> int:
        """The largest number of requests of ``tokens_per_request`` whose KV cache fits beside the rest."""
        return int(fitting_concurrency(self.capacity_bytes, self.weights_bytes, self.workspace_bytes,
                                       self.kv_bytes_per_token, tokens_per_request))


@dataclass(frozen=True)
class ServeForecast:
    """TTFT / TPOT and what follows from them, per request and per GPU."""

    model: str
    gpu: str
    dtype: str
    tp: int
    isl: int
    osl: int
    concurrency: int
    prefill_ms: float
    decode_step_ms: float  # mean decode iteration over the output, prefill stalls excluded
    ttft_ms: float
    tpot_ms: float
    memory: ServeMemory
    max_concurrency: int
    breakdown_ms: dict[str, float] = field(default_factory=dict)
    n_gpus: int = 0  # GPUs of the instance (0: tp)
    layout: str | None = None  # the layout's tag (mixture-of-experts models)
    engine: str = "vllm"  # the serving engine the forecast is for

    @property
    def request_latency_ms(self) -> float:
        return float(request_latency_ms(self.ttft_ms, self.tpot_ms, self.osl))

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1e3 / self.tpot_ms

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return float(tokens_per_s_per_gpu(self.ttft_ms, self.tpot_ms, self.concurrency, self.osl,
                                          self.n_gpus or self.tp))

    def to_dict(self) -> dict[str, Any]:
        mem = self.memory
        return {"mode": "serve", "engine": self.engine, "model": self.model, "gpu": self.gpu, "dtype": self.dtype,
                "tp": self.tp,
                "n_gpus": self.n_gpus or self.tp, "layout": self.layout,
                "isl": self.isl, "osl": self.osl, "concurrency": self.concurrency, "ttft_ms": self.ttft_ms,
                "tpot_ms": self.tpot_ms, "request_latency_ms": self.request_latency_ms,
                "prefill_ms": self.prefill_ms, "decode_step_ms": self.decode_step_ms,
                # a configuration that does not fit has no throughput (nor, downstream, a cost): None, not a number
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu if mem.fits else None,
                "tokens_per_s_per_user": self.tokens_per_s_per_user if mem.fits else None, "fits": mem.fits,
                "mem_required_gib": mem.total_bytes / GIB, "mem_capacity_gib": mem.capacity_bytes / GIB,
                "weights_gib": mem.weights_bytes / GIB, "kv_cache_gib": mem.kv_cache_bytes / GIB,
                "workspace_gib": mem.workspace_bytes / GIB, "max_concurrency": self.max_concurrency,
                "ms_per_group": dict(self.breakdown_ms)}

    def describe(self) -> str:
        mem = self.memory
        fit = "fits" if mem.fits else "DOES NOT FIT"
        return "\n".join([
            f"{self.model} on {self.gpu} x{self.n_gpus or self.tp}"
            + (f" ({self.layout})" if self.layout else "") + f": serve {self.dtype} on {self.engine} isl={self.isl} "
            f"osl={self.osl} "
            f"concurrency={self.concurrency}",
            f"  TTFT {self.ttft_ms:10.2f} ms   TPOT {self.tpot_ms:8.3f} ms   "
            f"request {self.request_latency_ms / 1e3:8.2f} s",
            f"  prefill step {self.prefill_ms:8.2f} ms   decode step {self.decode_step_ms:8.3f} ms",
            (f"  {self.tokens_per_s_per_gpu:10.1f} output tokens/s per GPU   {self.tokens_per_s_per_user:8.1f} per user"
             if mem.fits else "  no throughput: this configuration does not fit in memory (below)"),
            f"  memory per GPU {mem.total_bytes / GIB:8.2f} GiB of {mem.capacity_bytes / GIB:.2f} ({fit}): weights "
            f"{mem.weights_bytes / GIB:.2f}, KV cache {mem.kv_cache_bytes / GIB:.2f}, workspace "
            f"{mem.workspace_bytes / GIB:.2f}; largest concurrency that fits: {self.max_concurrency}",
        ])


@lru_cache(maxsize=4096)
def _prefill_footprint(spec: ModelSpec, dtype: str, isl: int, layout: Layout | None = None) -> tuple[float, float]:
    """(parameter bytes, transient bytes) of a one-request prefill over ``isl`` tokens (keyed by the spec
    itself, so a what-if model is never answered with its catalog model's footprint); with a ``layout``, on one
    of its GPUs."""
    if layout is not None:
        fp = memory_footprint(Workload(spec, 1, isl, dtype=dtype, parallel=layout), dtype=dtype)
    else:
        fp = memory_footprint(spec, 1, isl, "inference", dtype=dtype)
    return float(fp.params_bytes), float(fp.transient_bytes)


def kv_bytes_per_token(spec: ModelSpec, dtype: str, tp: Any) -> Any:
    """KV-cache bytes per token on one GPU: ``2 x layers x KV heads per GPU x head dim x bytes`` (GQA-aware;
    KV heads replicated when fewer than the ranks). ``tp`` may be an array."""
    heads = np.maximum(1, spec.num_kv_heads // np.asarray(tp))
    return 2.0 * spec.num_layers * heads * spec.head_dim * DTYPE_BYTES[compute_dtype(dtype)]


def capacity_bytes(gpu: GpuSpec, usable_fraction: float = SERVE_USABLE_FRACTION,
                   reserve_gib: float = SERVE_RESERVE_GIB) -> float:
    """What a serving engine may use of ``gpu``: ``usable_fraction`` of its memory (listed in GiB, as the
    score table's fit reads it) less ``reserve_gib`` (CUDA context, NCCL buffers, allocator slack)."""
    return gpu.mem_gb * GIB * usable_fraction - reserve_gib * GIB


def serve_memory_terms(spec: ModelSpec, dtype: str, isl: int, tp: Any, osl: Any, concurrency: Any,
                       layout: Layout | None = None) -> tuple[Any, Any, Any, Any]:
    """(weights, KV cache, workspace, KV bytes per token) per GPU; ``tp``, ``osl``, ``concurrency`` may be
    arrays (one formula for one workload and for a scored grid). A mixture-of-experts model runs on ``layout``
    (default ``tp`` alone; ``tp`` then a scalar): weights and workspace of one of its GPUs, KV bytes per token
    from :func:`tilecast.graph.kv_cache.kv_bytes_per_token` (windows, latents and states over the request)."""
    if spec.family in LAYOUT_FAMILIES and layout is None and np.ndim(tp):  # a grid: one layout per distinct tp
        tp_b, osl_b, conc_b = np.broadcast_arrays(np.asarray(tp), np.asarray(osl), np.asarray(concurrency))
        out = [np.empty(tp_b.shape) for _ in range(4)]
        for value in np.unique(tp_b):
            at = tp_b == value
            for slot, term in zip(out, serve_memory_terms(spec, dtype, isl, int(value), osl_b[at], conc_b[at]),
                                  strict=True):
                slot[at] = term
        return tuple(out)
    if spec.family in LAYOUT_FAMILIES:
        layout = layout or Layout(int(tp))
        params, transient = _prefill_footprint(spec, dtype, int(isl), layout)
        tokens = isl + np.asarray(osl)
        per_token = kv_cache.kv_bytes_per_token(spec, dtype, layout, tokens)
        return params, per_token * np.asarray(concurrency) * tokens, transient, per_token
    params, transient = _prefill_footprint(spec, dtype, int(isl))
    tp = np.asarray(tp, dtype=float)
    per_token = kv_bytes_per_token(spec, dtype, tp.astype(np.int64))
    return (params / tp, per_token * np.asarray(concurrency) * (isl + np.asarray(osl)), transient / tp,
            per_token)


def fitting_concurrency(capacity: Any, weights: Any, workspace: Any, per_token: Any, tokens_per_request: Any
                        ) -> Any:
    """The largest number of requests of ``tokens_per_request`` whose KV cache fits beside the rest."""
    free = np.asarray(capacity) - weights - workspace
    return np.maximum(0, np.floor_divide(free, per_token * np.asarray(tokens_per_request))).astype(np.int64)


#: quantised serving stores the KV cache in fp8: the ModelOpt FP8 / NVFP4 recipes the engines load say
#: ``kv_cache_quant_algo: FP8`` (AIConfigurator's ``model_configs/*_hf_quant_config.json``), halving a token's bytes
KV_CACHE_SCALE = {"fp8": 0.5, "fp4": 0.5}


def kv_capacity_tokens(memory: ServeMemory, dtype: str | None = None) -> float:
    """Tokens the engine's KV cache holds beside the weights and workspace (per GPU, so per replica), the cache in
    fp8 for an fp8 / fp4 workload (:data:`KV_CACHE_SCALE`)."""
    per_token = memory.kv_bytes_per_token * KV_CACHE_SCALE.get(str(dtype), 1.0)
    return max(0.0, memory.capacity_bytes - memory.weights_bytes - memory.workspace_bytes) / per_token


def serve_memory(sw: ServeWorkload, gpu: GpuSpec, usable_fraction: float = SERVE_USABLE_FRACTION,
                   reserve_gib: float = SERVE_RESERVE_GIB) \
        -> ServeMemory:
    """Per-GPU memory of a serve workload against :func:`capacity_bytes`."""
    terms = serve_memory_terms(sw.model, sw.dtype, sw.isl, sw.tp, sw.osl, sw.concurrency, sw.layout)
    return ServeMemory(*(float(t) for t in terms), capacity_bytes(gpu, usable_fraction, reserve_gib))


def request_latency_ms(ttft_ms: Any, tpot_ms: Any, osl: Any) -> Any:
    """End-to-end latency of one request: first token, then ``osl - 1`` more."""
    return ttft_ms + (np.asarray(osl) - 1) * tpot_ms


def tokens_per_s_per_gpu(ttft_ms: Any, tpot_ms: Any, concurrency: Any, osl: Any, tp: Any) -> Any:
    """Output tokens per second per GPU: ``concurrency`` requests, each ``osl`` tokens per request time."""
    return np.asarray(concurrency) * osl / (request_latency_ms(ttft_ms, tpot_ms, osl) / 1e3) / tp


def forecast_serve(sw: ServeWorkload, gpu: GpuSpec | str, predict: FamilyPredictor | None = None,
                   engine: str = DEFAULT_ENGINE, version: str | None = None, policy: EnginePolicy | None = None,
                   usable_fraction: float | None = None, reserve_gib: float = SERVE_RESERVE_GIB) -> ServeForecast:
    """Forecast TTFT, TPOT, throughput and memory of ``sw`` on ``gpu`` served by ``engine`` (release ``version``;
    ``policy`` replaces its default :class:`~tilecast.serving.policy.EnginePolicy`): the step costs of the model's
    graphs (:func:`tilecast.serving.step.step_costs`) under the benchmark client's steady state
    (:func:`tilecast.serving.steady.steady_state`; see the module docstring)."""
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    check_gpu_dtype(gpu, sw.dtype)
    resolve_version(engine, version)
    policy = policy or engine_policy(engine)
    cost = step_costs(sw.model, sw.dtype, sw.parallel, [gpu], predict, policy, version)[gpu.key]
    frac = policy.kv_memory_fraction if usable_fraction is None else usable_fraction
    memory = serve_memory(sw, gpu, frac, reserve_gib)
    st = steady_state(cost, sw.isl, sw.osl, sw.concurrency, kv_tokens=kv_capacity_tokens(memory, sw.dtype))
    return ServeForecast(sw.model.key, gpu.key, sw.dtype, sw.tp, sw.isl, sw.osl, sw.concurrency,
                         float(st["prefill_step_ms"]), float(st["decode_step_ms"]), float(st["ttft_ms"]),
                         float(st["tpot_ms"]), memory, memory.max_concurrency(sw.isl + sw.osl),
                         cost.breakdown_ms(sw.isl),
                         sw.n_gpus,
                         sw.layout.tag if sw.layout is not None else None, policy.engine)
