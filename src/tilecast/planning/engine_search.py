"""The serving search at scale: engine x GPU x dtype x layout x concurrency, every candidate an array element.

A serving candidate is one replica's configuration: the engine serving it (:data:`tilecast.serving.engines.ENGINES`),
the GPU, the dtype, the layout (tp; attention data parallel and expert parallel for mixture-of-experts models) and
the requests in flight. The forecasts are the ones ``predict.py mode=serve engine=...`` makes for one
configuration (:func:`tilecast.forecast.serve.forecast_serve`), made for all of them at once:

- **step costs**: per (engine, dtype, layout) the step-cost grid of every GPU in one pass
  (:func:`tilecast.serving.step.step_costs`: the grid's graphs built once per (dtype, layout) and shared by the
  engines, their ops forecast for every GPU under the engine's kernel factors and all-reduce);
- **memory first**: every candidate's memory per GPU (:func:`tilecast.forecast.serve.serve_memory_terms`, arrays over
  the concurrencies) against the engine's share of the GPU (``kv_memory_fraction``); a candidate that does not
  fit is not forecast further (it keeps its memory need and the largest concurrency that fits);
- **steady state**: TTFT and TPOT of every fitting concurrency from the one step table
  (:func:`tilecast.serving.steady.steady_state`, vectorised over the concurrencies);
- **intervals**: the serve interval of (GPU, dtype) (:func:`tilecast.forecast.intervals.e2e_interval`), as predict
  applies it to the one configuration.

The concurrency grid is a list or ``dense``: every integer from 1 to ``max_concurrency``, capped by the engine's
``max_num_seqs`` (more requests are queued, not run). The result is the candidate table the serving plan sizes
fleets from (:func:`tilecast.planning.serve_plan.size_fleets`).
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tilecast.forecast.intervals import e2e_interval
from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.serve import (
    GIB,
    ServeMemory,
    ServeWorkload,
    capacity_bytes,
    fitting_concurrency,
    kv_capacity_tokens,
    request_latency_ms,
    serve_memory_terms,
    tokens_per_s_per_gpu,
)
from tilecast.forecast.workload import check_gpu_dtype
from tilecast.planning.layouts import LAYOUT_COLUMNS, ServeSearch
from tilecast.planning.questions import ServeQuestion
from tilecast.scoring.engine import unsupported_text
from tilecast.scoring.pricing import Pricing
from tilecast.serving.policy import EnginePolicy, engine_policy
from tilecast.serving.steady import steady_state
from tilecast.serving.step import step_costs
from tilecast.specs import GpuSpec, SpecError, get_gpu
from tilecast.specs.layout import Layout

#: the numeric columns of a forecast candidate (the rest: engine, gpu, dtype, the layout, the notes)
NUMBERS = ("concurrency", "ttft_ms", "tpot_ms", "ttft_lo_ms", "ttft_hi_ms", "tpot_lo_ms", "tpot_hi_ms",
           "request_latency_ms", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "mem_required_gib",
           "gpu_mem_gib", "max_concurrency", "usd_per_gpu_hour")


def concurrency_grid(search: ServeSearch, policy: EnginePolicy) -> np.ndarray:
    """The concurrencies searched under ``policy``'s engine: the list of ``search``, or every integer from 1 to
    ``search.max_concurrency`` (``dense``); never above the engine's ``max_num_seqs``."""
    top = policy.max_num_seqs
    if search.concurrency == "dense":
        return np.arange(1, min(search.max_concurrency, top) + 1, dtype=np.int64)
    grid = np.asarray(search.concurrency, dtype=np.int64)
    return grid[grid <= top]


def workload_error(question: ServeQuestion, dtype: str, row: dict) -> tuple[Any, str | None]:
    """(what the graph builder splits by, None) for a layout row the model can run, else (None, the named
    reason)."""
    layout = None
    if int(row["ep"]) > 1 or int(row["attention_dp"]) > 1:
        try:
            layout = Layout(int(row["tp"]), int(row["attention_dp"]), int(row["ep"]))
        except SpecError as exc:
            return None, str(exc)
    try:
        sw = ServeWorkload(question.model, dtype, int(row["tp"]), question.isl, question.osl, 1, layout=layout)
    except SpecError as exc:
        return None, str(exc)
    return sw, None


#: the text columns of a candidate row (the first ones stored as categories: few distinct values, a million rows)
CATEGORIES = ("engine", "gpu", "dtype", "layout", "interval_note")
TEXTS = (*CATEGORIES, "layout_error", "error")
#: the layout columns every candidate row carries (the others: :func:`with_layout` puts them on the rows kept)
ROW_LAYOUT = ("tp", "gpus_per_replica")


