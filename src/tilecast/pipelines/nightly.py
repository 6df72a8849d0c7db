"""The nightly job: make sure a champion exists, score the nightly matrix with it, report, compare, log.

1. Every family the matrix's dtypes need (:func:`tilecast.scoring.predictors.families_for`: the fp32
   families, plus the tensor-core ones for other dtypes) needs ``tilecast-<family>@champion``; when some
   lack one, train those families (``@challenger``) and promote them
   (:func:`tilecast.training.promotion.promote`).
2. Score the matrix with the champions (pinned versions), write the report and the comparison with
   the previous run of the same matrix, all into one staging folder that replaces
   ``<output_dir>/<date>/`` atomically: a rerun on the same date never duplicates rows or leaves
   half a table.
3. Log the run to the MLflow experiment ``nightly``: parameters, timings and counts as metrics, the
   tables and the report as artifacts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow

from tilecast.pipelines.report import write_report_into
from tilecast.pipelines.score import ScoreRun, ScoreSettings, prepare, quiet_logs, score_into
from tilecast.progress import phase
from tilecast.reports.build import ReportSettings
from tilecast.reports.diff import RunDiff
from tilecast.reports.fleet import Fleet
from tilecast.scoring.matrix import load_matrix, matrix_dtypes, matrix_models
from tilecast.scoring.predictors import families_for
from tilecast.scoring.store import RunStore
from tilecast.tiles.ops import FAMILIES

log = logging.getLogger("tilecast.nightly")


@dataclass(frozen=True)
class NightlySettings:
    """Score settings (nightly matrix, registry champion), report settings, and how to bootstrap a champion."""

    score: ScoreSettings
    report: ReportSettings = field(default_factory=ReportSettings)
    fleet: Fleet | None = None
    experiment: str = "nightly"
    train: Mapping[str, Any] = field(default_factory=dict)  # TrainSpec fields (predictor, params, max_rows...)
    promote_policy: Mapping[str, Any] = field(default_factory=dict)  # PromotionPolicy fields


@dataclass(frozen=True)
class NightlyResult:
    run: ScoreRun
    report_md: Path
    report_html: Path
    diff: RunDiff | None
    fit: dict | None
    bootstrapped: tuple[str, ...]  # families trained and promoted because they had no champion
    mlflow_run_id: str


def missing_champions(families: tuple[str, ...] = FAMILIES) -> list[str]:
    """Families without ``@champion`` (no fallback to ``@challenger`` here)."""
    from tilecast.training.promotion import CHAMPION, alias_versions

    return [f for f, v in alias_versions(CHAMPION, families).items() if v is None]


def ensure_champion(settings: NightlySettings, config_yaml: str | None = None) -> tuple[str, ...]:
    """Train and promote the families the matrix needs that have no champion; return them (empty when all
    have one)."""
    matrix = load_matrix(settings.score.matrix)
    missing = missing_champions(families_for(matrix_dtypes(matrix), matrix_models(matrix)))
    if not missing:
        return ()
    from tilecast.training.promotion import PromotionPolicy, promote
    from tilecast.training.train import TrainSpec, default_workers, train

    log.warning("no @champion for %s: training and promoting them first", ", ".join(missing))
    spec = TrainSpec(**{"predictor": "xgboost", **dict(settings.train), "families": tuple(missing)})
    results = train(spec, config_yaml, workers=default_workers())  # the families' fits at once, one per core
    promote(missing, PromotionPolicy(**dict(settings.promote_policy)), config_yaml=config_yaml,
            trained={r.family: (r.version, r.predictor) for r in results})  # in memory: not loaded back
    return tuple(missing)


def check_bootstrap(train: Mapping[str, Any], promote: Mapping[str, Any]) -> None:
    """Validate the ``train`` / ``promote`` sections (used only when a champion is missing) before any work:
    a bad one must not surface after a night of scoring, nor be ignored."""
    from tilecast.cli import check_fields
    from tilecast.training.promotion import PromotionPolicy
    from tilecast.training.train import TrainSpec

    check_fields("train", TrainSpec, train)
    check_fields("promote", PromotionPolicy, promote)
    TrainSpec(**{"predictor": "xgboost", **dict(train), "families": FAMILIES})
    PromotionPolicy(**dict(promote))


def _metrics(run: ScoreRun, diff: RunDiff | None, fit: dict | None) -> dict[str, float]:
    stats = run.stats.as_dict()
    out = {k: float(v) for k, v in stats.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if diff is not None:
        out.update({f"diff_{k}": float(v) for k, v in diff.summary().items() if isinstance(v, (int, float))})
    if fit is not None:
        out.update({f"fit_{k}": float(v) for k, v in fit.items()})
    return out


def run_nightly(settings: NightlySettings, config_yaml: str | None = None) -> NightlyResult:
    """Bootstrap a champion if needed, score, report, compare, publish the date, log to MLflow."""
    from tilecast.registry.lineage import log_lineage
    from tilecast.registry.tracking import configure, ensure_experiment

    t0 = time.perf_counter()
    quiet_logs()
    configure(settings.score.tracking_uri)
    with phase("champions", "checking the registry") as ph:
        boot = ensure_champion(settings, config_yaml) if settings.score.predictor == "registry" else ()
        ph.done(f"trained and promoted {', '.join(boot)}" if boot else "every family has one")
    with phase("prepare", "matrix, prices and predictors") as ph:
        prep = prepare(settings.score)
        ph.done(f"{len(prep.cells):,} cells" + (f" and {len(prep.serve_cells):,} serve cells"
                                                if prep.serve_cells is not None else ""))
    store = RunStore(settings.score.output_dir)
    with mlflow.start_run(experiment_id=ensure_experiment(settings.experiment), run_name=f"nightly-{prep.date}") as mr:
        log_lineage(config_yaml, job="nightly", date=prep.date, matrix=prep.matrix.name)
        mlflow.log_params({"matrix": prep.matrix.name, "date": prep.date, "cells": len(prep.cells),
                           "predictor": prep.source.label, "pricing": prep.pricing.name,
                           "bootstrapped": ",".join(boot) or "none",
                           **{f"version.{f}": v for f, v in prep.source.versions.items()}})
        with store.stage(prep.date) as staging:
            run = score_into(prep, settings.score, staging)
            with phase("report", f"{run.stats.cells:,} cells") as ph:
                md, html, diff, fit = write_report_into(staging, store, prep.date, settings.report, settings.fleet)
                ph.done(f"{html.name} {html.stat().st_size / 2**20:.1f} MB")
        final = store.path(prep.date)
        with phase("mlflow", f"logging run {prep.date} to experiment {settings.experiment}"):
            mlflow.log_metrics({**_metrics(run, diff, fit), "nightly_total_s": time.perf_counter() - t0})
            mlflow.log_artifacts(str(final), artifact_path="run")
        run_id = mr.info.run_id
    log.info("nightly %s: %d cells, %d failed -> %s (MLflow run %s)", prep.date, run.stats.cells,
             run.stats.failed_cells, final, run_id)
    return NightlyResult(ScoreRun(final, run.table, run.stats, run.meta), final / md.name, final / html.name,
                         diff, fit, boot, run_id)


def settings_from_config(cfg: Mapping[str, Any]) -> NightlySettings:
    """:class:`NightlySettings` from a composed nightly config (a plain dict)."""
    from tilecast.pipelines.report import settings_from_config as report_settings
    from tilecast.pipelines.score import settings_from_config as score_settings

    report, fleet = report_settings({**(cfg.get("report") or {}), "fleet": cfg.get("fleet"), "plans": cfg.get("plans")})
    check_bootstrap(dict(cfg.get("train") or {}), dict(cfg.get("promote") or {}))
    return NightlySettings(score=score_settings(cfg), report=report, fleet=fleet,
                           experiment=str(cfg.get("experiment") or "nightly"), train=dict(cfg.get("train") or {}),
                           promote_policy=dict(cfg.get("promote") or {}))
