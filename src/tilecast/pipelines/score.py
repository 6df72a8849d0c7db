"""A score run end to end: validate everything, score on Dask, write ``<output_dir>/<date>/`` atomically.

Files of a run directory: ``scores.parquet`` (one row per cell, :mod:`tilecast.scoring.schema`),
``serve_scores.parquet`` (one row per serve cell, when the matrix has a ``serve`` section),
``train_scores.parquet`` (one row per training run, when it has a ``train_runs`` section,
:mod:`tilecast.scoring.train_runs`),
``run.json`` (what ran: matrix, predictor versions, pricing, fit policy, timings) and ``pricing.csv``
(the prices used, with source and date).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from tilecast.errors import UserError
from tilecast.paths import STATE_ROOT
from tilecast.scoring.cluster import DaskConfig, dask_client
from tilecast.scoring.engine import ScoreStats, score_grid
from tilecast.scoring.graph_cache import GraphCache
from tilecast.scoring.matrix import (
    BYTES_PER_CELL,
    Matrix,
    check_size,
    expand,
    expand_serve,
    expand_train_runs,
    load_matrix,
    matrix_dtypes,
    matrix_models,
)
from tilecast.scoring.metrics import FitPolicy
from tilecast.scoring.predictors import PredictorSource, families_for, resolve_source
from tilecast.scoring.pricing import Pricing, load_pricing
from tilecast.scoring.schema import conform, conform_serve, read_scores
from tilecast.scoring.store import RunStore, run_date
from tilecast.scoring.train_runs import conform_train

log = logging.getLogger(__name__)

SCORES = "scores.parquet"
SERVE_SCORES = "serve_scores.parquet"
TRAIN_SCORES = "train_scores.parquet"
RUN_JSON = "run.json"
PRICING_CSV = "pricing.csv"


@dataclass(frozen=True)
class ScoreSettings:
    """Everything a score run needs (a job builds it from its composed config)."""

    matrix: Mapping[str, Any]
    pricing: Mapping[str, Any]
    dask: DaskConfig = field(default_factory=DaskConfig)
    predictor: str = "registry"  # registry | roofline
    alias: str = "champion"
    tracking_uri: str | None = None
    output_dir: Path = STATE_ROOT / "reports"
    date: str | None = None
    fit: FitPolicy = field(default_factory=FitPolicy)
    progress: bool | None = None  # None: a bar on a terminal, none under CI
    graph_cache: bool = True  # keep built graphs between runs (<cache_dir>, keyed by a code fingerprint)
    cache_dir: Path | None = None  # None: <output_dir>/.cache
    calibrate: bool = True  # apply each GPU's stored calibration (jobs/calibrate.py) where there is one
    max_cells: int | None = 2_000_000  # refuse a larger matrix (cells before exclusions); None: no limit

    def __post_init__(self) -> None:
        if self.progress is not None and not isinstance(self.progress, bool):  # bool("maybe") would be True
            raise UserError(f"progress={self.progress!r}: expected true, false or null (a bar on a terminal only)")

    @property
    def cache(self) -> GraphCache | None:
        if not self.graph_cache:
            return None
        return GraphCache(self.cache_dir or self.output_dir / ".cache", variant=f"optimizer={self.fit.optimizer}")


@dataclass(frozen=True)
class Prepared:
    """A validated run: matrix, cells, prices and pinned predictors; nothing has been computed yet."""

    matrix: Matrix
    cells: pd.DataFrame
    pricing: Pricing
    source: PredictorSource
    date: str
    serve_cells: pd.DataFrame | None = None  # the matrix's serve section, None without one
    train_cells: pd.DataFrame | None = None  # the matrix's train_runs section, None without one


@dataclass(frozen=True)
class ScoreRun:
    """A finished run: its directory, the table and the stats."""

    path: Path
    table: pd.DataFrame
    stats: ScoreStats
    meta: dict[str, Any]
    serve: pd.DataFrame | None = None  # the serve table, None without serve cells
    train: pd.DataFrame | None = None  # the training-run table, None without training-run cells


def under_ci() -> bool:
    """True under a CI runner (``CI`` set, as GitHub Actions, GitLab and most others do)."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def show_progress(setting: bool | None) -> bool:
    """The progress bar: as set, else on when stderr is a terminal and not under CI."""
    if setting is not None:
        return bool(setting)
    return sys.stderr.isatty() and not under_ci()


