"""Source rows with their line numbers, and their conversion to typed columns.

Every row that cannot be used becomes a :class:`Reject` (file, line, reason); nothing is dropped
without one. A table-level problem (a required column missing) is a :class:`SchemaError`.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tilecast.data.columns import STRING, CellError, ColumnType
from tilecast.errors import UserError


class SchemaError(UserError):
    """A source table cannot be ingested at all (e.g. a required column is missing)."""


@dataclass(frozen=True)
class Reject:
    """One source row left out, with the reason."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class SourceRows:
    """The rows of one source file: header, cells as strings, 1-based line number of each row."""

    path: Path
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)


def read_rows(path: Path, shown: str, delimiter: str = ",", names: Sequence[str] | None = None) -> SourceRows:
    """Read a CSV keeping line numbers; ``names`` given means the file has no header line.

    Rows whose field count differs from the header are rejected here; blank lines are skipped.
    """
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        out: SourceRows | None = None
        if names is not None:
            out = SourceRows(path, list(names))
        prev_line = 0
        for record in reader:
            line, prev_line = prev_line + 1, reader.line_num
            if out is None:
                out = SourceRows(path, record)
                continue
            if not record:
                continue
            if len(record) != len(out.header):
                out.rejects.append(Reject(shown, line, f"expected {len(out.header)} fields, got {len(record)}"))
                continue
            out.rows.append(record)
            out.lines.append(line)
    if out is None:
        raise SchemaError(f"{shown}: empty file (no header line)")
    return out


def require_columns(header: Iterable[str], required: Iterable[str], shown: str) -> None:
    """Raise :class:`SchemaError` naming the file and every missing column."""
    header = list(header)
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise SchemaError(f"{shown}: duplicate columns {dupes}")
    missing = [c for c in required if c not in header]
    if missing:
        raise SchemaError(f"{shown}: missing columns {missing}; has {header}")


def type_rows(
    src: SourceRows,
    shown: str,
    types: Mapping[str, ColumnType],
    columns: Sequence[str] | None = None,
) -> tuple[dict[str, list[Any]], list[int], list[Reject]]:
    """Parse every cell of ``src`` with its column's type (``STRING`` for columns not in ``types``).

    ``columns`` (default: the file's header) fixes the output columns; a column absent from the
    file is all null, which only nullable types allow. Returns the kept values per column, the
    kept rows' line numbers and the rejects (the read-time ones first).
    """
    columns = list(src.header) if columns is None else list(columns)
    index = {c: i for i, c in enumerate(src.header)}
    for c in columns:
        if c not in index and not types.get(c, STRING).nullable:
            raise SchemaError(f"{shown}: missing column {c!r}")
    plan = [(c, index.get(c), types.get(c, STRING)) for c in columns]
    values: dict[str, list[Any]] = {c: [] for c in columns}
    kept_lines: list[int] = []
    rejects = list(src.rejects)
    for record, line in zip(src.rows, src.lines, strict=True):
        parsed = []
        try:
            for c, i, ctype in plan:
                parsed.append(None if i is None else ctype.cell(c, record[i]))
        except CellError as exc:
            rejects.append(Reject(shown, line, str(exc)))
            continue
        for (c, _, _), v in zip(plan, parsed, strict=True):
            values[c].append(v)
        kept_lines.append(line)
    return values, kept_lines, rejects


def arrow_table(values: Mapping[str, list[Any]], types: Mapping[str, ColumnType]) -> pa.Table:
    """Build an Arrow table from typed column values (column order kept)."""
    arrays = {c: pa.array(v, type=types.get(c, STRING).arrow) for c, v in values.items()}
    return pa.table(arrays)