class _Columns:
    """Candidate columns accumulated per block (every block has every column: a missing one is NaN or None),
    concatenated once."""

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {}
        self.n = 0

    def add(self, n: int, **columns: Any) -> None:
        keys = dict.fromkeys((*TEXTS, *NUMBERS, *ROW_LAYOUT, "_fits"))
        for key in keys:
            value = columns.get(key, None if key in TEXTS else np.nan)
            arr = np.asarray(value, dtype=object if key in TEXTS else None)
            if arr.ndim == 0:
                arr = np.full(n, value, dtype=object if key in TEXTS else None)
            self.parts.setdefault(key, []).append(arr)
        self.n += n

    def frame(self) -> pd.DataFrame:
        out = {}
        for key in list(self.parts):
            values = np.concatenate(self.parts.pop(key))
            out[key] = pd.Categorical(values) if key in CATEGORIES else values
        return pd.DataFrame(out)


def shared_predictor(predict: FamilyPredictor | None) -> FamilyPredictor | None:
    """``predict`` answering each (family, GPU, rows) once: the engines price the same kernels (SGLang and TRT-LLM
    as factors on ``predict``'s answer, :func:`tilecast.serving.engine_kernels.engine_family_predictor`), so the
    second and third engine of a (dtype, layout) reuse the first one's kernel forecasts."""
    if predict is None:
        return None
    memo: dict[tuple, np.ndarray] = {}

    def once(family: str, rows: pd.DataFrame, gpu: GpuSpec | None) -> np.ndarray:
        rows_hash = hashlib.blake2b(pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes()).hexdigest()
        key = (family, getattr(gpu, "key", None), tuple(rows.columns), rows_hash)  # the rows in their order
        if key not in memo:
            memo[key] = np.asarray(predict(family, rows, gpu), dtype=float)
        return memo[key]

    return once


