"""Forecast one workload: ``python jobs/predict.py model=<key> gpu=<key> batch=<n> seq_len=<n> mode=<mode>
[dtype=bf16] [parallel=dp4] [fused=true] [alias=champion] [output=<json>]``, a serving configuration
(``mode=serve``) or a training run at scale (``mode=train_run n_gpus=... micro_batch=... global_batch=...
sharding=... activation_checkpointing=...``); see conf/predict.yaml."""

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
    needed = {"serve": ("isl", "osl"), "train_run": ("seq_len",)}.get(str(cfg.mode), ("batch", "seq_len"))
    missing = [k for k in needed if OmegaConf.is_missing(cfg, k)]
    if missing:
        raise UserError(f"{' and '.join(f'{k}=<n>' for k in missing)} required")
    if model is None:
        raise UserError(f"model=<key> is required; known: {', '.join(sorted(all_models()))}")
    if gpu is None:
        raise UserError(f"gpu=<key|device name> is required; known: {', '.join(sorted(all_gpus()))}")
    for key in needed + (("tp", "concurrency", "pp") if cfg.mode == "serve" else ()):
        int_setting(cfg, key)
    run = train_run_spec(cfg, model) if cfg.mode == "train_run" else None  # a bad run fails before the imports
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
    if run is not None:
        return train_run(cfg, run, gpu)
    batch, seq_len = int_setting(cfg, "batch"), int_setting(cfg, "seq_len")
    fc, record = predict_workload(model, gpu, batch, seq_len, str(cfg.mode), cfg.parallel, bool(cfg.fused),
                                  str(cfg.forecaster), str(cfg.alias), bool(cfg.calibrate), dtype=_dtype(cfg),
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
    from tilecast.serving.policy import policy_of
    from tilecast.specs.layout import parse_layout

    tp, isl, osl, concurrency, pp = (int_setting(cfg, k) for k in ("tp", "isl", "osl", "concurrency", "pp"))
    sw = ServeWorkload(model, _dtype(cfg, model), tp, isl, osl, concurrency, pp, parse_layout(cfg.get("layout")))
    policy = policy_of(OmegaConf.to_container(cfg.engine, resolve=True))
    fc, record = predict_serve(sw, gpu, str(cfg.forecaster), str(cfg.alias), bool(cfg.calibrate),
                               load_pricing(cfg.pricing), interval_level=cfg.get("interval_level"),
                               engine=policy.engine, engine_version=cfg.get("engine_version"), policy=policy)
    print(fc.describe())
    if record["usd_per_1m_output_tokens"] is None:
        print("  no cost: this configuration does not fit in memory")
    else:
        print(f"  cost {record['usd_per_1m_output_tokens']:.3f} USD per 1M output tokens "
              f"({record['usd_per_gpu_hour']:.2f} USD per GPU-hour, {_price_basis(record)})")
    return _finish(cfg, record)


def _dtype(cfg: DictConfig, model=None) -> str:
    """The workload dtype: as given, else fp32 (amp_bf16 for a training run; a served model's checkpoint dtype:
    its quantised variant's, else bf16)."""
    if cfg.get("dtype") is not None:
        return str(cfg.dtype)
    if cfg.mode == "serve" and model is not None:
        return model.default_dtype
    return "amp_bf16" if cfg.mode == "train_run" else "fp32"


def _optional_int(cfg: DictConfig, key: str) -> int | None:
    return None if cfg.get(key) is None else int_setting(cfg, key)


def train_run_spec(cfg: DictConfig, model):
    """The :class:`~tilecast.specs.train_run.TrainRun` of ``mode=train_run``'s settings (named errors: exit 2)."""
    from tilecast.specs.train_run import TrainRun

    if cfg.get("micro_batch") is None:
        raise UserError("micro_batch=<n> required (sequences per micro-batch per data-parallel rank)")
    tokens = cfg.get("train_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int | float) or tokens <= 0):
        raise UserError(f"train_tokens must be a positive number of tokens (e.g. 1e12), got {tokens!r}")
    optimizer = cfg.get("optimizer") or "adamw"
    return TrainRun(model, int_setting(cfg, "seq_len"), int_setting(cfg, "micro_batch"), int_setting(cfg, "n_gpus"),
                    grad_accum=_optional_int(cfg, "grad_accum"), global_batch=_optional_int(cfg, "global_batch"),
                    gpus_per_node=int_setting(cfg, "gpus_per_node"), dtype=_dtype(cfg), sharding=cfg.sharding,
                    tp=int_setting(cfg, "tp"), pp=int_setting(cfg, "pp"), cp=int_setting(cfg, "cp"),
                    pp_schedule=str(cfg.pp_schedule), activation_checkpointing=cfg.activation_checkpointing,
                    optimizer=str(optimizer), lora_rank=int(cfg.lora_rank), lora_base_dtype=str(cfg.lora_base_dtype),
                    grad_reduce_dtype=str(cfg.grad_reduce_dtype), network=cfg.get("network"))


def train_run(cfg: DictConfig, run, gpu) -> dict:
    """``mode=train_run``: a training run at scale (step, tokens/s per GPU, MFU, memory and fit, collectives, cost)."""
    from tilecast.forecast.train_run import forecast_train_run
    from tilecast.registry.forecaster import predictor_source
    from tilecast.scoring.pricing import load_pricing

    tokens = cfg.get("train_tokens")
    pricing = load_pricing(cfg.pricing)
    price = {gpu.key.split("+", 1)[0]: pricing.usd_per_gpu_hour(gpu.key.split("+", 1)[0])}
    predict, versions = predictor_source(str(cfg.forecaster), str(cfg.alias), bool(cfg.calibrate))
    fc = forecast_train_run(run, gpu, predict, pricing=price)
    print(fc.describe(tokens))
    record = {**fc.to_dict(tokens), "forecaster": str(cfg.forecaster),
              "alias": str(cfg.alias) if cfg.forecaster == "registry" else None,
              "versions": {f: str(v) for f, v in versions.items()},
              "notes": [*fc.notes, *getattr(predict, "notes", [])]}
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
