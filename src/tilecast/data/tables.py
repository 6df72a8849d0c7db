"""One output table of the ingest: its Arrow data, rejects and source files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tilecast.data.rows import Reject


@dataclass
class TableResult:
    """An ingested table. ``name`` is its path under the output root without ``.parquet``."""

    name: str
    table: pa.Table
    rejects: list[Reject] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # source files, relative to the source root
    notes: list[str] = field(default_factory=list)

    @property
    def kept(self) -> int:
        return self.table.num_rows


@dataclass(frozen=True)
class TableJob:
    """A table to build: its output name and the function that builds it from the source root."""

    name: str
    build: Callable[[Path], TableResult]


def rel(path: Path, root: Path) -> str:
    """``path`` relative to ``root``, with forward slashes (stable across machines)."""
    return path.relative_to(root).as_posix()
