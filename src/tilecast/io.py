"""Table I/O shared by the jobs: read CSV or Parquet, write atomically (nothing partial on failure, through
:func:`tilecast.atomic.write_atomic`, the project's one atomic write)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from tilecast.atomic import write_atomic
from tilecast.errors import UserError

__all__ = ["read_table", "write_atomic", "write_table"]


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a ``.csv`` or ``.parquet`` table; a missing file or other suffix is a clear error."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"input table {p} does not exist")
    if p.suffix == ".parquet":
        return pd.read_parquet(p)
    if p.suffix == ".csv":
        return pd.read_csv(p)
    raise UserError(f"input table {p}: expected a .csv or .parquet file")


def write_table(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``df`` as CSV or Parquet (by suffix), atomically, without the index."""
    p = Path(path)
    if p.suffix == ".parquet":
        return write_atomic(p, lambda t: df.to_parquet(t, index=False))
    if p.suffix == ".csv":
        return write_atomic(p, lambda t: df.to_csv(t, index=False))
    raise UserError(f"output table {p}: expected a .csv or .parquet file")
