"""LLM serving forecasts: prefill and decode with a KV cache under a fixed-concurrency harness.

A :class:`ServeWorkload` is ``model, gpu, dtype (bf16 | fp8), tp, isl, osl, concurrency``: ``concurrency``
requests are always in flight, each of ``isl`` prompt tokens and ``osl`` output tokens, and a finished
request is replaced at once (the harness of AIConfigurator's ``serving.csv``). Per tensor-parallel rank:

- **prefill** ``P``: one forward over ``isl`` tokens of one request, causal fused attention, logits of the
  last token only;
- **decode step** ``D(L)``: the linears at ``M = concurrency``, decode attention of ``concurrency`` new
  tokens over a KV cache of ``L`` tokens, the LM head; ``D`` is averaged over the output (``L`` from
  ``isl`` to ``isl + osl``) by Simpson's rule on three lengths (exact while a step is quadratic in ``L``);
- all-reduces of the Megatron split are costed from the GPU's link (:mod:`tilecast.forecast.comm`).

The harness (docs/method.md §16): one engine runs decode iterations of the whole batch, and the
prefill of each replacement request runs between two iterations. During one request's ``osl`` steps the
other ``concurrency - 1`` requests are each replaced once, so

- ``TPOT = D + (concurrency - 1) P / osl`` (the prefills stall every running request);
- ``TTFT = P + D / 2 + W``: the request's own prefill, the rest of the iteration in flight, and ``W`` the
  wait behind other prefills (M/D/1: prefills arrive at ``concurrency / request time``, each takes ``P``).

Left out (each documented with its cost in ``benchmarks/serving.md``): chunked prefill (prefill mixed
into decode iterations), scheduler and sampling overheads on the host, CUDA-graph capture of decode
(launch gaps are not in the kernel predictors' times), prefix caching, speculative decoding.

Memory per GPU: weights / tp, the KV cache ``2 x layers x KV heads x head dim x bytes`` per token
(GQA-aware; KV heads replicated when fewer than the ranks) for ``concurrency x (isl + osl)`` tokens, and
the prefill's activation workspace; :func:`max_concurrency` is the largest batch whose cache fits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilecast.forecast.comm import DEFAULT_COMM, CommModel
from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.ops import op_latency_ms
from tilecast.forecast.summary import summarise
from tilecast.forecast.workload import check_gpu_dtype, graph_frame
from tilecast.graph.memory import memory_footprint
from tilecast.graph.parallel import build_parallel_graph
from tilecast.specs import GpuSpec, ModelSpec, WorkloadError, get_gpu, get_model
from tilecast.tiles.dtypes import DTYPE_BYTES, compute_dtype

#: dtypes a serve workload runs in
SERVE_DTYPES = ("bf16", "fp16", "fp8")
GIB = float(2**30)


@dataclass(frozen=True)
class ServeWorkload:
    """A serving configuration, validated on construction (errors name the value)."""

    model: ModelSpec
    dtype: str = "bf16"
    tp: int = 1
    isl: int = 1024
    osl: int = 1024
    concurrency: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            object.__setattr__(self, "model", get_model(self.model))
        if self.dtype not in SERVE_DTYPES:
            raise WorkloadError(f"serve dtype must be one of {', '.join(SERVE_DTYPES)}, got {self.dtype!r}")
        for name in ("tp", "isl", "osl", "concurrency", "pp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise WorkloadError(f"{name} must be a positive integer, got {value!r}")
        if self.pp != 1:
            raise WorkloadError(f"pp={self.pp}: pipeline-parallel serving is not modelled; use tp")
        spec = self.model
        if spec.family != "llama":
            raise WorkloadError(f"{spec.key}: serving is modelled for llama-style decoders (family llama), "
                                f"not {spec.family!r}")
        if spec.max_positions and self.isl + self.osl > spec.max_positions:
            raise WorkloadError(f"isl + osl = {self.isl + self.osl} exceeds {spec.key}'s {spec.max_positions} "
                                "positions")
        if spec.num_heads % self.tp:
            raise WorkloadError(f"tp={self.tp} does not divide {spec.key}'s {spec.num_heads} attention heads")
        if spec.num_kv_heads % self.tp and self.tp % spec.num_kv_heads:
            raise WorkloadError(f"tp={self.tp} neither divides nor is a multiple of {spec.key}'s "
                                f"{spec.num_kv_heads} KV heads")

    @property
    def parallel(self) -> str | None:
        return f"tp{self.tp}" if self.tp > 1 else None

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
        free = self.capacity_bytes - self.weights_bytes - self.workspace_bytes
        return max(0, int(free // (self.kv_bytes_per_token * tokens_per_request)))


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

    @property
    def request_latency_ms(self) -> float:
        """End-to-end latency of one request: first token, then ``osl - 1`` more."""
        return self.ttft_ms + (self.osl - 1) * self.tpot_ms

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1e3 / self.tpot_ms

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens per second per GPU: ``concurrency`` requests, each ``osl`` tokens per request time."""
        return self.concurrency * self.osl / (self.request_latency_ms / 1e3) / self.tp

    def to_dict(self) -> dict[str, Any]:
        mem = self.memory
        return {"mode": "serve", "model": self.model, "gpu": self.gpu, "dtype": self.dtype, "tp": self.tp,
                "isl": self.isl, "osl": self.osl, "concurrency": self.concurrency, "ttft_ms": self.ttft_ms,
                "tpot_ms": self.tpot_ms, "request_latency_ms": self.request_latency_ms,
                "prefill_ms": self.prefill_ms, "decode_step_ms": self.decode_step_ms,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "tokens_per_s_per_user": self.tokens_per_s_per_user, "fits": mem.fits,
                "mem_required_gib": mem.total_bytes / GIB, "mem_capacity_gib": mem.capacity_bytes / GIB,
                "weights_gib": mem.weights_bytes / GIB, "kv_cache_gib": mem.kv_cache_bytes / GIB,
                "workspace_gib": mem.workspace_bytes / GIB, "max_concurrency": self.max_concurrency,
                "ms_per_group": dict(self.breakdown_ms)}

    def describe(self) -> str:
        mem = self.memory
        fit = "fits" if mem.fits else "DOES NOT FIT"
        return "\n".join([
            f"{self.model} on {self.gpu} x{self.tp}: serve {self.dtype} isl={self.isl} osl={self.osl} "
            f"concurrency={self.concurrency}",
            f"  TTFT {self.ttft_ms:10.2f} ms   TPOT {self.tpot_ms:8.3f} ms   "
            f"request {self.request_latency_ms / 1e3:8.2f} s",
            f"  prefill {self.prefill_ms:8.2f} ms   decode step {self.decode_step_ms:8.3f} ms",
            f"  {self.tokens_per_s_per_gpu:10.1f} output tokens/s per GPU   {self.tokens_per_s_per_user:8.1f} per user",
            f"  memory per GPU {mem.total_bytes / GIB:8.2f} GiB of {mem.capacity_bytes / GIB:.2f} ({fit}): weights "
            f"{mem.weights_bytes / GIB:.2f}, KV cache {mem.kv_cache_bytes / GIB:.2f}, workspace "
            f"{mem.workspace_bytes / GIB:.2f}; largest concurrency that fits: {self.max_concurrency}",
        ])