def search_engines(question: ServeQuestion, layouts: pd.DataFrame, search: ServeSearch,
                   predict: FamilyPredictor | None, pricing: Pricing, progress: bool = False
                   ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Every candidate of ``question`` over ``layouts`` (:func:`tilecast.planning.layouts.serve_layouts`) x the
    engines x the concurrency grid, forecast (module docstring): the candidate rows (layout columns, ``engine``,
    ``concurrency``, the forecast columns of :data:`tilecast.planning.serve_plan.FORECAST_COLUMNS`, ``error``) and
    what the search did."""
    t0 = time.perf_counter()
    spec = question.model
    predict = shared_predictor(predict)
    cols = _Columns()
    gpu_specs = {g: get_gpu(g) for g in pd.unique(layouts["gpu"])}
    info = {"engines": list(search.engines), "step_tables": 0, "step_tables_s": 0.0, "steady_state_s": 0.0,
            "fitting": 0, "concurrency": search.concurrency if search.concurrency == "dense"
            else list(search.concurrency), "max_concurrency": search.max_concurrency}
    shape = layouts.drop_duplicates(["dtype", *LAYOUT_COLUMNS])
    for rec, engine in itertools.product(shape.to_dict("records"), search.engines):
        policy = engine_policy(engine)
        grid = concurrency_grid(search, policy)
        dtype = str(rec["dtype"])
        at = layouts.loc[(layouts["dtype"] == dtype) & np.logical_and.reduce(
            [layouts[k] == rec[k] for k in LAYOUT_COLUMNS])]
        base = {k: rec[k] for k in (*ROW_LAYOUT, "layout")}
        refused = rec["layout_error"]
        sw, invalid = (None, None) if refused is not None else workload_error(question, dtype, rec)
        runnable, errors = [], {}
        for gpu in at["gpu"]:
            try:
                check_gpu_dtype(gpu_specs[gpu], dtype)
                runnable.append(gpu_specs[gpu])
            except SpecError as exc:
                errors[gpu] = unsupported_text(gpu, dtype, exc)
        if refused is not None:
            # a layout the search lists but does not forecast: one row with the reason
            for gpu in at["gpu"]:
                cols.add(1, engine=engine, gpu=gpu, dtype=dtype, **base, layout_error=refused)
            continue
        costs: dict[str, Any] = {}
        # memory first: a GPU on which not even the grid's smallest concurrency fits needs no step table
        fit_some = [g for g in runnable if invalid is None and _memory(question, sw, g, policy, grid[:1])[1].all()]
        if fit_some:
            t1 = time.perf_counter()
            try:
                costs = step_costs(spec, dtype, sw.parallel, fit_some, predict, policy)
                info["step_tables"] += len(fit_some)
            except Exception as exc:  # noqa: BLE001 - a step table that cannot be forecast: its rows say why
                errors.update({g.key: f"step costs failed: {type(exc).__name__}: {exc}" for g in fit_some})
            info["step_tables_s"] += time.perf_counter() - t1
        for gpu in at["gpu"]:
            g = gpu_specs[gpu]
            why = invalid or errors.get(gpu)
            n = len(grid)
            common = dict(engine=engine, gpu=gpu, dtype=dtype, **base, layout_error=None)
            if why is not None:
                cols.add(n, **common, error=why, concurrency=grid)
                continue
            cols.add(n, **common, **_forecast(question, sw, g, costs.get(gpu), policy, grid, pricing, info))
        if progress:
            print(f"  {engine} {dtype} {rec['layout']}: {cols.n:,} candidates, "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    frame = cols.frame()
    fits = frame.pop("_fits").to_numpy(dtype=float)
    frame["fits"] = pd.array(np.where(np.isnan(fits), None, fits > 0.5), dtype="boolean")
    frame["max_concurrency"] = pd.array(frame["max_concurrency"].to_numpy(), dtype="Float64").astype("Int64")
    frame["price_estimate"] = frame["gpu"].map({g: pricing.prices[g].estimate for g in gpu_specs}).astype(bool)
    info["search_s"] = time.perf_counter() - t0
    return frame, info


def _memory(question: ServeQuestion, sw: ServeWorkload, gpu: GpuSpec, policy: EnginePolicy, grid: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, int, float]:
    """(bytes per GPU, fits, the largest concurrency that fits, tokens the KV cache holds) over the concurrency
    ``grid``, against the engine's share of the GPU (as :func:`tilecast.forecast.serve.forecast_serve` checks one
    configuration)."""
    isl, osl = question.isl, question.osl
    weights, kv, workspace, per_token = serve_memory_terms(sw.model, sw.dtype, isl, sw.tp, osl, grid, sw.layout)
    cap = capacity_bytes(gpu, policy.kv_memory_fraction)
    need = np.broadcast_to(weights + kv + workspace, grid.shape).astype(float)
    most = int(np.min(fitting_concurrency(cap, weights, workspace, per_token, isl + osl)))
    held = kv_capacity_tokens(ServeMemory(float(weights), 0.0, float(workspace), float(np.min(per_token)), cap),
                              sw.dtype)
    return need, need <= cap, most, held


def _forecast(question: ServeQuestion, sw: ServeWorkload, gpu: GpuSpec, cost: Any, policy: EnginePolicy,
              grid: np.ndarray, pricing: Pricing, info: dict[str, Any]) -> dict[str, Any]:
    """The forecast columns of one (engine, GPU, dtype, layout) over the concurrency ``grid`` (``cost``: its step
    table, None where no concurrency fits)."""
    isl, osl = question.isl, question.osl
    need, fits, most, kv_tokens = _memory(question, sw, gpu, policy, grid)
    n = len(grid)
    ttft, tpot = np.full(n, np.nan), np.full(n, np.nan)
    t1 = time.perf_counter()
    if fits.any():
        st = steady_state(cost, isl, osl, grid[fits], kv_tokens=kv_tokens)
        ttft[fits], tpot[fits] = st["ttft_ms"], st["tpot_ms"]
    info["steady_state_s"] += time.perf_counter() - t1
    info["fitting"] += int(fits.sum())
    ttft_lo, ttft_hi, note = e2e_interval("serve", gpu, sw.dtype, ttft)
    tpot_lo, tpot_hi, _ = e2e_interval("serve", gpu, sw.dtype, tpot)
    ok = fits & np.isfinite(ttft) & np.isfinite(tpot) & (tpot > 0)
    bad = fits & ~ok
    with np.errstate(invalid="ignore", divide="ignore"):
        per_gpu = np.where(ok, tokens_per_s_per_gpu(ttft, tpot, grid, osl, sw.n_gpus), np.nan)
        per_user = np.where(ok, 1e3 / tpot, np.nan)
    return dict(concurrency=grid, ttft_ms=ttft, tpot_ms=tpot, ttft_lo_ms=ttft_lo, ttft_hi_ms=ttft_hi,
                tpot_lo_ms=tpot_lo, tpot_hi_ms=tpot_hi, request_latency_ms=request_latency_ms(ttft, tpot, osl),
                tokens_per_s_per_gpu=per_gpu, tokens_per_s_per_user=per_user, _fits=fits.astype(float),
                mem_required_gib=need / GIB, gpu_mem_gib=float(gpu.mem_gb), max_concurrency=np.full(n, most),
                usd_per_gpu_hour=float(pricing.prices[gpu.key].usd_per_gpu_hour), interval_note=note,
                error=np.where(bad, "forecast is not a positive finite latency", None).astype(object))


def with_layout(rows: pd.DataFrame, layouts: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (a few kept candidates) with every layout column of :data:`LAYOUT_COLUMNS` (from ``layouts``, by the
    layout's label) and plain text where the search stored categories."""
    table = layouts.drop_duplicates("layout").set_index("layout")
    out = rows.copy()
    for key in CATEGORIES:
        if key in out and isinstance(out[key].dtype, pd.CategoricalDtype):
            out[key] = out[key].astype(object)
    for key in LAYOUT_COLUMNS:
        if key not in out:
            out[key] = out["layout"].map(table[key])
    return out


def engine_candidates(question: ServeQuestion, gpus: Sequence[str], search: ServeSearch,
                      predict: FamilyPredictor | None, pricing: Pricing, progress: bool = False
                      ) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
    """:func:`search_engines` over the layouts of ``search`` on ``gpus`` and the question's dtypes: (candidate
    rows, what the search did, the layouts)."""
    from tilecast.planning.layouts import serve_layouts

    layouts = serve_layouts(gpus, question.dtypes, search)
    rows, info = search_engines(question, layouts, search, predict, pricing, progress)
    return rows, info, layouts


__all__ = ["NUMBERS", "concurrency_grid", "engine_candidates", "search_engines", "shared_predictor", "with_layout",
           "workload_error"]
