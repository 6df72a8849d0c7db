"""Per-GPU calibration: ``python jobs/calibrate.py gpu=<key> measurements=<csv>`` -> tilecast-calibration-<gpu>;
``python jobs/calibrate.py gpu=<key> rollback=true`` restores the previous one (see conf/calibrate.yaml)."""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import gpu_from_cfg, user_errors, with_catalog_args
from tilecast.errors import UserError
from tilecast.paths import resolve

log = logging.getLogger("calibrate")


@hydra.main(version_base="1.3", config_path="../conf", config_name="calibrate")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Check the settings first (exit 2 naming a bad one), then open the store (MLflow) and calibrate."""
    gpu = gpu_from_cfg(cfg.gpu)
    if not cfg.rollback and not cfg.measurements:
        raise UserError("measurements=<csv|parquet> is required (or rollback=true to restore the previous "
                         "calibration)")
    from tilecast.io import read_table
    from tilecast.registry.calibrate import CalibrationGate, calibrate_gpu
    from tilecast.registry.calibrations import rollback_calibration
    from tilecast.registry.tracking import configure

    gate = CalibrationGate(**OmegaConf.to_container(cfg.gate, resolve=True))
    uri = configure(cfg.mlflow.tracking_uri, timeout_s=cfg.mlflow.get("connect_timeout_s"))
    log.info("tracking at %s", uri)
    if cfg.rollback:
        move = rollback_calibration(gpu.key, experiment=cfg.mlflow.experiment)
        now = "no calibration applies on it now" if move.to_version is None else f"v{move.to_version} applies now"
        print(f"{move.model}@{move.alias}: {move.describe()}: rolled back, {now}")
        return
    path = resolve(cfg.measurements)
    runs, runs_path = None, ""
    if cfg.model_runs:
        from tilecast.evaluation.labels import read_label_dir, skipped_lines

        runs_path = str(resolve(cfg.model_runs))
        labels = read_label_dir(runs_path)
        for line in skipped_lines(labels.skipped):
            log.warning("%s", line)
        runs = labels.labels
    saved = calibrate_gpu(gpu, read_table(path), alias=cfg.alias, experiment=cfg.mlflow.experiment,
                          config_yaml=OmegaConf.to_yaml(cfg, resolve=True), source=str(path), gate=gate,
                          model_runs=runs, runs_source=runs_path)
    for fam, fc in saved.families.items():
        m = fc.metrics
        print(f"{saved.label} {fam}: {fc.rows} rows ({m['distinct_rows']:.0f} shapes), MAPE "
              f"{m['mape_before_pct']:.1f}% -> {m['mape_after_pct']:.1f}% in-sample, "
              f"{m['mape_loo_pct']:.1f}% leave-one-out (corrects {fc.base_model} v{fc.base_version})")


if __name__ == "__main__":
    with_catalog_args(main)()