def quiet_logs() -> None:
    """Dask's own INFO lines (scheduler, nannies, every task cancelled at shutdown) are never shown, nor the
    nannies' and workers' warnings while the cluster shuts down: the phase lines (:mod:`tilecast.progress`) and
    tilecast's own say what happens. Under CI tilecast logs only warnings, errors and its phase lines."""
    names = ("tilecast", "distributed") if under_ci() else ("distributed",)
    for name in names:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("tilecast.progress").setLevel(logging.INFO)  # one line per phase, in a log too
    for name in ("distributed.nanny", "distributed.process", "distributed.worker"):  # the nannies' shutdown chatter
        logging.getLogger(name).setLevel(logging.ERROR)


def prepare(settings: ScoreSettings) -> Prepared:
    """Check every name and price and pin the predictors, before any work (errors name what is wrong)."""
    matrix = load_matrix(settings.matrix)
    check_size(matrix, settings.max_cells)
    pricing = load_pricing(settings.pricing)
    pricing.require(matrix.gpus + (matrix.serve.gpus if matrix.serve else ())
                    + (matrix.train_runs.gpus if matrix.train_runs else ()))
    cells = expand(matrix)
    serve_cells = expand_serve(matrix) if matrix.serve is not None else None
    train_cells = expand_train_runs(matrix) if matrix.train_runs is not None else None
    n = len(cells) + (len(serve_cells) if serve_cells is not None else 0)
    log.info("matrix %s: %d cells%s, about %.1f GiB to score", matrix.name, len(cells),
                f" and {len(serve_cells)} serve cells" if serve_cells is not None else "", n * BYTES_PER_CELL / 2**30)
    source = resolve_source(settings.predictor, settings.alias, settings.tracking_uri,
                            families_for(matrix_dtypes(matrix), matrix_models(matrix)), calibrate=settings.calibrate)
    return Prepared(matrix, cells, pricing, source, run_date(settings.date), serve_cells, train_cells)


def score_into(prep: Prepared, settings: ScoreSettings, directory: Path) -> ScoreRun:
    """Score on Dask and write the run's files into ``directory`` (a staging folder)."""
    t0 = time.perf_counter()
    with dask_client(settings.dask) as client:
        t_up = time.perf_counter()
        scored = score_grid(prep.cells, client, prep.source, prep.pricing, settings.fit, settings.dask,
                            show_progress(settings.progress), settings.cache, prep.serve_cells)
    table, stats, serve = scored.table, scored.stats, scored.serve
    stats.timings_s = {"cluster": t_up - t0, **stats.timings_s}
    train = None
    if prep.train_cells is not None and len(prep.train_cells):
        t_t = time.perf_counter()
        train = _train_runs(prep)
        stats.timings_s["train_runs"] = time.perf_counter() - t_t
    table["run_date"] = prep.date
    t_w = time.perf_counter()
    pq.write_table(conform(table), directory / SCORES, compression="zstd")
    if serve is not None:
        serve["run_date"] = prep.date
        pq.write_table(conform_serve(serve), directory / SERVE_SCORES, compression="zstd")
    if train is not None:
        train["run_date"] = prep.date
        pq.write_table(conform_train(train), directory / TRAIN_SCORES, compression="zstd")
    prep.pricing.table().to_csv(directory / PRICING_CSV, index=False)
    stats.timings_s["write"] = time.perf_counter() - t_w
    stats.timings_s["total"] = time.perf_counter() - t0
    meta = {
        "date": prep.date, "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "matrix": prep.matrix.name, "dtypes": list(prep.matrix.dtypes), "predictor": prep.source.label,
        "predictor_detail": prep.source.describe(),
        "versions": prep.source.versions, "tracking_uri": prep.source.tracking_uri, "pricing": prep.pricing.name,
        "fit": asdict(settings.fit), "graph_cache": str(settings.cache.rows_path) if settings.cache else None,
        "dask": {"address": settings.dask.address} if settings.dask.address else
        {"local": True, "n_workers": settings.dask.n_workers, "threads_per_worker": settings.dask.threads_per_worker},
        "stats": stats.as_dict(),
    }
    (directory / RUN_JSON).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    log.info("scored %d cells and %d serve cells (%d graphs, %d distinct ops, %d GPUs, %d and %d failed) in %.1f s",
             stats.cells, stats.serve_cells, stats.graphs, stats.distinct_ops, stats.gpus, stats.failed_cells,
             stats.failed_serve_cells, stats.timings_s["total"])
    return ScoreRun(directory, table, stats, meta, serve, train)


