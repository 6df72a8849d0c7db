"""Score a config matrix: ``python jobs/score.py matrix=<name> [dask.address=tcp://host:port] [alias=champion]
[output_dir=<dir>]`` -> ``<output_dir>/<date>/scores.parquet`` (see conf/score.yaml).

The scoring modules are imported inside ``main``: Dask's spawned worker processes re-import this
file, and should not pay for what only the client needs.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import output_directory, user_errors, with_catalog_args


@hydra.main(version_base="1.3", config_path="../conf", config_name="score")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Validate the matrix, prices and registry first (exit 2 naming the problem), then score and write."""
    output_directory(cfg.output_dir)
    if cfg.dask.address:  # an unreachable scheduler fails here, before the registry or any work
        from tilecast.scoring.cluster import check_scheduler

        check_scheduler(str(cfg.dask.address), float(cfg.dask.connect_timeout_s))
    from tilecast.pipelines.score import run_score, settings_from_config

    run = run_score(settings_from_config(OmegaConf.to_container(cfg, resolve=True)))
    print(f"{run.stats.summary()} -> {run.path}")


if __name__ == "__main__":
    with_catalog_args(main)()
