"""The nightly run: ``python jobs/nightly.py [date=YYYY-MM-DD] [dask.address=tcp://host:8786]`` (conf/nightly.yaml).

Trains and promotes when the registry has no champion, scores the nightly matrix with the champions,
writes the report with the comparison against the previous nightly run into ``reports/<date>/`` and
logs everything to the MLflow experiment ``nightly``.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import output_directory, user_errors, with_catalog_args


@hydra.main(version_base="1.3", config_path="../conf", config_name="nightly")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Run the nightly pipeline; a bad config or registry state exits 2 naming the problem."""
    output_directory(cfg.output_dir)
    if cfg.dask.address:  # an unreachable scheduler fails here, before the registry or any work
        from tilecast.scoring.cluster import check_scheduler

        check_scheduler(str(cfg.dask.address), float(cfg.dask.connect_timeout_s))
    from tilecast.pipelines.nightly import run_nightly, settings_from_config

    result = run_nightly(settings_from_config(OmegaConf.to_container(cfg, resolve=True)),
                         OmegaConf.to_yaml(cfg, resolve=True))
    s = result.run.stats
    print(f"nightly {result.run.meta['date']}: {s.summary()} in "
          f"{s.timings_s.get('total', float('nan')):.1f} s -> {result.run.path}\n"
          f"report: {result.report_html}\nMLflow run {result.mlflow_run_id} (experiment nightly)")


if __name__ == "__main__":
    with_catalog_args(main)()
