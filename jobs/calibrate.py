"""Per-GPU calibration: ``python jobs/calibrate.py gpu=<key> measurements=<csv>`` -> tilecast-calibration-<gpu>."""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import gpu_from_cfg, user_errors, with_catalog_args
from tilecast.io import read_table
from tilecast.paths import resolve
from tilecast.registry.calibrate import calibrate_gpu
from tilecast.registry.tracking import configure

log = logging.getLogger("calibrate")


@hydra.main(version_base="1.3", config_path="../conf", config_name="calibrate")
@user_errors()
def main(cfg: DictConfig) -> None:
    uri = configure(cfg.mlflow.tracking_uri)
    log.info("tracking at %s", uri)
    path = resolve(cfg.measurements)
    saved = calibrate_gpu(gpu_from_cfg(cfg.gpu), read_table(path), alias=cfg.alias,
                          experiment=cfg.mlflow.experiment, config_yaml=OmegaConf.to_yaml(cfg, resolve=True),
                          source=str(path))
    for fam, fc in saved.families.items():
        print(f"{saved.label} {fam}: {fc.rows} rows, MAPE {fc.metrics['mape_before_pct']:.1f}% -> "
              f"{fc.metrics['mape_after_pct']:.1f}% (corrects {fc.base_model} v{fc.base_version})")


if __name__ == "__main__":
    with_catalog_args(main)()
