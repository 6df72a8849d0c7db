"""Plan a deployment: the cheapest fleet meeting a service level (``model=... isl=... osl=... ttft_ms=...
tpot_ms=... rate=...``) or the cheapest training run meeting a deadline (``model=... tokens=... days=...``);
see conf/plan.yaml.

The planning modules are imported inside ``main``: Dask's spawned worker processes re-import this file."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import model_from_cfg, output_file, user_errors, with_catalog_args
from tilecast.errors import UserError
from tilecast.specs import all_models


def question_of(cfg: DictConfig, model):
    """The question the settings ask (training when ``tokens`` is given, serving otherwise)."""
    from tilecast.planning.questions import question_from

    plain = OmegaConf.to_container(cfg, resolve=True)
    if plain.get("tokens") is not None:
        keys = ("tokens", "days", "budget_usd", "gpus", "dtype", "seq_len", "global_batch", "max_gpus")
    else:
        keys = ("isl", "osl", "ttft_ms", "tpot_ms", "rate", "tokens_per_s", "gpus", "dtypes", "max_gpus")
    return question_from({"model": model, **{k: plain.get(k) for k in keys}})


@hydra.main(version_base="1.3", config_path="../conf", config_name="plan")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Check the question and settings (exit 2 naming a bad one), then search, print, write and log the plan."""
    model = model_from_cfg(cfg.get("model"))
    if model is None:
        raise UserError(f"model=<key> is required; known: {', '.join(sorted(all_models()))}")
    out = output_file(cfg.output)
    if out is not None and out.suffix != ".csv":
        raise UserError(f"output={cfg.output}: give a .csv path (the JSON and the plot are written beside it)")
    question = question_of(cfg, model)
    if cfg.dask.address:
        from tilecast.scoring.cluster import check_scheduler

        check_scheduler(str(cfg.dask.address), float(cfg.dask.connect_timeout_s))
    from tilecast.pipelines.score import quiet_logs
    from tilecast.planning.describe import describe_plan
    from tilecast.planning.output import log_plan, write_plan
    from tilecast.planning.search import answer, settings_from_config

    quiet_logs()
    settings = settings_from_config(OmegaConf.to_container(cfg, resolve=True))
    plan = answer(question, settings)
    print(describe_plan(plan))
    files = write_plan(plan, out, settings.top) if out is not None else None
    if files is not None:
        print(f"wrote {files.csv}, {files.json.name}" + (f", {files.png.name}" if files.png else ""))
    if cfg.log:
        run_id = log_plan(plan, files, str(cfg.experiment), cfg.mlflow.tracking_uri, OmegaConf.to_yaml(cfg))
        print(f"MLflow run {run_id} (experiment {cfg.experiment})")


if __name__ == "__main__":
    with_catalog_args(main, what_if=("model",))()