def serve_memory(sw: ServeWorkload, gpu: GpuSpec, usable_fraction: float = 0.9, reserve_gib: float = 1.0) \
        -> ServeMemory:
    """Per-GPU memory of a serve workload; ``capacity`` is ``usable_fraction`` of the GPU's memory less
    ``reserve_gib`` (CUDA context, NCCL buffers, allocator slack), as serving engines reserve it."""
    spec = sw.model
    prefill = memory_footprint(spec, 1, sw.isl, "inference", dtype=sw.dtype)
    weights = prefill.params_bytes / sw.tp
    kv_bytes = DTYPE_BYTES[compute_dtype(sw.dtype)]
    per_token = 2.0 * spec.num_layers * sw.kv_heads_per_gpu * spec.head_dim * kv_bytes
    kv_cache = per_token * sw.concurrency * (sw.isl + sw.osl)
    workspace = prefill.transient_bytes / sw.tp
    capacity = gpu.mem_gb * 1e9 * usable_fraction - reserve_gib * GIB
    return ServeMemory(weights, kv_cache, workspace, per_token, capacity)


def _step_ms(sw: ServeWorkload, gpu: GpuSpec, predict: FamilyPredictor | None, comm: CommModel, batch: int,
             seq_len: int, kv_len: int) -> tuple[float, dict[str, float]]:
    frame = graph_frame(build_parallel_graph(sw.model, batch, seq_len, "inference", sw.parallel, dtype=sw.dtype,
                                             kv_len=kv_len, serving=True))
    summary = summarise(frame, op_latency_ms(frame, gpu, predict, comm=comm))
    return float(summary["e2e_ms"]), {k[3:]: float(v) for k, v in summary.items() if k.startswith("ms_") and v}


def forecast_serve(sw: ServeWorkload, gpu: GpuSpec | str, predict: FamilyPredictor | None = None,
                   comm: CommModel = DEFAULT_COMM, usable_fraction: float = 0.9, reserve_gib: float = 1.0) \
        -> ServeForecast:
    """Forecast TTFT, TPOT, throughput and memory of ``sw`` on ``gpu`` (see the module docstring)."""
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    check_gpu_dtype(gpu, sw.dtype)
    prefill_ms, breakdown = _step_ms(sw, gpu, predict, comm, 1, sw.isl, 0)
    lengths = (sw.isl, sw.isl + sw.osl // 2, sw.isl + sw.osl - 1)
    steps = [_step_ms(sw, gpu, predict, comm, sw.concurrency, 1, n)[0] for n in lengths]
    decode_ms = float(np.dot([1.0, 4.0, 1.0], steps) / 6.0)
    c = sw.concurrency
    tpot = decode_ms + (c - 1) * prefill_ms / sw.osl
    request_ms = prefill_ms + sw.osl * tpot
    rho = min(c * prefill_ms / request_ms, 0.95)  # engine share spent in prefills
    wait = rho * prefill_ms / (2.0 * (1.0 - rho))
    ttft = prefill_ms + decode_ms / 2.0 + wait
    memory = serve_memory(sw, gpu, usable_fraction, reserve_gib)
    return ServeForecast(sw.model.key, gpu.key, sw.dtype, sw.tp, sw.isl, sw.osl, c, prefill_ms, decode_ms, ttft,
                         tpot, memory, memory.max_concurrency(sw.isl + sw.osl), breakdown)
