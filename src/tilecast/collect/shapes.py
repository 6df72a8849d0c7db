"""Shape sets for the collector (``shapes=``): where the dims to measure come from.

- ``tiny``: a few small shapes per op kind, for tests and smoke runs on CPU.
- ``test``: the shapes of the shipped test table of the op (``kernels/test/<bmm|linear|elem|ln|
  softmax>``, rows of that OPName, every GPU): the shapes the other GPUs were measured on.
- a dims table name, e.g. ``test_bmm``, ``test_linear``, ``test_vec``: ``kernels/dims/<name>``.
- a path to a ``.csv`` / ``.parquet`` table with the dims columns (B, M, N, K or B, H), or to a
  header-less ``;``-separated dims file like the source's ``kernels/dims/*.csv``.

Order: shuffled with a fixed seed by default, so a run stopped by its time budget has measured a
uniform random subsample, and a resumed run continues the same order.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tilecast.collect.errors import ShapeSourceError
from tilecast.collect.kernel_ops import GEMM_DIMS, KernelOp, Shape
from tilecast.paths import resolve

#: built-in tiny shape sets by dims kind
TINY: dict[tuple[str, ...], list[Shape]] = {
    GEMM_DIMS: [(1, 16, 32, 8), (2, 24, 16, 40), (1, 64, 64, 64)],
    ("B", "H"): [(4, 32), (16, 100), (64, 256)],
}


def _dims_frame(df: pd.DataFrame, op: KernelOp, shown: str) -> list[Shape]:
    missing = [c for c in op.dims if c not in df.columns]
    if missing:
        raise ShapeSourceError(f"shape table {shown} has columns {list(df.columns)}; op {op.name!r} needs "
                               f"{', '.join(op.dims)} (missing {', '.join(missing)})")
    rows = df[list(op.dims)].dropna().astype("int64").drop_duplicates()
    return [tuple(int(v) for v in r) for r in rows.itertuples(index=False)]


def _load_table(split: str, name: str, data_root: str | os.PathLike | None) -> pd.DataFrame:
    from tilecast.data import load_kernels

    try:
        return load_kernels(split, name, data_root)
    except (FileNotFoundError, ValueError, KeyError) as exc:  # UnknownSpecError is a KeyError
        raise ShapeSourceError(f"shapes: cannot read the shipped {split} table {name!r}: {exc}") from None


def _from_path(path: Path, op: KernelOp) -> list[Shape]:
    if not path.is_file():
        raise ShapeSourceError(f"shapes: {path} is not a file")
    if path.suffix == ".parquet":
        return _dims_frame(pd.read_parquet(path), op, str(path))
    with path.open() as fh:
        first = fh.readline()
    if ";" in first and not any(c.isalpha() for c in first):
        df = pd.read_csv(path, sep=";", header=None)
        if df.shape[1] != len(op.dims):
            raise ShapeSourceError(f"shapes: {path} has {df.shape[1]} columns per line; op {op.name!r} "
                                   f"needs {len(op.dims)} ({', '.join(op.dims)})")
        df.columns = list(op.dims)
        return _dims_frame(df, op, str(path))
    return _dims_frame(pd.read_csv(path), op, str(path))


def load_shapes(source: str, op: KernelOp, data_root: str | os.PathLike | None = None) -> list[Shape]:
    """The shapes ``source`` names for ``op`` (source order, duplicates dropped)."""
    if source == "tiny":
        return list(TINY[op.dims])
    if source == "test":
        df = _load_table("test", op.table, data_root)
        shapes = _dims_frame(df[df["OPName"] == op.name], op, f"kernels/test/{op.table}")
        if not shapes:
            raise ShapeSourceError(f"shapes=test: the shipped test table {op.table!r} has no rows of op "
                                   f"{op.name!r}")
        return shapes
    if source.endswith((".csv", ".parquet")) or os.sep in source:
        return _from_path(resolve(source), op)
    return _dims_frame(_load_table("dims", source, data_root), op, f"kernels/dims/{source}")


def order_shapes(shapes: Sequence[Shape], shuffle: bool, seed: int, limit: int | None) -> list[Shape]:
    """``shapes`` shuffled with ``seed`` (or as listed), cut to the first ``limit``."""
    out = list(shapes)
    if shuffle:
        random.Random(seed).shuffle(out)
    return out if limit is None else out[:limit]
