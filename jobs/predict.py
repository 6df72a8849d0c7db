"""Forecast one workload: ``python jobs/predict.py model=<key> gpu=<key> batch=<n> seq_len=<n> mode=<mode>
[parallel=dp4] [fused=true] [alias=champion] [output=<json>]`` (see conf/predict.yaml)."""

from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import gpu_from_cfg, model_from_cfg, user_errors, with_catalog_args
from tilecast.io import write_atomic
from tilecast.paths import resolve
from tilecast.registry.forecaster import predict_workload
from tilecast.registry.tracking import configure
from tilecast.specs import all_gpus, all_models


@hydra.main(version_base="1.3", config_path="../conf", config_name="predict")
@user_errors()
def main(cfg: DictConfig) -> None:
    model, gpu = model_from_cfg(cfg.get("model")), gpu_from_cfg(cfg.get("gpu"))
    missing = [k for k in ("batch", "seq_len") if OmegaConf.is_missing(cfg, k)]
    if missing:
        raise ValueError(f"{' and '.join(f'{k}=<n>' for k in missing)} required")
    if model is None:
        raise ValueError(f"model=<key> is required; known: {', '.join(sorted(all_models()))}")
    if gpu is None:
        raise ValueError(f"gpu=<key|device name> is required; known: {', '.join(sorted(all_gpus()))}")
    if cfg.forecaster == "registry":
        configure(cfg.mlflow.tracking_uri)
    fc, record = predict_workload(model, gpu, int(cfg.batch), int(cfg.seq_len), str(cfg.mode), cfg.parallel,
                                  bool(cfg.fused), str(cfg.forecaster), str(cfg.alias), bool(cfg.calibrate))
    print(fc.describe())
    if record["versions"]:
        print("  models: " + ", ".join(f"{f} v{v}" for f, v in record["versions"].items()))
    for note in record["notes"]:
        print(f"  note: {note}")
    if cfg.output:
        out = write_atomic(resolve(cfg.output), lambda p: p.write_text(json.dumps(record, indent=2) + "\n"))
        print(f"wrote {out}")


if __name__ == "__main__":
    with_catalog_args(main)()
