"""Kernel forecasts: ``python jobs/predict_kernels.py input=<csv|parquet> output=<csv> [gpu=<key>] [alias=champion]``.

Default: the registered ``tilecast-<family>@<alias>`` models (and a stored calibration of each row's GPU);
``predictor=roofline`` needs no registry. No training happens here.
"""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig

from tilecast.cli import gpu_from_cfg, output_file, user_errors, with_catalog_args
from tilecast.errors import UserError
from tilecast.paths import resolve

log = logging.getLogger("predict_kernels")


@hydra.main(version_base="1.3", config_path="../conf", config_name="predict_kernels")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Check the settings and read the rows first (exit 2 naming a bad one), then forecast."""
    output = output_file(cfg.output, from_root=False)
    gpu = gpu_from_cfg(cfg.get("gpu"))  # the gpu group is absent unless gpu= is given
    from tilecast.forecast.kernels import forecast_kernels
    from tilecast.io import read_table, write_table
    from tilecast.metrics import mape_table
    from tilecast.tiles.roofline import roofline_ms

    rows = read_table(resolve(cfg.input))
    if cfg.predictor.name == "roofline":
        result = forecast_kernels(rows, lambda fam, r, g: roofline_ms(r, g), gpu)
    elif cfg.predictor.name == "registry":
        from tilecast.registry import configure, forecast_from_registry  # MLflow only here

        log.info("tracking at %s", configure(cfg.mlflow.tracking_uri))
        result = forecast_from_registry(rows, alias=cfg.alias, gpu=gpu, calibrate=cfg.calibrate)
        for fam, model in result.models.items():
            log.info("%s: %s", fam, model)
        for note in result.notes:
            log.warning(note)
        for key, label in result.calibrations.items():
            log.info("calibration %s applied to the %s rows (column 'calibration')", label, key)
    else:
        raise UserError(f"unknown predictor {cfg.predictor.name!r} for forecasts; known: registry (default, "
                         f"trained with `python jobs/train.py predictor=...`), roofline")
    for op, n in result.unknown_ops.items():
        log.warning("%d rows of op %r: no predictor covers it; pred_ms left empty", n, op)
    out = write_table(result.table, output)
    log.info("wrote %d rows to %s", len(result.table), out)
    if "Latency" in result.table and "Device" in result.table:
        print(mape_table(result.table, "Device").to_string())


if __name__ == "__main__":
    with_catalog_args(main, what_if=("gpu",))()
