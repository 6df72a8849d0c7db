"""Deterministic Parquet writes: same table, same library versions -> same bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

#: fixed writer settings; no pandas metadata, no timestamps, one row group per 1M rows.
WRITE_OPTIONS = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": True,
    "write_statistics": True,
    "row_group_size": 1 << 20,
}


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` atomically (temp file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table.replace_schema_metadata(None), tmp, **WRITE_OPTIONS)
    os.replace(tmp, path)
