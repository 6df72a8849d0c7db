"""Report on a score run: ``python jobs/report.py [run=latest|<date>] [output_dir=reports] [fleet=<name>]``
-> ``<output_dir>/<date>/report.md``, ``report.html``, ``tables/``, ``plots/`` (see conf/report.yaml)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import with_catalog_args


@hydra.main(version_base="1.3", config_path="../conf", config_name="report")
def main(cfg: DictConfig) -> None:
    """Render the run's report; an unknown run or bad config exits 2 naming it."""
    from tilecast.paths import resolve
    from tilecast.reports.fleet import FleetError
    from tilecast.reports.run import run_report, settings_from_config
    from tilecast.scoring.errors import is_user_error

    plain = OmegaConf.to_container(cfg, resolve=True)
    try:
        settings, fleet = settings_from_config(plain)
        result = run_report(resolve(plain["output_dir"]), plain.get("run"), settings, fleet, bool(plain["compare"]))
    except Exception as exc:
        if not (is_user_error(exc) or isinstance(exc, FleetError)):
            raise
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"report: {result.markdown}\n        {result.html}")


if __name__ == "__main__":
    with_catalog_args(main)()
