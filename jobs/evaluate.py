"""Accuracy on measured labels: ``python jobs/evaluate.py [labels_dir=<dir>] [alias=champion] [output=<csv>]``,
serving runs (``serving=<csv>``) or training runs (``training_runs=<csv>``); see conf/evaluate.yaml."""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import output_file, user_errors, with_catalog_args
from tilecast.errors import UserError
from tilecast.paths import resolve

log = logging.getLogger("evaluate")


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Check the settings first (exit 2 naming a bad one), then open the store (MLflow) and evaluate."""
    output_file(cfg.output)
    from tilecast.io import write_table
    from tilecast.pipelines.evaluate import EvaluationSettings, evaluate, log_evaluation, report_lines
    from tilecast.registry.tracking import configure

    settings = EvaluationSettings(labels_dir=cfg.labels_dir, forecaster=cfg.forecaster, alias=cfg.alias,
                                  calibrate=cfg.calibrate, calibration_rows=cfg.calibration_rows, seed=cfg.seed,
                                  perop=cfg.perop, unseen_gpus=tuple(cfg.unseen_gpus),
                                  experiment=cfg.mlflow.experiment, interval_level=cfg.get("interval_level"),
                                  calibration_margin_pct=cfg.calibration_margin_pct)
    uri = configure(cfg.mlflow.tracking_uri)
    if cfg.serving and cfg.get("training_runs"):
        raise UserError("give serving=<csv> or training_runs=<csv>, not both")
    if cfg.serving:
        return serving(cfg, uri)
    if cfg.get("training_runs"):
        return training_runs(cfg, uri)
    result = evaluate(settings)
    out = output_file(cfg.output) or Path(HydraConfig.get().runtime.output_dir) / "evaluation.csv"
    write_table(result.table, out)
    run_id = log_evaluation(result, settings, OmegaConf.to_yaml(cfg, resolve=True))
    print("\n".join(report_lines(result)))
    versions = ", ".join(f"{f} v{v}" for f, v in result.versions.items()) or settings.forecaster
    print(f"{len(result.table)} labels ({len(result.labels.skipped)} skipped) with {versions} -> {out}; "
          f"MLflow run {run_id} at {uri}")


def serving(cfg: DictConfig, uri: str) -> None:
    """``serving=<csv|parquet>``: forecast every row (GPU from ``system``, model from ``model_path``)."""
    from tilecast.evaluation.serving import evaluate_serving, serving_summary
    from tilecast.forecast.serve import SERVE_DTYPES
    from tilecast.io import read_table, write_table
    from tilecast.pipelines.evaluate import log_serving_evaluation
    from tilecast.registry.forecaster import predictor_source

    rows = read_table(resolve(cfg.serving))
    predict, versions = predictor_source(str(cfg.forecaster), str(cfg.alias), bool(cfg.calibrate),
                                         dtypes=SERVE_DTYPES, models=rows["model_path"].dropna().unique()
                                         if "model_path" in rows else ())
    table = evaluate_serving(rows, predict)
    out = output_file(cfg.output) or Path(HydraConfig.get().runtime.output_dir) / "serving.csv"
    write_table(table, out)
    run_id = log_serving_evaluation(table, versions, cfg.mlflow.experiment, OmegaConf.to_yaml(cfg, resolve=True))
    errors = table["error"].fillna("")
    for reason, n in errors[errors != ""].value_counts().items():
        print(f"{n} rows not forecast: {reason}")
    if "ape_ttft_pct" in table:
        print(serving_summary(table).to_string(index=False))
    print(f"{int((errors == '').sum())} of {len(table)} rows forecast -> {out}; MLflow run {run_id} at {uri}")


def training_runs(cfg: DictConfig, uri: str) -> None:
    """``training_runs=<csv|parquet>``: forecast every run (GPU from ``GPU`` / ``section``, model from ``Model``)."""
    from tilecast.evaluation.training_runs import evaluate_training_runs, training_summary
    from tilecast.io import read_table, write_table
    from tilecast.pipelines.evaluate import log_training_evaluation
    from tilecast.registry.forecaster import predictor_source

    rows = read_table(resolve(cfg.training_runs))
    out = output_file(cfg.output) or Path(HydraConfig.get().runtime.output_dir) / "training_runs.csv"
    predict, versions = predictor_source(str(cfg.forecaster), str(cfg.alias), bool(cfg.calibrate))
    table = evaluate_training_runs(rows, predict)
    write_table(table, out)
    run_id = log_training_evaluation(table, versions, cfg.mlflow.experiment, OmegaConf.to_yaml(cfg, resolve=True))
    errors = table["error"].fillna("")
    for reason, n in errors[errors != ""].value_counts().items():
        print(f"{n} rows not forecast: {reason}")
    if "ape_tokens_per_s_per_gpu_pct" in table:
        print(training_summary(table).to_string(index=False))
    print(f"{int((errors == '').sum())} of {len(table)} training runs forecast -> {out}; MLflow run {run_id} at {uri}")


if __name__ == "__main__":
    with_catalog_args(main)()
