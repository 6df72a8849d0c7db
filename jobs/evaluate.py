"""Accuracy on measured labels: ``python jobs/evaluate.py [labels_dir=<dir>] [alias=champion] [output=<csv>]``
(see conf/evaluate.yaml)."""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import user_errors
from tilecast.evaluation.run import EvaluationSettings, evaluate, log_evaluation, report_lines
from tilecast.io import write_table
from tilecast.paths import resolve
from tilecast.registry.tracking import configure

log = logging.getLogger("evaluate")


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
@user_errors()
def main(cfg: DictConfig) -> None:
    uri = configure(cfg.mlflow.tracking_uri)
    settings = EvaluationSettings(labels_dir=cfg.labels_dir, forecaster=cfg.forecaster, alias=cfg.alias,
                                  calibrate=cfg.calibrate, calibration_rows=cfg.calibration_rows, seed=cfg.seed,
                                  perop=cfg.perop, unseen_gpus=tuple(cfg.unseen_gpus),
                                  experiment=cfg.mlflow.experiment)
    result = evaluate(settings)
    out = resolve(cfg.output) if cfg.output else Path(HydraConfig.get().runtime.output_dir) / "evaluation.csv"
    write_table(result.table, out)
    run_id = log_evaluation(result, settings, OmegaConf.to_yaml(cfg, resolve=True))
    print("\n".join(report_lines(result)))
    versions = ", ".join(f"{f} v{v}" for f, v in result.versions.items()) or settings.forecaster
    print(f"{len(result.table)} labels ({len(result.labels.skipped)} skipped) with {versions} -> {out}; "
          f"MLflow run {run_id} at {uri}")


if __name__ == "__main__":
    main()
