"""The evaluate job's work: labels -> forecasts (spec-only and calibrated) -> tables -> an MLflow run.

The run is tagged with the model version of every family it used, logs the per-label table, the
mean / max APE per device x mode x variant (metrics and a table), the headline means, and, where
per-node labels exist, the paper's per-op-category error.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import mlflow
import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.evaluation.calibration import RUN_MARGIN_PCT, calibrated_for, check_against_runs, disagreement_lines
from tilecast.evaluation.labels import LabelSet, read_label_dir, shipped_labels, skipped_lines
from tilecast.evaluation.paper import with_paper
from tilecast.evaluation.perop import perop_errors, perop_summary
from tilecast.evaluation.serving import serving_summary
from tilecast.evaluation.suite import ape_summary, forecast_labels, headline
from tilecast.forecast.intervals import check_level
from tilecast.paths import resolve
from tilecast.predictors import KernelPredictor
from tilecast.predictors.rows import UNSEEN_GPUS
from tilecast.predictors.sources import resolve_predictors
from tilecast.registry.forecaster import as_family_predictor
from tilecast.registry.lineage import log_lineage
from tilecast.registry.tracking import ensure_experiment
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FP32_FAMILIES

log = logging.getLogger("tilecast.evaluate")


@dataclass(frozen=True)
class EvaluationSettings:
    """What to evaluate and how (see conf/evaluate.yaml)."""

    labels_dir: str | None = None
    forecaster: str = "registry"
    alias: str = "champion"
    calibrate: bool = True
    calibration_rows: int = 20
    seed: int = 0
    perop: bool = True
    unseen_gpus: tuple[str, ...] = UNSEEN_GPUS
    experiment: str = "tilecast-evaluate"
    interval_level: float | None = None  # pred_lo_ms / pred_hi_ms level; None: intervals.DEFAULT_LEVEL
    calibration_margin_pct: float = RUN_MARGIN_PCT  # points a calibration must win by on the GPU's other models

    def __post_init__(self) -> None:
        m = self.calibration_margin_pct
        if isinstance(m, bool) or not isinstance(m, int | float) or not np.isfinite(m) or m < 0:
            raise UserError(f"calibration_margin_pct must be a number of points >= 0, got {m!r}")


@dataclass
class EvaluationResult:
    """Everything an evaluation produced."""

    table: pd.DataFrame
    summary: pd.DataFrame
    headline: dict[str, float]
    labels: LabelSet
    versions: dict[str, str]
    perop: pd.DataFrame | None = None
    perop_summary: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    calibration_check: pd.DataFrame | None = None  # per GPU: does calibrating to its kernels help its model runs?
    run_id: str = ""


def load_labels(labels_dir: str | None) -> LabelSet:
    """A label directory (resolved like every user path), or the labels shipped in ``data/``."""
    labels = read_label_dir(resolve(labels_dir)) if labels_dir else shipped_labels()
    for line in skipped_lines(labels.skipped):  # one line per reason, not per file
        log.warning("%s", line)
    return labels


def load_predictors(forecaster: str, alias: str) -> tuple[dict[str, KernelPredictor], dict[str, str], list[str]]:
    """One predictor per fp32 family (the labels are fp32), spec only (stored calibrations are not applied here):
    :func:`tilecast.predictors.sources.resolve_predictors`; the versions used and notes for people."""
    resolved = resolve_predictors(forecaster, alias, FP32_FAMILIES, calibrate=False)
    return resolved.predictors, resolved.versions, list(resolved.notes)


def evaluate(settings: EvaluationSettings) -> EvaluationResult:
    """Forecast every label spec-only and calibrated; summarise; per-op error where node labels exist.
    A label folder of which no file could be read, or an unknown unseen GPU, is an error naming why."""
    for key in settings.unseen_gpus:
        get_gpu(key)  # unknown -> UnknownSpecError listing the catalog
    level = check_level(settings.interval_level)
    labels = load_labels(settings.labels_dir)
    if labels.labels.empty:
        reasons = "; ".join(skipped_lines(labels.skipped)[:3]) if labels.skipped else "no label files"
        raise UserError(f"no label could be read from {labels.source}: {reasons}")
    predictors, versions, notes = load_predictors(settings.forecaster, settings.alias)
    calibrated = calibrated_for(predictors, settings.calibration_rows, settings.seed) if settings.calibrate else None
    table = forecast_labels(labels.labels, as_family_predictor(predictors), calibrated, interval_level=level)
    check = None
    if calibrated is not None:
        table, check = check_against_runs(table, settings.calibration_margin_pct)
        for line in disagreement_lines(check):
            log.warning("%s", line)
            notes.append(line)
    table = with_paper(table)
    result = EvaluationResult(table, ape_summary(table), headline(table, settings.unseen_gpus), labels, versions,
                              notes=notes, calibration_check=check)
    if settings.perop and labels.nodes is not None and len(labels.nodes):
        result.perop = perop_errors(as_family_predictor(predictors), labels.nodes)
        result.perop_summary = perop_summary(result.perop, settings.unseen_gpus)
    return result


def _metric_key(*parts: object) -> str:
    """An MLflow metric name: dot-separated parts, each reduced to letters, digits, ``_`` and ``-``."""
    pieces = [q for p in parts for q in str(p).split(".")]
    return ".".join(re.sub(r"[^0-9A-Za-z_\-]+", "_", q) for q in pieces)


def log_evaluation(result: EvaluationResult, settings: EvaluationSettings, config_yaml: str | None = None) -> str:
    """One MLflow run: versions as tags, the tables as artifacts, APE means / maxima as metrics."""
    with mlflow.start_run(experiment_id=ensure_experiment(settings.experiment), run_name="evaluate") as run:
        log_lineage(config_yaml, job="evaluate", forecaster=settings.forecaster, alias=settings.alias)
        mlflow.set_tags({f"tilecast.version.{f}": v for f, v in result.versions.items()})
        mlflow.log_params({"labels_source": result.labels.source, "labels": len(result.table),
                           "skipped": len(result.labels.skipped), "calibrate": settings.calibrate,
                           "calibration_rows": settings.calibration_rows, "seed": settings.seed,
                           "calibration_margin_pct": settings.calibration_margin_pct})
        metrics = {_metric_key(k): v for k, v in result.headline.items() if np.isfinite(v)}
        for row in result.summary.itertuples(index=False):
            for stat in ("mean_ape_pct", "max_ape_pct", "mean_ape_cal_pct", "max_ape_cal_pct"):
                value = getattr(row, stat)
                if np.isfinite(value):
                    metrics[_metric_key(stat, row.device, row.mode, row.variant)] = float(value)
        if result.perop_summary is not None:
            for row in result.perop_summary.itertuples(index=False):
                metrics[_metric_key("perop_mape_pct", row.distribution, row.family)] = float(row.mape_pct)
        mlflow.log_metrics(metrics)
        mlflow.log_table(result.table, "evaluation/labels.json")
        mlflow.log_table(result.summary, "evaluation/summary.json")
        if result.perop is not None:
            mlflow.log_table(result.perop, "evaluation/perop.json")
            mlflow.log_table(result.perop_summary, "evaluation/perop_summary.json")
        if result.calibration_check is not None and len(result.calibration_check):
            mlflow.log_table(result.calibration_check, "evaluation/calibration_check.json")
            mlflow.log_metrics({_metric_key("calibration_disagrees", r.gpu): float(r.disagrees)
                                for r in result.calibration_check.itertuples(index=False)})
        if result.labels.skipped:
            mlflow.log_text("\n".join(f"{p}: {r}" for p, r in result.labels.skipped), "evaluation/skipped.txt")
        result.run_id = run.info.run_id
    return result.run_id


def report_lines(result: EvaluationResult) -> list[str]:
    """What the job prints: labels without a forecast (one line per reason), the summary table, headline means,
    per-op error. Skipped files are logged when read (:func:`load_labels`), one line per reason."""
    failed = result.table[result.table["error"] != ""]
    by_error: dict[str, list[str]] = {}
    for r in failed.itertuples(index=False):
        by_error.setdefault(str(r.error), []).append(f"{r.device}/{r.tag}")
    lines = [f"no forecast for {len(cells)} label{'s' if len(cells) > 1 else ''} ({', '.join(cells[:3])}"
             f"{f', ... and {len(cells) - 3} more' if len(cells) > 3 else ''}): {error}"
             for error, cells in by_error.items()]
    lines.append(result.summary.to_string(index=False))
    h = result.headline
    for cell in ("inference", "training", "fused", "multi_gpu", "unseen_gpus", "seen_gpus"):
        if f"{cell}.mean_ape_pct" in h:
            lines.append(f"{cell:<12} mean APE {h[f'{cell}.mean_ape_pct']:6.2f}% spec-only, "
                         f"{h[f'{cell}.mean_ape_cal_pct']:6.2f}% calibrated")
    lines += result.notes
    if result.perop_summary is not None:
        lines.append("per-op category MAPE (in = training GPUs, out = unseen GPUs):")
        lines.append(result.perop_summary.to_string(index=False))
    return lines


def log_training_evaluation(table: pd.DataFrame, versions: dict[str, str], experiment: str,
                            config_yaml: str | None = None) -> str:
    """One MLflow run: the training-run table, tokens/s per GPU and MFU APE per GPU (and overall), the versions."""
    from tilecast.evaluation.training_runs import training_summary

    with mlflow.start_run(experiment_id=ensure_experiment(experiment), run_name="evaluate-training-runs") as run:
        log_lineage(config_yaml, job="evaluate", kind="training_runs")
        mlflow.set_tags({f"tilecast.version.{f}": str(v) for f, v in versions.items()})
        answered = int((table["error"].fillna("") == "").sum())
        mlflow.log_params({"rows": len(table), "answered": answered})
        metrics = {}
        for row in training_summary(table).itertuples(index=False):
            key = _metric_key(row.gpu_key)
            metrics[f"tokens_mape_pct.{key}"] = row.tokens_mape_pct
            metrics[f"tokens_worst_ape_pct.{key}"] = row.tokens_worst_ape_pct
            metrics[f"mfu_mape_pct.{key}"] = row.mfu_mape_pct
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if np.isfinite(v)})
        mlflow.log_table(table.astype({c: str for c in table.columns if table[c].dtype == object}),
                         "evaluation/training_runs.json")
        return run.info.run_id


def log_serving_evaluation(table: pd.DataFrame, versions: dict[str, str], experiment: str,
                           config_yaml: str | None = None) -> str:
    """One MLflow run: the forecast table, TTFT / TPOT MAPE per system and backend, the versions used."""
    with mlflow.start_run(experiment_id=ensure_experiment(experiment), run_name="evaluate-serving") as run:
        log_lineage(config_yaml, job="evaluate", kind="serving")
        mlflow.set_tags({f"tilecast.version.{f}": str(v) for f, v in versions.items()})
        answered = int((table["error"].fillna("") == "").sum())
        mlflow.log_params({"rows": len(table), "answered": answered})
        metrics = {}
        for col in ("system", "backend"):
            if col not in table or "ape_ttft_pct" not in table:
                continue
            for row in serving_summary(table, col).itertuples(index=False):
                key = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in str(getattr(row, col)))
                metrics[f"ttft_mape_pct.{col}.{key}"] = row.ttft_mape_pct
                metrics[f"tpot_mape_pct.{col}.{key}"] = row.tpot_mape_pct
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if np.isfinite(v)})
        mlflow.log_table(table.astype({c: str for c in table.columns if table[c].dtype == object}),
                         "evaluation/serving.json")
        return run.info.run_id

