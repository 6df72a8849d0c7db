"""Disaggregated serving: a prefill pool and a decode pool, the KV cache of each request moved between them.

A :class:`DisaggConfig` is a model and dtype, ``isl`` / ``osl``, the benchmark client's ``concurrency`` (closed
loop: ``concurrency`` requests always in flight, a finished one replaced at once) and two pools:

- **prefill**: ``prefill_workers`` engine instances, each on a :class:`~tilecast.specs.layout.Layout`
  (``tp x dp`` GPUs), each attention data-parallel rank prefilling up to ``prefill_batch`` requests per step, or as
  many as the engine's token budget per step holds (``prefill_tokens // isl``: queued prompts are packed into
  one forward up to ``max_num_tokens``, TRT-LLM's and SGLang's 8192 by default), whichever is more;
- **decode**: ``decode_workers`` instances on their own layout, each rank decoding at most ``decode_batch``
  requests (AIConfigurator's ``decode_batch_size`` is per attention-DP rank: in every public row with worker
  counts, ``concurrency = decode_batch_size x decode_num_workers x decode_attention_dp_size``).

Per request (docs/method.md §24): it queues in the prefill pool, is prefilled (``S_p``: one step of the prefill
worker at the requests it holds, ``n = rate per worker x S_p(n)`` by Little's law, between one and its batch), its
KV cache crosses to a decode worker (``T_x``: the bytes one prefill GPU holds of it over NVLink when both pools fit
in one NVLink domain of the GPU, else over the scale-out network), and decodes ``osl`` tokens at the decode pool's
step time ``D(b)`` (``b`` requests a rank, KV length ``isl + osl / 2``: the mean of a step affine in length).

The closed loop fixes the request rate ``X``: ``concurrency = X x (W_q + S_p + T_x + overhead + osl x D(b))``
(Little's law over one request's path), with ``b = X x osl x D(b) / (decode ranks)`` the requests in decode
(Little's law at the decode pool) and ``W_q`` the prefill queue's wait, M/D/k with ``k = prefill_workers x`` the
worker's batch servers of service ``S_p`` (Erlang C, halved for a deterministic service). ``W_q`` grows without
bound as ``X x S_p`` approaches ``k``, so a prefill-bound configuration saturates at the pool's capacity with the
surplus of requests queued before prefill (TTFT of seconds at high concurrency); a decode-bound one keeps ``b`` near
``decode_batch``. Then

- ``TTFT = W_q + S_p + T_x + overhead + D(b)`` (the first token arrives from the decode worker's first step), plus
  a ``1 / CLIENT_WAVES`` share of the first wave's excess (the client's first ``concurrency`` requests arrive at
  once and are prefilled in rounds);
- ``TPOT = D(b)``;
- throughput ``X x osl`` output tokens/s over every GPU of both pools.

``overhead`` and two step scales are :class:`DisaggOverheads`, fitted on the public rows (``DEFAULT_OVERHEADS``).

Rows of AIConfigurator's ``serving.csv`` (``mode=disagg``) are read by :func:`disagg_config_from_row`; a row
without worker counts (862 of the 1,034 public rows: their layouts are spelled from the run's name, attention
data parallelism folded into ``tp``) or with a layout that does not match its GPU count, zero workers or a zero
batch gets its reason in ``error`` (:func:`evaluate_disagg`), the other rows are answered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.forecast.comm import DEFAULT_COMM, CommModel
from tilecast.forecast.ops import op_latency_ms
from tilecast.forecast.serve import SERVE_DTYPES, ServeWorkload, capacity_bytes, serve_memory_terms
from tilecast.forecast.summary import summarise_many
from tilecast.forecast.workload import check_gpu_dtype, graph_frame, stack_frames
from tilecast.graph import kv_cache
from tilecast.graph.layout_graph import LAYOUT_FAMILIES
from tilecast.graph.parallel import build_parallel_graph
from tilecast.specs import GpuSpec, ModelSpec, SpecError, UnknownSpecError, get_gpu, get_model
from tilecast.specs.layout import Layout, layout_from_row
from tilecast.specs.model import workload_dtype_of

#: output columns of :func:`evaluate_disagg`
DISAGG_COLUMNS = ("pred_ttft_ms", "pred_tpot_ms", "pred_tokens_per_s_per_gpu", "fits", "error")
#: points of a pool's step table the fixed point interpolates (batches geometric from 1 to the largest)
STEP_GRID = 5
#: requests per client slot of a benchmark run: the client sends ``CLIENT_WAVES x concurrency`` requests, the first
#: ``concurrency`` of them at once; fitted on the public rows with :data:`DEFAULT_OVERHEADS` (``benchmarks/disagg.py``;
#: InferenceMAX's client sends 10 x concurrency); inf: steady state only
CLIENT_WAVES = 5.0
#: tokens one prefill step of an engine rank packs queued prompts into (TRT-LLM ``max_num_tokens``, SGLang
#: ``chunked_prefill_size``: 8192 by default); 1: one prompt a step, the ``prefill_batch`` alone
PREFILL_TOKEN_BUDGET = 8192
#: share of a link's spec bandwidth a KV-cache transfer reaches (the all-reduce model's ring efficiency)
TRANSFER_EFFICIENCY = 0.72
#: bisection steps of the closed-loop request rate and of a pool's requests in service (relative precision 2**-n)
_BISECT = 40
_BISECT_POOL = 30


class DisaggError(UserError):
    """A disaggregated configuration that cannot be forecast (names the value)."""


@dataclass(frozen=True)
class DisaggOverheads:
    """What the kernels leave out, fitted on public rows by ``benchmarks/disagg.py`` (default: nothing).

    ``ttft_ms`` is added once per request before its first token (the frontend, router and KV handoff of the
    disaggregated serving stack); ``step_scale`` multiplies every decode step and ``prefill_scale`` every prefill
    step (the engines' own kernels, CUDA graphs and host work against the kernel predictors' times)."""

    ttft_ms: float = 0.0
    step_scale: float = 1.0
    prefill_scale: float = 1.0


NO_OVERHEADS = DisaggOverheads()
#: the constants fitted on every answered public row (``python benchmarks/disagg.py``, ``benchmarks/disagg.md``:
#: judged there leave one GPU out and leave one model out)
DEFAULT_OVERHEADS = DisaggOverheads(ttft_ms=160.0, step_scale=0.8, prefill_scale=0.6)


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        raise DisaggError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class DisaggConfig:
    """Prefill and decode pools serving ``model`` under a closed-loop client of ``concurrency`` requests."""

    model: ModelSpec
    dtype: str
    isl: int
    osl: int
    concurrency: int
    prefill: Layout
    prefill_workers: int
    decode: Layout
    decode_workers: int
    prefill_batch: int = 1  # requests per attention-DP rank per prefill step (at least)
    prefill_tokens: int = PREFILL_TOKEN_BUDGET  # the engine's token budget of one prefill step per rank
    decode_batch: int = 0  # largest batch per attention-DP rank; 0: what the concurrency puts there

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            object.__setattr__(self, "model", get_model(self.model))
        for name in ("isl", "osl", "concurrency", "prefill_workers", "decode_workers", "prefill_batch",
                     "prefill_tokens"):
            _positive_int(name, getattr(self, name))
        ranks = self.decode_workers * self.decode.dp
        if self.decode_batch == 0:
            object.__setattr__(self, "decode_batch", math.ceil(self.concurrency / ranks))
        _positive_int("decode_batch", self.decode_batch)
        if self.dtype not in SERVE_DTYPES:
            raise DisaggError(f"dtype={self.dtype!r} is not modelled; serve dtypes: {', '.join(SERVE_DTYPES)}")
        for pool in ("prefill", "decode"):  # each layout must run the model (raises LayoutError naming it)
            self.workload(pool)

    @property
    def n_gpus(self) -> int:
        """GPUs of both pools."""
        return self.prefill.gpus * self.prefill_workers + self.decode.gpus * self.decode_workers

    @property
    def decode_ranks(self) -> int:
        """Attention data-parallel ranks of the decode pool (each holds its own requests)."""
        return self.decode_workers * self.decode.dp

    @property
    def prefill_bmax(self) -> int:
        """Requests one prefill worker prefills in one step: attention-DP ranks x (the prefill batch or what the
        token budget holds of ``isl``-token prompts, whichever is more)."""
        return self.prefill.dp * max(self.prefill_batch, self.prefill_tokens // self.isl)

    def workload(self, pool: str) -> ServeWorkload:
        """One worker of ``pool`` (prefill | decode) as a serve workload (its concurrency: its requests)."""
        layout = self.prefill if pool == "prefill" else self.decode
        batch = self.prefill_batch if pool == "prefill" else self.decode_batch
        moe = self.model.family in LAYOUT_FAMILIES
        if not moe and (layout.dp > 1 or layout.ep > 1):
            raise DisaggError(f"{pool} layout {layout.tag}: a dense model serves tensor parallel only (tp<n>)")
        return ServeWorkload(self.model, self.dtype, layout.tp, self.isl, self.osl, batch * layout.dp,
                             layout=layout if moe else None)


@dataclass(frozen=True)
class DisaggForecast:
    """TTFT, TPOT and throughput of a disaggregated configuration, with the terms they are made of."""

    ttft_ms: float
    tpot_ms: float
    tokens_per_s_per_gpu: float
    fits: bool
    prefill_ms: float  # S_p: one prefill step at the steady-state requests per step
    transfer_ms: float  # T_x: one request's KV cache, prefill -> decode
    queue_ms: float  # W_q: wait before prefill
    decode_step_ms: float  # D(b) at the steady-state decode batch
    decode_batch: float  # b: requests per decode rank in steady state
    requests_per_s: float
    bound: str  # "prefill" when the prefill pool is at least 95% busy, else "decode"
    n_gpus: int

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def transfer_link_gbs(gpu: GpuSpec, n_gpus: int) -> float:
    """GB/s per direction one GPU sends a KV cache at: NVLink when both pools' GPUs fit in one NVLink domain of
    ``gpu``, else its scale-out network (the NVLink figure when the spec sheet lists no network)."""
    if n_gpus <= gpu.gpus_per_node and gpu.nvlink_gbs:
        return gpu.link_gbs
    return gpu.network_gbs or gpu.link_gbs


def transfer_ms(kv_bytes: Any, link_gbs: Any, efficiency: float = TRANSFER_EFFICIENCY) -> Any:
    """Milliseconds to move ``kv_bytes`` at ``efficiency`` of ``link_gbs`` (GB/s); arrays broadcast."""
    return np.asarray(kv_bytes, dtype=float) / (np.asarray(link_gbs, dtype=float) * 1e9 * efficiency) * 1e3


def kv_transfer_bytes(cfg: DisaggConfig) -> float:
    """Bytes of one request's KV cache (``isl`` tokens) that one GPU of its prefill group sends: every rank of the
    group sends its own share in parallel (MLA's latent, the same on every rank, once per rank)."""
    layout = cfg.prefill if cfg.model.family in LAYOUT_FAMILIES else Layout(cfg.prefill.tp)
    return float(kv_cache.kv_bytes_per_request(cfg.model, cfg.dtype, layout, cfg.isl))


def _erlang_c(k: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Probability of waiting in an M/M/k queue with offered load ``a < k`` (arrays, ``k`` integers)."""
    kmax = int(np.max(k)) if k.size else 0
    term = np.ones_like(a)  # a^j / j!, by recurrence
    total = np.zeros_like(a)  # sum_{j < k} a^j / j!
    for j in range(kmax):
        total = total + np.where(j < k, term, 0.0)
        term = np.where(j < k, term * a / (j + 1), term)
    last = term * k / np.maximum(k - a, 1e-300)  # a^k / k! x k / (k - a)
    return last / (total + last)


def prefill_wait_ms(rate_per_ms: Any, service_ms: Any, servers: Any) -> np.ndarray:
    """Mean wait before prefill: M/D/k, Erlang C with the deterministic service's halving; inf at saturation."""
    lam, s, k = (np.atleast_1d(np.asarray(v, dtype=float)) for v in np.broadcast_arrays(rate_per_ms, service_ms,
                                                                                           servers))
    a = lam * s
    busy = a < k
    safe = np.where(busy, a, 0.0)
    c = _erlang_c(k, safe)
    wait = c * s / np.maximum(k - safe, 1e-300) / 2.0
    return np.where(busy, wait, np.inf)


def step_batches(bmax: Any, points: int = STEP_GRID) -> np.ndarray:
    """The batches of a step table: ``points`` geometric from 1 to ``bmax`` (configurations x points)."""
    bmax = np.atleast_1d(np.asarray(bmax, dtype=float))
    return bmax[:, None] ** (np.arange(points)[None, :] / max(points - 1, 1))


def interp_step(batch: Any, bmax: Any, table: np.ndarray) -> np.ndarray:
    """Step time at ``batch`` from ``table`` (configurations x points at :func:`step_batches` of ``bmax``),
    piecewise linear in the batch."""
    table = np.atleast_2d(table)
    bmax = np.atleast_1d(np.asarray(bmax, dtype=float))
    b = np.clip(np.atleast_1d(np.asarray(batch, dtype=float)), 1.0, bmax)
    g = table.shape[1] - 1
    frac = np.where(bmax > 1, np.log(b) / np.log(np.maximum(bmax, 1.0 + 1e-12)) * g, 0.0)
    lo = np.clip(np.floor(frac).astype(int), 0, max(g - 1, 0))
    hi = np.minimum(lo + 1, g)
    grid = step_batches(bmax, table.shape[1])
    rows = np.arange(table.shape[0])
    b_lo, b_hi = grid[rows, lo], grid[rows, hi]
    w = np.where(b_hi > b_lo, (b - b_lo) / np.maximum(b_hi - b_lo, 1e-12), 0.0)
    return table[rows, lo] * (1 - w) + table[rows, hi] * w


def _in_service(rate: np.ndarray, bmax: np.ndarray, table: np.ndarray, per: np.ndarray) -> tuple[np.ndarray,
                                                                                                np.ndarray]:
    """Requests a worker holds and its step time at request rate ``rate`` (each request staying ``per`` steps):
    ``n = rate x per x step(n)`` (Little's law), by bisection on ``n`` in [1, bmax]."""
    lo, hi = np.ones_like(rate), bmax.copy()
    for _ in range(_BISECT_POOL):
        mid = 0.5 * (lo + hi)
        more = rate * per * interp_step(mid, bmax, table) > mid
        lo, hi = np.where(more, mid, lo), np.where(more, hi, mid)
    n = 0.5 * (lo + hi)
    return n, interp_step(n, bmax, table)


def first_wave_ms(concurrency: Any, workers: Any, bmax: Any, table: np.ndarray) -> np.ndarray:
    """Mean time to prefill the client's first wave (``concurrency`` requests arriving at once): rounds of
    ``workers x bmax`` requests, each one full step; the mean request finishes after ``(rounds + 1) / 2`` steps
    (one step of the requests present when they fill less than one round)."""
    c, w, n = (np.atleast_1d(np.asarray(v, dtype=float)) for v in np.broadcast_arrays(concurrency, workers, bmax))
    rounds = np.ceil(c / (w * n))
    first = interp_step(np.minimum(np.ceil(c / w), n), n, table)
    return np.where(rounds > 1, interp_step(n, n, table) * (rounds + 1) / 2, first)


def solve_closed_loop(concurrency: Any, osl: Any, prefill_workers: Any, prefill_bmax: Any,
                      prefill_table: np.ndarray, transfer: Any, decode_ranks: Any, decode_bmax: Any,
                      decode_table: np.ndarray, overheads: Sequence[DisaggOverheads] | DisaggOverheads = NO_OVERHEADS,
                      waves: float = CLIENT_WAVES) -> dict[str, np.ndarray]:
    """The steady state of the closed loop (module docstring), vectorised over configurations.

    Step tables hold each configuration's step (ms) at :func:`step_batches` of its largest batch: a prefill
    worker's at ``1 .. prefill_bmax`` requests (its attention-DP ranks x prefill batch), a decode worker's at
    ``1 .. decode_bmax`` requests per rank. Returns arrays ``rate`` (requests / ms), ``queue``, ``prefill``,
    ``batch``, ``step``, ``ttft``, ``tpot``, ``busy`` (the prefill pool's utilisation)."""
    c, osl, pw, pb, t_x, ranks, db = (np.atleast_1d(np.asarray(v, dtype=float)) for v in np.broadcast_arrays(
        concurrency, osl, prefill_workers, prefill_bmax, transfer, decode_ranks, decode_bmax))
    oh = [overheads] * len(c) if isinstance(overheads, DisaggOverheads) else list(overheads)
    oh_t = np.array([o.ttft_ms for o in oh], dtype=float)
    d_table = np.atleast_2d(np.asarray(decode_table, dtype=float)) * np.array([o.step_scale for o in oh])[:, None]
    p_table = np.atleast_2d(np.asarray(prefill_table, dtype=float)) * np.array([o.prefill_scale for o in oh])[:, None]
    one = np.ones_like(c)

    def state(rate: np.ndarray) -> tuple[np.ndarray, ...]:
        n_p, s_p = _in_service(rate / pw, pb, p_table, one)  # requests in a prefill step, its time
        b, step = _in_service(rate / ranks, db, d_table, osl)  # requests a decode rank holds, its step
        wait = prefill_wait_ms(rate, s_p, pw * pb)
        return n_p, s_p, b, step, wait

    def population(rate: np.ndarray) -> np.ndarray:
        _, s_p, _, step, wait = state(rate)
        return rate * (wait + s_p + t_x + oh_t + osl * step)

    lo, hi = np.zeros_like(c), pw * pb / interp_step(pb, pb, p_table)  # the prefill pool's capacity
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        under = population(mid) < c
        lo, hi = np.where(under, mid, lo), np.where(under, hi, mid)
    rate = lo
    n_p, s_p, b, step, wait = state(rate)
    steady = wait + s_p + t_x + oh_t + step
    if np.isfinite(waves):  # the first wave's burst, once in ``waves`` requests per client slot
        burst = first_wave_ms(c, pw, pb, p_table) + t_x + oh_t + step
        ttft = steady + (burst - steady).clip(min=0) / waves
    else:
        ttft = steady
    return {"rate": rate, "queue": wait, "prefill": s_p, "batch": b, "step": step, "ttft": ttft, "tpot": step,
            "busy": rate * s_p / (pw * pb)}


def _pool_fits(cfg: DisaggConfig, gpu: GpuSpec) -> bool:
    cap = capacity_bytes(gpu)
    for pool, osl in (("prefill", 1), ("decode", cfg.osl)):
        sw = cfg.workload(pool)
        weights, cache, workspace, _ = serve_memory_terms(sw.model, sw.dtype, sw.isl, sw.tp, osl, sw.concurrency,
                                                          sw.layout)
        if float(weights) + float(cache) + float(workspace) > cap:
            return False
    return True


def _step_keys(cfg: DisaggConfig) -> tuple[list[tuple], list[tuple]]:
    """The steps of a configuration's two tables: (pool, batch of the worker, new tokens, KV length) each."""
    prefill = [("prefill", max(1, round(n)), cfg.isl, 0) for n in step_batches(cfg.prefill_bmax)[0]]
    kv_len = cfg.isl + cfg.osl // 2
    decode = [("decode", max(1, round(b)) * cfg.decode.dp, 1, kv_len) for b in step_batches(cfg.decode_batch)[0]]
    return prefill, decode


def step_times(cfgs: Sequence[DisaggConfig], gpu: GpuSpec, predict: Any = None, comm: CommModel = DEFAULT_COMM,
               cache: dict | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(prefill table, decode table) of each configuration on ``gpu``: every distinct step's graph built once,
    all of them predicted in one vectorised pass (``cache``: step key -> ms, kept between calls)."""
    cache = {} if cache is None else cache
    wanted: dict[str, pd.DataFrame] = {}
    keys_of = []
    for cfg in cfgs:
        per = []
        for pool, batch, seq, kv in (k for part in _step_keys(cfg) for k in part):
            layout = cfg.prefill if pool == "prefill" else cfg.decode
            key = f"{gpu.key}|{cfg.model.key}|{cfg.dtype}|{layout.tag}|{batch}|{seq}|{kv}"
            per.append(key)
            if key not in cache and key not in wanted:
                sw = cfg.workload(pool)
                wanted[key] = graph_frame(build_parallel_graph(sw.model, batch, seq, "inference", sw.parallel,
                                                               dtype=sw.dtype, kv_len=kv, serving=True))
        keys_of.append(per)
    if wanted:
        stacked = stack_frames(wanted)
        e2e = summarise_many(stacked, op_latency_ms(stacked, gpu, predict, comm=comm))["e2e_ms"]
        cache.update({key: float(e2e[key]) for key in wanted})
    out = []
    for per in keys_of:
        values = np.array([cache[k] for k in per])
        out.append((values[:STEP_GRID], values[STEP_GRID:]))
    return out


def forecast_disagg(cfg: DisaggConfig, gpu: GpuSpec | str, predict: Any = None, comm: CommModel = DEFAULT_COMM,
                    overheads: DisaggOverheads = DEFAULT_OVERHEADS, waves: float = CLIENT_WAVES) -> DisaggForecast:
    """TTFT, TPOT, output tokens/s per GPU (over both pools) and fit of ``cfg`` on ``gpu`` (module docstring)."""
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    check_gpu_dtype(gpu, cfg.dtype)
    (p_table, d_table), = step_times([cfg], gpu, predict, comm)
    transfer = float(transfer_ms(kv_transfer_bytes(cfg), transfer_link_gbs(gpu, cfg.n_gpus)))
    out = {k: float(v[0]) for k, v in solve_closed_loop(
        cfg.concurrency, cfg.osl, cfg.prefill_workers, cfg.prefill_bmax, p_table, transfer, cfg.decode_ranks,
        cfg.decode_batch, d_table, overheads, waves).items()}
    return DisaggForecast(out["ttft"], out["tpot"], out["rate"] * 1e3 * cfg.osl / cfg.n_gpus, _pool_fits(cfg, gpu),
                          out["prefill"], transfer, out["queue"], out["step"], out["batch"], out["rate"] * 1e3,
                          "prefill" if out["busy"] >= 0.95 else "decode", cfg.n_gpus)


# --- serving.csv rows ------------------------------------------------------------------------------------------

def _count(row: Mapping[str, Any], column: str, default: int | None = None) -> int:
    """A worker count or batch of a row: absent / empty -> ``default`` (or an error naming it); 0 or not a
    positive integer -> an error naming it."""
    value = row.get(column)
    missing = value is None or value is pd.NA or (isinstance(value, str) and not value.strip()) or (
        isinstance(value, float) and math.isnan(value))
    number = np.nan if missing else pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    if not np.isfinite(number):
        if not missing:
            raise DisaggError(f"{column}={value!r} is not a number")
        if default is None:
            raise DisaggError(f"{column} is not given: the pool's size (and so its batch) is unknown")
        return default
    if number < 1 or number != int(number):
        shown = value.item() if isinstance(value, np.generic) else value
        raise DisaggError(f"{column}={shown!r}: must be a positive integer")
    return int(number)


def disagg_config_from_row(row: Mapping[str, Any], prefill_tokens: int = PREFILL_TOKEN_BUDGET
                           ) -> tuple[DisaggConfig, str]:
    """The configuration and GPU key of one ``mode=disagg`` row of ``serving.csv`` (raises with the reason it
    cannot be forecast). Concurrency: ``decode_batch_size x decode_num_workers x decode_attention_dp_size``."""
    if str(row.get("mode", "disagg")) != "disagg":
        raise DisaggError(f"mode={row.get('mode')!r}: not a disaggregated row")
    model = get_model(str(row["model_path"]))
    dtype = workload_dtype_of(model, str(row.get("precision")))
    gpu = get_gpu(str(row["system"]))
    prefill_workers = _count(row, "prefill_num_workers")
    decode_workers = _count(row, "decode_num_workers")
    prefill_batch = _count(row, "prefill_batch_size", 1)
    decode_batch = _count(row, "decode_batch_size")
    prefill, decode = (layout_from_row(row, model, f"{pool}_") for pool in ("prefill", "decode"))
    cfg = DisaggConfig(model, dtype, _count(row, "isl"), _count(row, "osl"),
                       decode_batch * decode_workers * decode.dp, prefill, prefill_workers, decode, decode_workers,
                       prefill_batch=prefill_batch, decode_batch=decode_batch, prefill_tokens=prefill_tokens)
    return cfg, gpu.key


_KEY = ("model_path", "system", "precision", "mode", "isl", "osl", *(
    f"{p}_{c}" for p in ("prefill", "decode") for c in (
        "batch_size", "num_workers", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")))


def evaluate_disagg(rows: pd.DataFrame, predict: Any = None, comm: CommModel = DEFAULT_COMM,
                    overheads: DisaggOverheads | Callable[[pd.Series], DisaggOverheads] = DEFAULT_OVERHEADS,
                    waves: float = CLIENT_WAVES, cache: dict | None = None,
                    prefill_tokens: int = PREFILL_TOKEN_BUDGET) -> pd.DataFrame:
    """:data:`DISAGG_COLUMNS` for every row (the same index): identical configurations forecast once, every
    step graph of a GPU predicted in one pass, the closed loop solved for all rows at once. ``overheads`` may
    be a function of the row (e.g. fitted by backend); ``cache`` keeps step times between calls."""
    return solve_terms(disagg_terms(rows, predict, comm, cache, prefill_tokens), overheads, waves)


@dataclass
class DisaggTerms:
    """What :func:`evaluate_disagg` solves: per distinct configuration its steps, transfer and fit; per row its
    group and error."""

    rows: pd.DataFrame
    groups: np.ndarray  # row -> configuration index
    configs: list[DisaggConfig | None]
    errors: list[str]
    prefill_tables: list[np.ndarray | None]
    decode_tables: list[np.ndarray | None]
    transfers: list[float]
    fits: list[bool | None]


def disagg_terms(rows: pd.DataFrame, predict: Any = None, comm: CommModel = DEFAULT_COMM,
                 cache: dict | None = None, prefill_tokens: int = PREFILL_TOKEN_BUDGET) -> DisaggTerms:
    """Parse every row (errors kept per row) and compute each distinct configuration's step tables."""
    keys = [c for c in _KEY if c in rows]
    n = len(rows)
    groups = rows.groupby(keys, dropna=False, sort=False).ngroup().to_numpy() if n else np.zeros(0, int)
    first = pd.Series(np.arange(n)).groupby(groups).first().to_numpy() if n else np.zeros(0, int)
    configs: list[DisaggConfig | None] = [None] * len(first)
    errors = [""] * len(first)
    gpus: dict[int, GpuSpec] = {}
    for g, i in enumerate(first):
        try:
            cfg, gpu_key = disagg_config_from_row(rows.iloc[i], prefill_tokens)
            gpus[g] = get_gpu(gpu_key)
            check_gpu_dtype(gpus[g], cfg.dtype)
            configs[g] = cfg
        except (SpecError, UnknownSpecError, ValueError, KeyError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            errors[g] = str(message).split("; all known:")[0]
    p_tables: list[np.ndarray | None] = [None] * len(first)
    d_tables: list[np.ndarray | None] = [None] * len(first)
    transfers, fits = [np.nan] * len(first), [None] * len(first)
    for key in sorted({gpu.key for gpu in gpus.values()}):
        idx = [g for g in gpus if gpus[g].key == key and configs[g] is not None]
        gpu = gpus[idx[0]]
        for g, (p, d) in zip(idx, step_times([configs[g] for g in idx], gpu, predict, comm, cache), strict=True):
            cfg = configs[g]
            p_tables[g], d_tables[g] = p, d
            transfers[g] = float(transfer_ms(kv_transfer_bytes(cfg), transfer_link_gbs(gpu, cfg.n_gpus)))
            fits[g] = _pool_fits(cfg, gpu)
    return DisaggTerms(rows, groups, configs, errors, p_tables, d_tables, transfers, fits)


def solve_terms(terms: DisaggTerms, overheads: DisaggOverheads | Callable[[pd.Series], DisaggOverheads]
                = NO_OVERHEADS, waves: float = CLIENT_WAVES) -> pd.DataFrame:
    """:data:`DISAGG_COLUMNS` of every row from :func:`disagg_terms` (cheap: refits re-solve, never rebuild)."""
    rows, groups = terms.rows, terms.groups
    ok = [g for g, c in enumerate(terms.configs) if c is not None]
    values = np.full((len(terms.configs), 3), np.nan)
    if ok:
        cfgs = [terms.configs[g] for g in ok]
        first = pd.Series(np.arange(len(rows))).groupby(groups).first()
        oh = ([overheads(rows.iloc[int(first[g])]) for g in ok] if callable(overheads) else overheads)
        res = solve_closed_loop(
            [c.concurrency for c in cfgs], [c.osl for c in cfgs], [c.prefill_workers for c in cfgs],
            [c.prefill_bmax for c in cfgs], np.stack([terms.prefill_tables[g] for g in ok]),
            [terms.transfers[g] for g in ok], [c.decode_ranks for c in cfgs], [c.decode_batch for c in cfgs],
            np.stack([terms.decode_tables[g] for g in ok]), oh, waves)
        tput = res["rate"] * 1e3 * np.array([c.osl for c in cfgs]) / np.array([c.n_gpus for c in cfgs])
        values[ok] = np.column_stack([res["ttft"], res["tpot"], tput])
    out = pd.DataFrame(index=rows.index)
    for j, col in enumerate(DISAGG_COLUMNS[:3]):
        out[col] = values[groups, j] if len(rows) else np.zeros(0)
    out["fits"] = pd.Series([terms.fits[g] for g in groups], index=rows.index, dtype=object)
    out["error"] = [terms.errors[g] for g in groups]
    return out
