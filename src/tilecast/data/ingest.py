"""Ingest a measured-data source tree into checked, compact Parquet (``data/<dataset>``).

The datasets (NeuSight, NeuSight AMD, AIConfigurator, Vidur) are in :data:`datasets.DATASETS`.
Every source table is read with line (or row) numbers and checked (columns, dtypes, positive latency,
known device, dims). A bad row is logged as ``<file>:<line>: <reason>`` and left out; a table that
cannot be read at all (missing columns) fails the ingest and nothing is written. Spec sheets the
dataset ships verbatim are checked too. The output is built in a staging folder and swapped in
whole: no partial or stale files.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tilecast.atomic import fsync_tree, swap_in
from tilecast.data.datasets import DATASETS, Dataset, get_dataset
from tilecast.data.parquet import write_parquet
from tilecast.data.provenance import render
from tilecast.data.rows import SchemaError
from tilecast.data.tables import TableJob, TableResult, rel

log = logging.getLogger(__name__)

#: every family of NeuSight tables the ingest makes, in output order.
PLANNERS: tuple[Callable[[Path], list[TableJob]], ...] = DATASETS["neusight"].planners


@dataclass
class IngestReport:
    """What an ingest did: the tables made, and the schema failures that stopped it."""

    source: Path
    output: Path
    tables: list[TableResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    dataset: str = "neusight"
    copied: list[tuple[str, str]] = field(default_factory=list)  # (source file, output file), relative

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def kept(self) -> int:
        return sum(t.kept for t in self.tables)

    @property
    def rejected(self) -> int:
        return sum(len(t.rejects) for t in self.tables)

    def table(self, name: str) -> TableResult:
        """The result for output table ``name`` (e.g. ``kernels/train/bmm``)."""
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"no table {name!r}; made: {', '.join(t.name for t in self.tables)}")

    def summary(self) -> str:
        """A fixed-width table: output table, rows kept, rows rejected, and a total line."""
        width = max([len(t.name) for t in self.tables] + [len("total")])
        lines = [f"{'table':<{width}}  {'kept':>8}  {'rejected':>8}"]
        lines += [f"{t.name:<{width}}  {t.kept:>8}  {len(t.rejects):>8}" for t in self.tables]
        lines.append(f"{'total':<{width}}  {self.kept:>8}  {self.rejected:>8}")
        return "\n".join(lines)


def build_tables(source: Path, planners: Sequence[Callable[[Path], list[TableJob]]] = PLANNERS) -> IngestReport:
    """Read and check every source table (nothing written); schema failures are collected, not raised."""
    report = IngestReport(source, Path())
    for plan in planners:
        for job in plan(source):
            try:
                report.tables.append(job.build(source))
            except SchemaError as exc:
                report.failures.append(f"{job.name}: {exc}")
    return report


def plan_copies(source: Path, spec: Dataset, report: IngestReport) -> None:
    """Check the files ``spec`` ships verbatim; record them in ``report`` (failures there too)."""
    for copy in spec.copies:
        files = sorted(source.glob(copy.pattern))
        if not files:
            report.failures.append(f"{copy.pattern}: no source files (they ship verbatim under {copy.dest}/)")
        for path in files:
            shown = rel(path, source)
            try:
                copy.check(path, shown)
            except SchemaError as exc:
                report.failures.append(f"{copy.dest}: {exc}")
                continue
            report.copied.append((shown, f"{copy.dest}/{path.name}"))


def run_ingest(source: Path, output: Path, source_label: str | None = None,
               command: str | None = None, dataset: str = "neusight") -> IngestReport:
    """Convert the ``dataset`` tree at ``source`` into Parquet under ``output`` with PROVENANCE.md and LICENSE.

    ``dataset`` is a key of :data:`datasets.DATASETS` (ValueError lists them). Logs each rejected row
    and a kept/rejected summary. When a table fails its schema check the report says so (``ok`` is
    False) and ``output`` is left as it was.
    """
    spec = get_dataset(dataset)
    source, output = Path(source), Path(output)
    if not source.is_dir():
        raise FileNotFoundError(f"source {str(source)!r} is not a folder (expected the {spec.text.title} tree)")
    license_path = source / spec.licence
    report = build_tables(source, spec.planners)
    report.output, report.dataset = output, dataset
    plan_copies(source, spec, report)
    if not license_path.is_file():
        report.failures.append(f"{license_path}: missing; the {spec.licence_kind} notice must ship with the data")
    for t in report.tables:
        for r in t.rejects:
            log.warning("%s:%d: %s", source / r.file, r.line, r.reason)
    if not report.ok:
        for f in report.failures:
            log.error("schema check failed: %s", f)
        log.error("nothing written to %s", output)
        return report
    _write(report, spec, license_path, source_label or str(source), command)
    log.info("rows kept and rejected per table:\n%s", report.summary())
    return report


def _recover(output: Path) -> None:
    """A previous ingest killed between its two renames left the old tree whole under ``.<name>.old-<pid>``
    and no ``<name>``: put it back before anything else."""
    if output.exists():
        return
    for old in sorted(output.parent.glob(f".{output.name}.old-*")):
        if (old / "PROVENANCE.md").is_file():
            log.warning("%s was left aside by an interrupted ingest: restoring it", old)
            os.rename(old, output)
            return


def _write(report: IngestReport, spec: Dataset, license_path: Path, source_label: str, command: str | None) -> None:
    output = report.output
    output.parent.mkdir(parents=True, exist_ok=True)
    _recover(output)
    stage = Path(tempfile.mkdtemp(prefix=f".{output.name}.staging-", dir=output.parent))
    old = output.with_name(f".{output.name}.old-{os.getpid()}")
    try:
        for t in report.tables:
            write_parquet(t.table, stage / f"{t.name}.parquet")
        for src, dest in report.copied:
            (stage / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(report.source / src, stage / dest)
        license_text = license_path.read_text(encoding="utf-8")
        shutil.copyfile(license_path, stage / "LICENSE")
        text = render(report.tables, report.source, source_label, command, license_text, spec.text, license_path,
                      [src for src, _ in report.copied])
        (stage / "PROVENANCE.md").write_text(text, encoding="utf-8")
        os.chmod(stage, 0o755)
        fsync_tree(stage)
        replaced = swap_in(stage, output, old)  # the old tree whole under ``old`` until the new one is in place
        if replaced is not None:
            shutil.rmtree(replaced, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
