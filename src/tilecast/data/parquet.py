"""Deterministic Parquet writes: same table, same library versions -> same bytes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tilecast.atomic import write_atomic

#: fixed writer settings; no pandas metadata, no timestamps, one row group per 1M rows.
WRITE_OPTIONS = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": True,
    "write_statistics": True,
    "row_group_size": 1 << 20,
}


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` atomically (:func:`tilecast.atomic.write_atomic`)."""
    write_atomic(path, lambda tmp: pq.write_table(table.replace_schema_metadata(None), tmp, **WRITE_OPTIONS))
