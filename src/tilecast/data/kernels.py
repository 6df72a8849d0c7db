"""Kernel tables: ``kernels/{train/<op>/<GPU>.csv, train_processed, test, dims}`` -> one table each.

Source columns are kept exactly (names, order). Train tables concatenate every GPU of an op and
are ordered by Device, then source order; the others keep source order.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from tilecast.data.columns import DIM
from tilecast.data.rows import SchemaError, arrow_table, read_rows, require_columns, type_rows
from tilecast.data.schema import DIMS_COLUMNS, KERNEL_REQUIRED, KERNEL_TYPES, kernel_dims
from tilecast.data.tables import TableJob, TableResult, rel

SPLITS = ("train", "train_processed", "test", "dims")


def _kernel_table(name: str, op: str, files: list[Path], source: Path, sort_by_device: bool) -> TableResult:
    if not files:
        raise SchemaError(f"{name}: no source files")
    required = KERNEL_REQUIRED + kernel_dims(op)
    header: list[str] | None = None
    values: dict[str, list] = {}
    rejects = []
    for path in files:
        shown = rel(path, source)
        src = read_rows(path, shown)
        require_columns(src.header, required, shown)
        if header is None:
            header = src.header
            values = {c: [] for c in header}
        elif src.header != header:
            raise SchemaError(f"{shown}: columns {src.header} differ from {rel(files[0], source)}'s {header}")
        typed, _, bad = type_rows(src, shown, KERNEL_TYPES)
        rejects += bad
        for c in header:
            values[c] += typed[c]
    if sort_by_device:
        order = sorted(range(len(values["Device"])), key=values["Device"].__getitem__)
        values = {c: [v[i] for i in order] for c, v in values.items()}
    return TableResult(name, arrow_table(values, KERNEL_TYPES), rejects, [rel(p, source) for p in files])


def _dims_table(name: str, path: Path, source: Path) -> TableResult:
    kind = path.stem.rsplit("_", 1)[-1]
    if kind not in DIMS_COLUMNS:
        raise SchemaError(f"{rel(path, source)}: unknown dims kind {kind!r}; known: {sorted(DIMS_COLUMNS)}")
    columns = DIMS_COLUMNS[kind]
    shown = rel(path, source)
    src = read_rows(path, shown, delimiter=";", names=columns)
    types = dict.fromkeys(columns, DIM)
    typed, _, rejects = type_rows(src, shown, types)
    return TableResult(name, arrow_table(typed, types), rejects, [shown])


def _csvs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.csv"))


def plan_kernels(source: Path) -> list[TableJob]:
    """One job per kernel output table found under ``source/kernels``."""
    root = source / "kernels"
    jobs = []
    for op_dir in sorted(p for p in (root / "train").glob("*") if p.is_dir()):
        name = f"kernels/train/{op_dir.name}"
        jobs.append(TableJob(name, partial(_kernel_build, name, op_dir.name, op_dir, True)))
    for split in ("train_processed", "test"):
        for path in _csvs(root / split):
            name = f"kernels/{split}/{path.stem}"
            jobs.append(TableJob(name, partial(_kernel_build, name, path.stem, path, False)))
    for path in _csvs(root / "dims"):
        name = f"kernels/dims/{path.stem}"
        jobs.append(TableJob(name, partial(_dims_table, name, path)))
    return jobs


def _kernel_build(name: str, op: str, where: Path, sort_by_device: bool, source: Path) -> TableResult:
    files = _csvs(where) if where.is_dir() else [where]
    return _kernel_table(name, op, files, source, sort_by_device)
