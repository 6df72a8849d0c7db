"""Kernel forecasts: ``python jobs/predict_kernels.py predictor=roofline input=<csv|parquet> output=<csv>``."""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig

from tilecast.cli import gpu_from_cfg, with_catalog_args
from tilecast.forecast.kernels import forecast_kernels
from tilecast.io import read_table, write_table
from tilecast.metrics import mape_table
from tilecast.paths import resolve
from tilecast.tiles.roofline import roofline_ms

log = logging.getLogger("predict_kernels")


@hydra.main(version_base="1.3", config_path="../conf", config_name="predict_kernels")
def main(cfg: DictConfig) -> None:
    rows = read_table(resolve(cfg.input))
    gpu = gpu_from_cfg(cfg.gpu)
    if cfg.predictor.name != "roofline":
        raise ValueError(f"unknown predictor {cfg.predictor.name!r}; known: roofline")
    result = forecast_kernels(rows, lambda fam, r, g: roofline_ms(r, g), gpu)
    for op, n in result.unknown_ops.items():
        log.warning("%d rows of op %r: no predictor covers it; pred_ms left empty", n, op)
    out = write_table(result.table, cfg.output)
    log.info("wrote %d rows to %s", len(result.table), out)
    if "Latency" in result.table and "Device" in result.table:
        print(mape_table(result.table, "Device").to_string())


if __name__ == "__main__":
    with_catalog_args(main)()
