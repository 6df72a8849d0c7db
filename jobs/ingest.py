"""Ingest the NeuSight data tree into data/neusight (Parquet + PROVENANCE.md)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from tilecast.cli import user_errors
from tilecast.data import run_ingest
from tilecast.paths import resolve


@hydra.main(version_base="1.3", config_path="../conf", config_name="ingest")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Run the ingest; exit 1 when a table fails its schema check (nothing is written then)."""
    command = f"python jobs/ingest.py source={cfg.source} output={cfg.output}"
    report = run_ingest(resolve(cfg.source), resolve(cfg.output), source_label=str(cfg.source), command=command)
    if not report.ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
