"""Forecast one workload: ``python jobs/predict.py model=<key> gpu=<key> batch=<n> seq_len=<n> mode=<mode>
[dtype=bf16] [parallel=dp4] [fused=true] [alias=champion] [output=<json>]`` (see conf/predict.yaml)."""

from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import gpu_from_cfg, int_setting, model_from_cfg, output_file, user_errors, with_catalog_args
from tilecast.errors import UserError
from tilecast.specs import all_gpus, all_models


@hydra.main(version_base="1.3", config_path="../conf", config_name="predict")
@user_errors()
def main(cfg: DictConfig) -> dict:
    """Check the settings first (exit 2 naming a bad one), then load the predictors (MLflow) and forecast; return
    the JSON record (a sweep's closing table reads it: tilecast.multirun)."""
    model, gpu = model_from_cfg(cfg.get("model")), gpu_from_cfg(cfg.get("gpu"))
    output_file(cfg.output)
    needed = ("isl", "osl") if cfg.mode == "serve" else ("batch", "seq_len")
    missing = [k for k in needed if OmegaConf.is_missing(cfg, k)]
    if missing:
        raise UserError(f"{' and '.join(f'{k}=<n>' for k in missing)} required")
    if model is None:
        raise UserError(f"model=<key> is required; known: {', '.join(sorted(all_models()))}")
    if gpu is None:
        raise UserError(f"gpu=<key|device name> is required; known: {', '.join(sorted(all_gpus()))}")
    for key in needed + (("tp", "concurrency", "pp") if cfg.mode == "serve" else ()):
        int_setting(cfg, key)
    from tilecast.registry.forecaster import predict_workload
    from tilecast.registry.tracking import configure
    from tilecast.scoring.matrix import n_gpus_of
    from tilecast.scoring.memory import memory_required_bytes
    from tilecast.scoring.metrics import FitPolicy, one_cell
    from tilecast.scoring.pricing import load_pricing

    if cfg.forecaster == "registry":
        configure(cfg.mlflow.tracking_uri)
    if cfg.mode == "serve":
        return serve(cfg, model, gpu)
    batch, seq_len = int_setting(cfg, "batch"), int_setting(cfg, "seq_len")
    fc, record = predict_workload(model, gpu, batch, seq_len, str(cfg.mode), cfg.parallel, bool(cfg.fused),
                                  str(cfg.forecaster), str(cfg.alias), bool(cfg.calibrate), dtype=str(cfg.dtype),
                                  interval_level=cfg.get("interval_level"))
    print(fc.describe())
    print(f"  {100 * record['interval_level']:.0f}% interval {record['pred_lo_ms']:.3f} - {record['pred_hi_ms']:.3f} ms"
          f" ({record['interval_note']})")
    mem = memory_required_bytes(model, fc.batch, fc.seq_len, fc.mode, fc.parallel, optimizer=cfg.optimizer,
                                dtype=fc.dtype)
    economics = one_cell(fc, gpu, load_pricing(cfg.pricing), FitPolicy(optimizer=cfg.optimizer), mem,
                         n_gpus_of(fc.parallel or "none"))
    note = economics.pop("price_note")
    record.update(economics)
    if note:
        record["notes"].append(note)
    mem = (f"  memory per GPU {economics['mem_required_gib']:.2f} GiB of {economics['mem_capacity_gib']:.2f}")
    if not economics["fits"]:  # it cannot run: no throughput and no cost
        print(f"{mem} (DOES NOT FIT): no throughput or cost on {economics['n_gpus']} GPU(s)")
    else:
        print(f"{mem} (fits)   {economics['tokens_per_s']:.0f} tokens/s on {economics['n_gpus']} GPU(s)")
        print(f"  cost {economics['cost_per_step_usd']:.6f} USD per step, "
              f"{economics['cost_per_1m_tokens_usd']:.3f} USD per 1M tokens "
              f"({economics['usd_per_gpu_hour']:.2f} USD per GPU-hour, {_price_basis(economics)})")
    return _finish(cfg, record)


def _price_basis(record: dict) -> str:
    return "an estimated price, see the note" if record.get("price_estimate") else "a list price, conf/pricing"


def serve(cfg: DictConfig, model, gpu) -> dict:
    """``mode=serve``: TTFT, TPOT, tokens/s, memory and cost of one serving configuration."""
    from tilecast.forecast.serve import ServeWorkload
    from tilecast.registry.forecaster import predict_serve
    from tilecast.scoring.pricing import load_pricing

    tp, isl, osl, concurrency, pp = (int_setting(cfg, k) for k in ("tp", "isl", "osl", "concurrency", "pp"))
    sw = ServeWorkload(model, str(cfg.dtype), tp, isl, osl, concurrency, pp)
    fc, record = predict_serve(sw, gpu, str(cfg.forecaster), str(cfg.alias), bool(cfg.calibrate),
                               load_pricing(cfg.pricing), interval_level=cfg.get("interval_level"))
    print(fc.describe())
    if record["usd_per_1m_output_tokens"] is None:
        print("  no cost: this configuration does not fit in memory")
    else:
        print(f"  cost {record['usd_per_1m_output_tokens']:.3f} USD per 1M output tokens "
              f"({record['usd_per_gpu_hour']:.2f} USD per GPU-hour, {_price_basis(record)})")
    return _finish(cfg, record)


def _finish(cfg: DictConfig, record: dict) -> dict:
    if record["versions"]:
        print("  models: " + ", ".join(f"{f} v{v}" for f, v in record["versions"].items()))
    for note in record["notes"]:
        print(f"  note: {note}")
    if cfg.output:
        from tilecast.io import write_atomic

        out = write_atomic(output_file(cfg.output), lambda p: p.write_text(json.dumps(record, indent=2) + "\n"))
        print(f"wrote {out}")
    return record


if __name__ == "__main__":
    with_catalog_args(main, what_if=("gpu", "model"))()
