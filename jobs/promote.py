"""Promote challengers that measure no worse: ``python jobs/promote.py [families=[...]] [rollback=true]``
(see conf/promote.yaml). Exit 1 with the reason when the champion is kept; exit 2 on a user error (a bad
name, or a champion or challenger that cannot be loaded), aliases untouched."""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import user_errors, with_catalog_args

log = logging.getLogger("promote")


@hydra.main(version_base="1.3", config_path="../conf", config_name="promote")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Check the settings first (exit 2 naming a bad one), then open the store (MLflow) and promote."""
    from tilecast.registry.tracking import configure
    from tilecast.training.promotion import PromotionPolicy, PromotionRefused, promote, rollback

    uri = configure(cfg.mlflow.tracking_uri, timeout_s=cfg.mlflow.get("connect_timeout_s"))
    log.info("tracking at %s", uri)
    families = tuple(cfg.families)
    try:
        if cfg.rollback:
            for move in rollback(families, register=cfg.register_forecaster, experiment=cfg.mlflow.experiment):
                print(f"{move.model}@{move.alias}: {move.describe()} ({move.reason})")
            return
        from tilecast.pipelines.evaluate import load_labels  # the evaluation stack: not needed by a rollback

        policy = PromotionPolicy(kernel_tolerance_pct=cfg.kernel_tolerance_pct, e2e_tolerance_pct=cfg.e2e_tolerance_pct,
                                 unseen_gpus=tuple(cfg.unseen_gpus), logo_tolerance_pct=cfg.logo_tolerance_pct,
                                 logo_worst_tolerance_pct=cfg.logo_worst_tolerance_pct,
                                 require_logo=cfg.require_logo)
        result = promote(families, policy, load_labels(cfg.labels_dir), cfg.mlflow.experiment,
                         OmegaConf.to_yaml(cfg, resolve=True), register=cfg.register_forecaster)
    except PromotionRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"promoted ({'first promotion' if result.first else 'passed the gates'}): {result.reason}")
    for move in result.moves:
        print(f"  {move.model}@{move.alias}: {move.describe()}")
    if not result.moves:
        print("  (the challengers already are the champions)")
    if result.forecaster_version:
        print(f"  tilecast-forecaster@champion v{result.forecaster_version}")
    print(f"  MLflow run {result.run_id}")


if __name__ == "__main__":
    with_catalog_args(main)()
