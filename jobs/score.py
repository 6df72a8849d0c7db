"""Score a config matrix: ``python jobs/score.py matrix=<name> [dask.address=tcp://host:port] [alias=champion]
[output_dir=<dir>]`` -> ``<output_dir>/<date>/scores.parquet`` (see conf/score.yaml).

The scoring modules are imported inside ``main``: Dask's spawned worker processes re-import this
file, and should not pay for what only the client needs.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import with_catalog_args


@hydra.main(version_base="1.3", config_path="../conf", config_name="score")
def main(cfg: DictConfig) -> None:
    """Validate the matrix, prices and registry first (exit 2 naming the problem), then score and write."""
    from tilecast.scoring.errors import is_user_error
    from tilecast.scoring.run import run_score, settings_from_config

    try:
        run = run_score(settings_from_config(OmegaConf.to_container(cfg, resolve=True)))
    except Exception as exc:
        if not is_user_error(exc):
            raise
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"{run.stats.cells} cells ({run.stats.failed_cells} failed) -> {run.path}")


if __name__ == "__main__":
    with_catalog_args(main)()
