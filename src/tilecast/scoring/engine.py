"""Score a grid of cells on Dask: build each distinct graph once, forecast each distinct op once per GPU,
aggregate back to cells, derive throughput, fit and cost.

1. graphs: the distinct (model, batch, seq_len, mode, parallel, fused, dtype) of the cells, and the
   prefill and decode-step graphs of the serve cells (:mod:`tilecast.scoring.serve`), built in chunks on
   the workers (``client.map``) with their memory needs;
2. ops: all graphs' op rows deduplicated on the client;
3. latency: the distinct ops partitioned by (family, all-reduce group, op dtype, chunk of ``chunk_rows``);
   each task forecasts its rows on every GPU of the grid that has a peak for their dtype, with the pinned
   predictors, loaded once on the client (in a thread, while the workers build graphs) and scattered once
   to every worker (:mod:`tilecast.scoring.predictors`);
4. cells: per-GPU ``bincount`` sums and the schedule (:mod:`tilecast.scoring.aggregate`), then
   :func:`tilecast.scoring.metrics.derive`; serve cells: the harness over their graphs' sums
   (:func:`tilecast.scoring.serve.assemble`).

Every task is submitted with ``retries`` so a worker that dies mid-run costs a rerun, not the run.
A cell whose graph, memory model or ops fail carries the error text; every other cell is scored. So
does every cell of a (GPU, dtype) pair the GPU has no peak for (checked on the client before any work,
:func:`tilecast.forecast.workload.check_gpu_dtype`: the error names both), and every cell with an op of a
kernel family the predictor source has no model for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from distributed import Client, as_completed

from tilecast.forecast.ops import op_family
from tilecast.forecast.workload import check_gpu_dtype
from tilecast.graph.build import SHORT_BLOCKS, num_blocks, scalable
from tilecast.progress import phase
from tilecast.scoring import serve
from tilecast.scoring.aggregate import summarise_cells
from tilecast.scoring.cluster import DaskConfig
from tilecast.scoring.graph_cache import GraphCache
from tilecast.scoring.graphs import build_graphs, dedupe_ops
from tilecast.scoring.matrix import BUILD_KEYS, CELL_KEYS, GRAPH_KEYS
from tilecast.scoring.metrics import FitPolicy, derive
from tilecast.scoring.predictors import PredictorSource, client_predictor, latency_chunk, warm_up
from tilecast.scoring.pricing import Pricing
from tilecast.scoring.schema import LATENCY
from tilecast.specs import SpecError, get_gpu, get_model
from tilecast.tiles.ops import TENSOR_FAMILIES

log = logging.getLogger(__name__)

GRAPHS_PER_TASK = 6


@dataclass
class ScoreStats:
    """What a run did and where the time went (seconds)."""

    cells: int = 0
    graphs: int = 0
    cached_graphs: int = 0
    op_rows: int = 0
    distinct_ops: int = 0
    gpus: int = 0
    failed_cells: int = 0
    unsupported_cells: int = 0  # cells of a (GPU, dtype) pair the GPU has no peak for
    serve_cells: int = 0
    failed_serve_cells: int = 0  # serve cells with an error, the unsupported ones included
    unsupported_serve_cells: int = 0  # serve cells of a (GPU, dtype) pair the GPU has no peak for
    unknown_memory_cells: int = 0
    tasks: int = 0
    notes: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        """``N cells (K not supported, F failed), M serve cells (...)``: a cell whose GPU has no peak for its dtype
        is not supported, not a failure."""
        def part(n: int, bad: int, unsupported: int, what: str) -> str:
            inner = f"{unsupported} not supported, " if unsupported else ""
            return f"{n} {what} ({inner}{bad - unsupported} failed)"

        text = part(self.cells, self.failed_cells, self.unsupported_cells, "cells")
        if self.serve_cells:
            text += ", " + part(self.serve_cells, self.failed_serve_cells, self.unsupported_serve_cells, "serve cells")
        return text

    def as_dict(self) -> dict:
        return {**{k: v for k, v in vars(self).items() if k != "timings_s"},
                **{f"{k}_s": round(v, 3) for k, v in self.timings_s.items()}}


class _Progress:
    """A tqdm bar over tasks when enabled, nothing otherwise."""

    def __init__(self, enabled: bool, total: int, desc: str) -> None:
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="task", leave=True)  # a finished bar stays on the screen

    def update(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _gather(client: Client, futures: list, progress: bool, desc: str) -> list:
    """Results in submission order, ticking a progress bar as tasks finish."""
    bar = _Progress(progress, len(futures), desc)
    try:
        for _ in as_completed(futures):
            bar.update()
        return client.gather(futures)
    finally:
        bar.close()


def _recorded_blocks(model: str) -> int:
    """Blocks the graph builder records for ``model`` (two short recordings, or every block)."""
    spec = get_model(model)
    return sum(SHORT_BLOCKS) if scalable(spec) else num_blocks(spec)


#: graphs of one workload (plain / fused, parallel layouts) share a recorded tape: built in one task
_WORKLOAD = ["model", "batch", "seq_len", "mode"]


def _chunks(n: int, size: int) -> Iterable[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def _build(client: Client, graphs: pd.DataFrame, dask: DaskConfig, progress: bool, optimizer: str | None
           ) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Build graphs on the workers: the graphs of one workload together (they share its recorded tape),
    workloads dealt round-robin by expected cost so the tasks take similar time."""
    cost = graphs["model"].map(_recorded_blocks) * np.where(graphs["mode"] == "training", 3, 1)
    groups = list(graphs.assign(_cost=cost.to_numpy()).groupby(_WORKLOAD, sort=False))
    group_cost = np.array([g["_cost"].sum() for _, g in groups])
    order = [groups[i][1].drop(columns="_cost") for i in np.argsort(-group_cost, kind="stable")]
    n_parts = max(1, min(len(order), -(-len(graphs) // GRAPHS_PER_TASK)))
    parts = [pd.concat(order[i::n_parts]) for i in range(n_parts)]
    futures = client.map(build_graphs, parts, optimizer=optimizer, retries=dask.retries, pure=False)
    built = _gather(client, futures, progress, "graphs")
    return (pd.concat([b[0] for b in built], ignore_index=True), pd.concat([b[1] for b in built], ignore_index=True),
            len(parts))


def _graphs(client: Client, graphs: pd.DataFrame, cache: GraphCache | None, dask: DaskConfig, progress: bool,
            stats: ScoreStats, optimizer: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Op rows and info of every graph (``graph_id`` as in ``graphs``), built once and cached between runs."""
    keys = list(BUILD_KEYS)
    cached = cache.load() if cache is not None else None
    rows_parts, info_parts = [], []
    todo = graphs
    if cached is not None:
        c_rows, c_info = cached
        hit = graphs.merge(c_info.rename(columns={"graph_id": "cached_id"}), on=keys, how="inner")
        if len(hit):
            info_parts.append(hit.drop(columns=[*keys, "cached_id"]))
            ids = hit.set_index("cached_id")["graph_id"]
            part = c_rows.loc[c_rows["graph_id"].isin(ids.index)]
            rows_parts.append(part.assign(graph_id=part["graph_id"].map(ids).to_numpy(dtype=np.int64)))
        todo = graphs.loc[~graphs["graph_id"].isin(hit["graph_id"])]
        stats.cached_graphs = len(hit)
    if len(todo):
        b_rows, b_info, stats.tasks = _build(client, todo, dask, progress, optimizer)
        rows_parts.append(b_rows)
        info_parts.append(b_info)
    rows = pd.concat(rows_parts, ignore_index=True)
    info = pd.concat(info_parts, ignore_index=True).sort_values("graph_id").reset_index(drop=True)
    if cache is not None and len(todo):
        cache.save(rows, info.merge(graphs, on="graph_id", how="left", validate="one_to_one"))
    return rows, info


#: the words in the error of every cell of a (GPU, dtype) pair the GPU has no peak for: such a cell is "not
#: supported" (bf16 on a T4), not "failed" (reports count them apart, :func:`not_supported`)
NOT_SUPPORTED_TEXT = "is not supported on GPU"


def unsupported_pairs(cells: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(gpu, dtype) pairs of ``cells`` whose GPU has no peak for the dtype's ops -> the cells' error text."""
    out = {}
    for gpu, dtype in cells[["gpu", "dtype"]].drop_duplicates().itertuples(index=False):
        try:
            check_gpu_dtype(get_gpu(gpu), dtype)
        except SpecError as exc:
            out[(gpu, dtype)] = unsupported_text(gpu, dtype, exc)
    return out


def unsupported_text(gpu: str, dtype: str, why: object) -> str:
    """The error of a cell whose GPU has no peak for its dtype (one wording for every table)."""
    return f"dtype {dtype} {NOT_SUPPORTED_TEXT} {gpu}: {why}"


def not_supported(errors: pd.Series) -> np.ndarray:
    """True where an ``error`` says the cell's GPU cannot run its dtype at all (:data:`NOT_SUPPORTED_TEXT`)."""
    return errors.astype(object).fillna("").astype(str).str.contains(NOT_SUPPORTED_TEXT, regex=False).to_numpy()


def _runs_on(gpu: str, family: str, dtype: str) -> bool:
    """Whether ops of ``family`` in ``dtype`` can be forecast on ``gpu``: tensor-core families need the GPU's
    peak for the dtype (vector ops, memory and communication run at rates every GPU has)."""
    if family not in TENSOR_FAMILIES:
        return True
    try:
        get_gpu(gpu).peak_gflops(dtype)
    except SpecError:
        return False
    return True


@dataclass
class OpErrors:
    """Why a distinct op has no latency on a GPU: ``code[op, gpu]`` indexes ``messages`` (-1: none)."""

    code: np.ndarray
    messages: list[str] = field(default_factory=list)

    def add(self, ix: np.ndarray, cols: np.ndarray, message: str) -> None:
        if message not in self.messages:
            self.messages.append(message)
        self.code[np.ix_(ix, cols)] = self.messages.index(message)


def _latencies(client: Client, distinct: pd.DataFrame, gpu_keys: list[str], source: PredictorSource,
               loading: Future | None, dask: DaskConfig, progress: bool, stats: ScoreStats
               ) -> tuple[np.ndarray, OpErrors]:
    """Per-instance ms, shape (distinct ops, GPUs), from tasks per (family, all-reduce group, op dtype, chunk
    of rows); and why ops have none (a task's error on a GPU, a family without a model). ``loading``: the
    predictors being loaded on the client (in a thread, while the workers build graphs). A GPU without a peak
    for a chunk's dtype is not asked (its ms stay NaN: those cells carry the unsupported-dtype error); a
    family the source has no model for is not asked either (its ops stay NaN, the error names the family)."""
    fam = pd.Series(op_family(distinct), index=distinct.index).fillna("-")
    op_dtype = distinct["dtype"].astype(str)
    op_ms = np.full((len(distinct), len(gpu_keys)), np.nan)
    errors = OpErrors(np.full(op_ms.shape, -1, dtype=np.int32))
    todo = []
    for (family, _, dtype), idx in distinct.groupby([fam, distinct["degree"], op_dtype], sort=True).groups.items():
        cols = np.array([j for j, g in enumerate(gpu_keys) if _runs_on(g, str(family), str(dtype))], dtype=np.int64)
        missing = source.missing_error(str(family))
        for sl in _chunks(len(idx), dask.chunk_rows):
            ix = np.asarray(idx)[sl]
            if missing is not None:
                errors.add(ix, cols, missing)
            elif len(cols):
                todo.append((ix, cols))
    loaded = loading.result() if loading is not None and todo else None
    # one copy on every worker, deserialised once there; replicas survive a worker that dies
    shipped = client.scatter(loaded, broadcast=True, hash=False) if loaded is not None else None
    futures = [client.submit(latency_chunk, source, distinct.loc[ix], [gpu_keys[j] for j in cols],
                             int(distinct.at[ix[0], "degree"]), shipped, retries=dask.retries, pure=False)
               for ix, cols in todo]
    stats.tasks += len(futures)
    for (ix, cols), (ms, errs) in zip(todo, _gather(client, futures, progress, "ops"), strict=True):
        op_ms[np.ix_(ix, cols)] = ms
        for gpu, msg in errs.items():
            errors.add(ix, np.array([gpu_keys.index(gpu)]), msg)
    return op_ms, errors


def _forecast_errors(rows: pd.DataFrame, errors: OpErrors, gpu_keys: list[str]) -> pd.DataFrame:
    """``graph_id``, ``gpu``, ``forecast_error``: the reasons the ops of a graph lack a latency on a GPU (the
    messages of exactly the ops that graph uses, in first-seen order)."""
    out = []
    op_id, graph_id = rows["op_id"].to_numpy(), rows["graph_id"].to_numpy()
    for j, gpu in enumerate(gpu_keys):
        codes = errors.code[op_id, j]
        hit = codes >= 0
        if not hit.any():
            continue
        pairs = pd.DataFrame({"graph_id": graph_id[hit], "code": codes[hit]}).drop_duplicates()
        text = pairs.sort_values("code").groupby("graph_id")["code"].agg(
            lambda c: "forecast failed: " + "; ".join(errors.messages[i] for i in c))
        out.append(text.rename("forecast_error").reset_index().assign(gpu=gpu))
    if not out:
        return pd.DataFrame({"graph_id": pd.Series(dtype=np.int64), "gpu": pd.Series(dtype=object),
                             "forecast_error": pd.Series(dtype=object)})
    return pd.concat(out, ignore_index=True)


def _with_errors(out: pd.DataFrame, unsupported: dict[tuple[str, str], str]) -> pd.DataFrame:
    """``error`` per cell: its (GPU, dtype) pair's when the GPU has no peak for the dtype, else its graph's, else
    why ops it needs have no forecast on its GPU (``forecast_error``), else a bad step time; a failed cell's
    latencies are emptied."""
    error = out["graph_error"].astype(object).where(out["graph_error"].notna(), None)
    if unsupported:
        pair = pd.Series(list(zip(out["gpu"], out["dtype"], strict=True)), index=out.index, dtype=object)
        pair_err = pair.map(unsupported)
        error = pair_err.where(pair_err.notna(), error)
    nan_ops = out["nan_ops"].fillna(0).to_numpy() > 0
    pred_err = out["forecast_error"].astype(object)
    error = np.where(pd.isna(error) & nan_ops, pred_err.where(pred_err.notna(), "forecast failed for some ops"),
                     error)
    e2e = out["e2e_ms"].to_numpy(dtype=float)
    error = np.where(pd.isna(error) & ~(np.isfinite(e2e) & (e2e > 0)),
                     "forecast is not a positive finite step time", error)
    out["error"] = pd.Series(error, dtype=object, index=out.index).where(pd.notna(error), None)
    out.loc[out["error"].notna(), list(LATENCY)] = np.nan
    return out


def with_intervals(out: pd.DataFrame, columns: dict[str, str], mode: str | None = None,
                   level: float | None = None) -> pd.DataFrame:
    """Prediction intervals of ``columns`` (value column -> prefix: ``e2e_ms`` -> ``pred``) per (GPU, dtype,
    mode) group (:func:`tilecast.forecast.intervals.forecast_interval`; ``mode`` for every row, else each
    row's ``mode``); ``<prefix>_lo_ms``, ``<prefix>_hi_ms`` and ``interval_note`` (null where the value is)."""
    from tilecast.forecast.intervals import forecast_interval

    modes = pd.Series(mode, index=out.index) if mode is not None else out["mode"]
    groups = out.groupby([out["gpu"], out["dtype"], modes], sort=False).indices
    note = np.full(len(out), None, dtype=object)  # what each row's intervals rest on (one per group)
    for col, prefix in columns.items():
        lo, hi = np.full(len(out), np.nan), np.full(len(out), np.nan)
        value = out[col].to_numpy(dtype=float)
        for (gpu, dtype, m), idx in groups.items():
            ok = idx[np.isfinite(value[idx])]
            if len(ok):
                lo[ok], hi[ok], note[ok] = forecast_interval(str(m), str(gpu), str(dtype), value[ok], level)
        out[f"{prefix}_lo_ms"], out[f"{prefix}_hi_ms"] = lo, hi
    out["interval_note"] = note
    return out


def _graph_table(cells: pd.DataFrame, serve_cells: pd.DataFrame | None
                 ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None, tuple | None]:
    """The distinct graphs (``graph_id`` + :data:`BUILD_KEYS`) of the cells and of the valid serve cells; the
    cells with their ``graph_id``; the serve cells with ``workload_error``; each serve cell's configuration code
    and each configuration's graph per role (:func:`tilecast.scoring.serve.component_keys`)."""
    plain = cells[list(GRAPH_KEYS)].drop_duplicates().assign(kv_len=0, serving=False)
    parts, roles = [plain], {}
    if serve_cells is not None:
        serve_cells = serve_cells.reset_index(drop=True)
        serve_cells["workload_error"] = serve.workload_errors(serve_cells)
        valid = serve_cells["workload_error"].isna()
        codes, roles = serve.component_keys(serve_cells.loc[valid])
        parts += list(roles.values())
    graphs = pd.concat(parts, ignore_index=True).drop_duplicates().reset_index(drop=True)
    graphs.insert(0, "graph_id", np.arange(len(graphs), dtype=np.int64))
    keys = list(BUILD_KEYS)
    cells = cells.assign(kv_len=0, serving=False).merge(graphs, on=keys, how="left", validate="many_to_one")
    ids = None
    if serve_cells is not None:
        cell_codes = np.full(len(serve_cells), -1, dtype=np.int64)  # -1: an invalid workload, no graphs
        cell_codes[np.flatnonzero(valid.to_numpy())] = codes
        ids = (cell_codes, {role: frame.merge(graphs, on=keys, how="left", validate="many_to_one")["graph_id"]
                            .to_numpy() for role, frame in roles.items()})
    return graphs, cells.drop(columns=["kv_len", "serving"]), serve_cells, ids


@dataclass
class GridScores:
    """A scored grid: the cell table, the serve table (None without serve cells) and what the run did."""

    table: pd.DataFrame
    serve: pd.DataFrame | None
    stats: ScoreStats


def score_grid(cells: pd.DataFrame, client: Client, source: PredictorSource, pricing: Pricing,
               fit: FitPolicy | None = None, dask: DaskConfig | None = None, progress: bool = False,
               cache: GraphCache | None = None, serve_cells: pd.DataFrame | None = None) -> GridScores:
    """Score ``cells`` (columns :data:`CELL_KEYS` and ``n_gpus``) and ``serve_cells`` (columns
    :data:`~tilecast.scoring.matrix.SERVE_KEYS` and ``n_gpus``) together: their graphs built once, their
    distinct ops forecast once per GPU. One row per cell / serve cell, in the input order."""
    fit, dask = fit or FitPolicy(), dask or DaskConfig()
    stats = ScoreStats(cells=len(cells))
    t0 = time.perf_counter()
    if serve_cells is not None and serve_cells.empty:
        serve_cells = None
    gpu_keys = list(pd.unique(pd.concat([cells["gpu"], *([serve_cells["gpu"]] if serve_cells is not None else [])])))
    pricing.require(gpu_keys)
    stats.gpus = len(gpu_keys)
    cells = cells.reset_index(drop=True)
    if "dtype" not in cells:  # cells listed before the dtype axis: fp32, as they then were
        cells = cells.assign(dtype="fp32")
    unsupported = unsupported_pairs(cells)
    graphs, cells, serve_cells, serve_ids = _graph_table(cells, serve_cells)
    serve_unsupported = unsupported_pairs(serve_cells) if serve_cells is not None else {}
    stats.graphs = len(graphs)
    stats.serve_cells = 0 if serve_cells is None else len(serve_cells)

    # the registered models load on the client while the workers build graphs (and import what they need)
    loader = ThreadPoolExecutor(1, thread_name_prefix="load-predictors") if source.kind == "registry" else None
    loading = loader.submit(client_predictor, source, gpu_keys) if loader is not None else None
    warm = [client.submit(warm_up, source, workers=[w], allow_other_workers=False, pure=False)
            for w in client.scheduler_info()["workers"]] if loader is not None else []

    # 1. graphs: from the cache, the others built on the workers
    try:
        with phase("graphs", f"{len(graphs):,} graphs for {len(cells):,} cells"
                   + (f" and {stats.serve_cells:,} serve cells" if stats.serve_cells else "")) as ph:
            rows, info = _graphs(client, graphs, cache, dask, progress, stats, fit.optimizer)
            ph.done(f"{len(graphs):,} graphs ({stats.cached_graphs:,} from the cache), {len(rows):,} op rows")
    except BaseException:
        if loader is not None:
            loader.shutdown(wait=False, cancel_futures=True)
        raise
    t1 = time.perf_counter()
    stats.timings_s["graphs"] = t1 - t0

    # 2. distinct ops across every graph and cell
    ok_info = info.loc[info["graph_id"].isin(rows["graph_id"].unique())].reset_index(drop=True)
    dd = dedupe_ops(rows, ok_info.set_index("graph_id")["degree"])
    stats.op_rows, stats.distinct_ops = len(dd.rows), len(dd.distinct)

    # 3. per-instance ms of each distinct op on each GPU
    try:
        with phase("forecast", f"{stats.distinct_ops:,} distinct ops on {len(gpu_keys)} GPUs ({source.label})") as ph:
            op_ms, errors = _latencies(client, dd.distinct, gpu_keys, source, loading, dask, progress, stats)
            ph.done(f"{stats.distinct_ops * len(gpu_keys):,} op forecasts")
    finally:
        if loader is not None:
            loader.shutdown(wait=True)
        client.cancel(warm)
    t2 = time.perf_counter()
    stats.timings_s["predict"] = t2 - t1

    # 4. back to cells
    summary = summarise_cells(dd.rows, op_ms, ok_info, gpu_keys) if len(ok_info) else pd.DataFrame(
        columns=["graph_id", "gpu", *LATENCY, "nan_ops"])
    op_errors = _forecast_errors(dd.rows, errors, gpu_keys)
    out = _with_errors(cells.merge(info[["graph_id", "mem_required_bytes", "graph_error", "mem_error"]],
                                   on="graph_id", how="left").merge(summary, on=["graph_id", "gpu"], how="left")
                       .merge(op_errors, on=["graph_id", "gpu"], how="left"), unsupported)
    failed = out["error"].notna().to_numpy()
    if unsupported:
        hit = pd.Series(list(zip(out["gpu"], out["dtype"], strict=True)), dtype=object).isin(list(unsupported))
        stats.unsupported_cells = int(hit.sum())
        note = (f"{stats.unsupported_cells} cells of (GPU, dtype) pairs without a peak carry an error: "
                + ", ".join(f"{g}/{d}" for g, d in sorted(unsupported)))
        stats.notes.append(note)
        log.warning(note)
    out = with_intervals(derive(out, pricing, fit), {"e2e_ms": "pred"})
    out["predictor"] = source.label
    out["versions"] = source.versions_json()
    stats.failed_cells = int(failed.sum())
    mem_err = out["mem_error"].dropna()
    stats.unknown_memory_cells = int(len(mem_err))
    for msg, n in mem_err.value_counts().items():
        note = f"memory unknown (fits left empty) for {n} cells: {msg}"
        stats.notes.append(note)
        log.warning(note)
    served = None
    if serve_cells is not None:
        token = np.concatenate([g for r, g in serve_ids[1].items() if r.startswith("token")] or [np.zeros(0, int)])
        decode = np.concatenate([g for r, g in serve_ids[1].items() if r.startswith("decode")] or [np.zeros(0, int)])
        grid = serve.engine_summaries(dd.rows, dd.distinct, op_ms, ok_info, gpu_keys, token, decode) \
            if len(ok_info) else summary
        served = serve.assemble(serve_cells, serve_ids, grid, info[["graph_id", "graph_error"]], op_errors,
                                serve_unsupported, pricing, learned=source.kind != "roofline")
        served = with_intervals(served, {"ttft_ms": "ttft", "tpot_ms": "tpot"}, mode="serve")
        served["predictor"] = source.label
        served["versions"] = source.versions_json()
        stats.failed_serve_cells = int(served["error"].notna().sum())
        stats.unsupported_serve_cells = int(not_supported(served["error"]).sum())
    stats.timings_s["aggregate"] = time.perf_counter() - t2
    table = out.drop(columns=["graph_id", "graph_error", "mem_error", "nan_ops", "forecast_error"])
    return GridScores(table, served, stats)


def score_cells(cells: pd.DataFrame, client: Client, source: PredictorSource, pricing: Pricing,
                fit: FitPolicy | None = None, dask: DaskConfig | None = None, progress: bool = False,
                cache: GraphCache | None = None) -> tuple[pd.DataFrame, ScoreStats]:
    """Score ``cells`` (columns :data:`CELL_KEYS` and ``n_gpus``): one row per cell, in the input order."""
    scored = score_grid(cells, client, source, pricing, fit, dask, progress, cache)
    return scored.table, scored.stats


__all__ = ["CELL_KEYS", "NOT_SUPPORTED_TEXT", "GridScores", "ScoreStats", "not_supported", "score_cells", "score_grid",
           "unsupported_text"]