def _train_runs(prep: Prepared) -> pd.DataFrame:
    """The training-run cells, scored on the client with the run's pinned predictors (loaded once per process:
    the grid's client already holds them)."""
    from tilecast.scoring.predictors import worker_predictor
    from tilecast.scoring.train_runs import score_train_runs

    train = score_train_runs(prep.train_cells, prep.matrix.train_runs, worker_predictor(prep.source), prep.pricing)
    train["predictor"] = prep.source.label
    train["versions"] = prep.source.versions_json()
    return train


def run_score(settings: ScoreSettings) -> ScoreRun:
    """Validate, score, and publish ``<output_dir>/<date>/`` (replacing that date's outputs atomically)."""
    quiet_logs()
    prep = prepare(settings)
    store = RunStore(settings.output_dir)
    with store.stage(prep.date) as staging:
        run = score_into(prep, settings, staging)
    path = store.path(prep.date)
    return ScoreRun(path, run.table, run.stats, run.meta, run.serve, run.train)


def read_serve(path: Path) -> pd.DataFrame | None:
    """A run directory's serve table, None when the run scored no serve cells."""
    file = Path(path) / SERVE_SCORES
    return pd.read_parquet(file) if file.exists() else None


def read_train(path: Path) -> pd.DataFrame | None:
    """A run directory's training-run table, None when the run scored no training runs."""
    file = Path(path) / TRAIN_SCORES
    return pd.read_parquet(file) if file.exists() else None


def read_run(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A run directory's score table (a table scored before the dtype axis reads as fp32) and ``run.json``."""
    table = read_scores(path / SCORES)
    meta = json.loads((path / RUN_JSON).read_text()) if (path / RUN_JSON).exists() else {}
    return table, meta


def settings_from_config(cfg: Mapping[str, Any]) -> ScoreSettings:
    """:class:`ScoreSettings` from a composed score config (a plain dict: ``OmegaConf.to_container``)."""
    from tilecast.paths import resolve

    fit = cfg.get("fit") or {}
    return ScoreSettings(
        matrix=cfg["matrix"], pricing=cfg["pricing"], dask=DaskConfig.from_mapping(cfg.get("dask")),
        predictor=str(cfg.get("forecaster") or "registry"), alias=str(cfg.get("alias") or "champion"),
        tracking_uri=(cfg.get("mlflow") or {}).get("tracking_uri"),
        output_dir=resolve(cfg.get("output_dir") or "reports"), date=cfg.get("date"),
        fit=FitPolicy(**fit), progress=cfg.get("progress"), graph_cache=bool(cfg.get("graph_cache", True)),
        cache_dir=resolve(cfg["cache_dir"]) if cfg.get("cache_dir") else None,
        calibrate=bool(cfg.get("calibrate", True)),
        max_cells=_max_cells(cfg.get("max_cells", ScoreSettings.max_cells)))


def _max_cells(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(f"max_cells must be a positive integer or null (no limit), got {value!r}")
    return value
