"""Table I/O shared by the jobs: read CSV or Parquet, write atomically (nothing partial on failure)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a ``.csv`` or ``.parquet`` table; a missing file or other suffix is a clear error."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"input table {p} does not exist")
    if p.suffix == ".parquet":
        return pd.read_parquet(p)
    if p.suffix == ".csv":
        return pd.read_csv(p)
    raise ValueError(f"input table {p}: expected a .csv or .parquet file")


def write_atomic(path: str | os.PathLike, write) -> Path:
    """Call ``write(tmp_path)`` then move the file into place, so readers never see half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=p.suffix, dir=p.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; outputs are meant to be read by others
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def write_table(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``df`` as CSV or Parquet (by suffix), atomically, without the index."""
    p = Path(path)
    if p.suffix == ".parquet":
        return write_atomic(p, lambda t: df.to_parquet(t, index=False))
    if p.suffix == ".csv":
        return write_atomic(p, lambda t: df.to_csv(t, index=False))
    raise ValueError(f"output table {p}: expected a .csv or .parquet file")
