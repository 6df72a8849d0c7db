"""Train per-family kernel predictors: ``python jobs/train.py [predictor=xgboost|mlp] [families=[bmm,linear]]``.

Each family: one MLflow run and a new version of ``tilecast-<family>`` with alias ``@challenger``.
"""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import int_setting, user_errors, with_catalog_args

log = logging.getLogger("train")


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Check the settings first (exit 2 naming a bad one), then open the store (MLflow) and train."""
    from tilecast.registry.tracking import configure
    from tilecast.training.train import TrainSpec, default_workers, train

    # a refused spec (alias=champion) stops before the store is touched
    spec = TrainSpec(predictor=cfg.predictor.name,
                     params=OmegaConf.to_container(cfg.predictor, resolve=True).get("params") or {},
                     families=(cfg.families,) if isinstance(cfg.families, str) else tuple(cfg.families),
                     experiment=cfg.mlflow.experiment, alias=cfg.alias,
                     val_fraction=cfg.val_fraction, seed=cfg.seed, unseen_gpus=tuple(cfg.unseen_gpus),
                     max_rows=cfg.max_rows, logo=cfg.logo)
    uri = configure(cfg.mlflow.tracking_uri, timeout_s=cfg.mlflow.get("connect_timeout_s"))
    log.info("tracking at %s (experiment %s)", uri, cfg.mlflow.experiment)
    workers = default_workers() if cfg.get("workers") is None else int_setting(cfg, "workers")
    results = train(spec, OmegaConf.to_yaml(cfg, resolve=True), workers=workers)
    for r in results:
        logo = (f"  LOGO MAPE {r.metrics['logo_mape_pct']:.1f}% (worst {r.metrics['logo_worst_mape_pct']:.1f}%)"
                if "logo_mape_pct" in r.metrics else "")
        print(f"{r.model} v{r.version} @{spec.alias}  run {r.run_id}  val MAPE {r.metrics['val_mape_pct']:.1f}%  "
              f"unseen MAPE {r.metrics.get('unseen_mape_pct', float('nan')):.1f}%{logo}")


if __name__ == "__main__":
    with_catalog_args(main)()
