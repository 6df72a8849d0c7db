"""Report on a score run: ``python jobs/report.py [run=latest|<date>] [output_dir=reports] [fleet=<name>]``
-> ``<output_dir>/<date>/report.md``, ``report.html``, ``tables/``, ``plots/`` (see conf/report.yaml)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import output_directory, user_errors, with_catalog_args


@hydra.main(version_base="1.3", config_path="../conf", config_name="report")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Render the run's report; an unknown run or bad config exits 2 naming it."""
    output_dir = output_directory(cfg.output_dir)
    from tilecast.pipelines.report import run_report, settings_from_config

    plain = OmegaConf.to_container(cfg, resolve=True)
    settings, fleet = settings_from_config(plain)
    result = run_report(output_dir, plain.get("run"), settings, fleet, bool(plain["compare"]))
    print(f"report: {result.markdown}\n        {result.html}")


if __name__ == "__main__":
    with_catalog_args(main)()
