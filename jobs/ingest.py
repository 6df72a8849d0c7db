"""Ingest a measured-data tree into data/<dataset> (Parquet + PROVENANCE.md + LICENSE); dataset=all makes every one."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from tilecast.cli import output_directory, user_errors, with_catalog_args
from tilecast.data.ingest_config import ingest_command, ingest_targets
from tilecast.paths import resolve


@hydra.main(version_base="1.3", config_path="../conf", config_name="ingest")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Run the ingest(s); exit 1 when a table fails its schema check (nothing is written for that dataset)."""
    failed = False
    targets = list(ingest_targets(cfg))
    for _, _, output in targets:
        output_directory(output, "output")
    from tilecast.data.ingest import run_ingest

    for name, source, output in targets:
        report = run_ingest(resolve(source), resolve(output), source_label=source, dataset=name,
                            command=ingest_command(name, source, output))
        failed |= not report.ok
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    with_catalog_args(main)()
