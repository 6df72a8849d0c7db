"""Read the shipped Parquet tables (``data/neusight`` by default; every loader takes ``root``).

Layout under the root: ``kernels/{train,test,train_processed,dims}/<name>.parquet``,
``labels/{e2e,nodes}.parquet``, ``graphs/graphs.parquet``, ``paper/<name>.parquet``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from tilecast.data.kernels import SPLITS
from tilecast.data.provenance import sha256_file
from tilecast.errors import UserError
from tilecast.paths import DATA_DIR, NEUSIGHT_DIR
from tilecast.specs.catalog import unknown_error


def _root(root: str | os.PathLike | None) -> Path:
    return NEUSIGHT_DIR if root is None else Path(root)


def _path(root: Path, rel: str) -> Path:
    path = root / f"{rel}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; make it with `python jobs/ingest.py` "
                                f"(data root {root})")
    return path


def _names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.parquet"))


def kernel_names(split: str, root: str | os.PathLike | None = None) -> list[str]:
    """Table names of a kernel split (e.g. ``train`` -> ``add, addu, bmm, ...``)."""
    if split not in SPLITS:
        raise UserError(f"unknown kernel split {split!r}; known: {', '.join(SPLITS)}")
    return _names(_root(root) / "kernels" / split)


def load_kernels(split: str, name: str, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """One kernel table: ``split`` in train/test/train_processed/dims, ``name`` e.g. ``bmm``.

    Train tables hold every GPU of the op (ordered by Device, then source order); columns and
    their names are the source's (``Latency`` in ms). Dims tables name their columns B, M, N, K
    (bmm, linear), B, H (vec, ln) or the conv shape (cnn); their names are ``<split>_<kind>``.
    """
    names = kernel_names(split, root)
    if name not in names:
        raise unknown_error(f"{split} kernel table", name, names)
    return pq.read_table(_path(_root(root), f"kernels/{split}/{name}")).to_pandas()


def load_e2e_labels(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per measured model run (latencies in ms); ``num_layer`` is nullable ``Int64``."""
    df = pq.read_table(_path(_root(root), "labels/e2e")).to_pandas()
    df["num_layer"] = df["num_layer"].astype("Int64")
    return df


def load_node_labels(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Per-node measured latencies (ms) with ``device_dir, device, tag, row`` and the csv columns."""
    return pq.read_table(_path(_root(root), "labels/nodes")).to_pandas()


def graph_tags(root: str | os.PathLike | None = None) -> list[str]:
    """Tags of the reference graphs (``<model>-<inf|train>-<seq>-<batch>[-<variant>]``), sorted."""
    tags = pq.read_table(_path(_root(root), "graphs/graphs"), columns=["tag"]).column("tag").unique()
    return sorted(tags.to_pylist())


def load_graph(tag: str, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """One reference graph's rows in source order (columns ``tag, row, Name, OpName, FwOps, ...``)."""
    path = _path(_root(root), "graphs/graphs")
    df = pq.read_table(path, filters=[("tag", "==", tag)]).to_pandas()
    if df.empty:
        raise unknown_error("graph tag", tag, graph_tags(root))
    return df.sort_values("row", kind="stable").reset_index(drop=True)


def load_paper(name: str, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """A paper error table in long form: ``nvidia_inf``, ``nvidia_train`` or ``perop``."""
    names = _names(_root(root) / "paper")
    if name not in names:
        raise unknown_error("paper table", name, names)
    return pq.read_table(_path(_root(root), f"paper/{name}")).to_pandas()


#: file kinds :func:`data_hash` covers: the tables and the spec sheets shipped verbatim beside them.
HASHED_SUFFIXES = (".parquet", ".yaml", ".json")


def data_hash(root: str | os.PathLike | None = None) -> str:
    """A sha256 over every shipped table and spec sheet (relative path and bytes), for lineage.

    The default root is ``tilecast.paths.DATA_DIR``: every dataset (NeuSight, NeuSight AMD,
    AIConfigurator, Vidur); pass a dataset folder (e.g. ``NEUSIGHT_DIR``) to hash just that one.
    Covers ``*.parquet``, ``*.yaml`` and ``*.json`` files (not PROVENANCE.md or LICENSE).
    """
    base = DATA_DIR if root is None else Path(root)
    files = sorted((p for p in base.rglob("*") if p.suffix in HASHED_SUFFIXES and p.is_file()),
                   key=lambda p: p.relative_to(base).as_posix())
    if not files:
        raise FileNotFoundError(f"no Parquet files under {base}; make them with `python jobs/ingest.py`")
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(base).as_posix()}\0{sha256_file(p)}\n".encode())
    return h.hexdigest()
