"""Built graphs kept between runs: the nightly grid is the same graphs night after night.

A graph is a pure function of its keys (model, batch, seq_len, mode, parallel, fused, dtype, kv_len,
serving) and of the
code and model configs that build it. The cache file is named by a fingerprint of exactly those
inputs (the source of ``tilecast.graph`` and ``tilecast.specs`` and every tilecast module they import,
``forecast/workload.py``, the scorer's graph and memory modules, and ``conf/model/*.yaml``), so any
change there starts a fresh cache and a stale graph is never used. A graph that failed is kept too
(the same code fails the same way), unless the failure depends on the environment (a missing
module, memory, I/O): that one is retried next run. Files are replaced atomically. The memory
estimate also depends on the optimizer the fit assumes: it is part of the cache's name (``variant``).
The layout of the cached columns is versioned (:data:`CACHE_LAYOUT`, part of the name too), and a file
that lacks a key or op column is rebuilt, never read.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import time
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import tilecast
from tilecast.io import write_atomic
from tilecast.paths import CONF_DIR
from tilecast.scoring.graphs import FRAME_COLUMNS
from tilecast.scoring.matrix import BUILD_KEYS

log = logging.getLogger(__name__)

#: Parquet metadata key: the same random token in both files of one save (a crash between the two writes
#: leaves files of two saves, which are rebuilt, never read together)
PAIR_KEY = b"tilecast.cache_pair"

#: version of the cached columns (2: ``dtype`` is a graph key, op rows carry ``dtype`` and ``hkv``, and the
#: op rows reference their graph's info row by ``graph_id`` instead of repeating the graph keys; 3: the
#: serve scorer's ``kv_len`` and ``serving`` are graph keys; 4: op rows carry ``attrs``, the family-specific dims
#: of the mixture-of-experts era's ops and a collective's GPU group)
CACHE_LAYOUT = 4

#: where graph building starts: the graph and spec packages (followed through their tilecast imports), and
#: the few modules around them that shape a graph's op rows or memory (taken as they are)
_SEED_PACKAGES = ("graph", "specs")
_FILES = ("forecast/workload.py", "scoring/graphs.py", "scoring/memory.py", "scoring/graph_cache.py")


def _module_file(base: Path, module: str) -> Path | None:
    rel = Path(*module.split(".")[1:])
    for cand in (base / rel.with_suffix(".py"), base / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _closure(base: Path, seeds: list[Path]) -> set[Path]:
    """``seeds`` and every tilecast module they import, transitively (static ``import`` statements)."""
    seen: set[Path] = set()
    todo = list(seeds)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            for name in names:
                if name.startswith("tilecast.") and (f := _module_file(base, name)) is not None:
                    todo.append(f)
    return seen


def code_fingerprint(conf_dir: Path = CONF_DIR) -> str:
    """sha256 (16 hex) over the source files graph building depends on, and the model catalog.

    Only what can change a graph counts: editing a predictor or a report keeps the cache.
    """
    base = Path(tilecast.__file__).parent
    seeds = sorted(p for pkg in _SEED_PACKAGES for p in (base / pkg).rglob("*.py"))
    files = sorted(_closure(base, seeds) | {base / f for f in _FILES})
    files += sorted((Path(conf_dir) / "model").glob("*.yaml"))
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(p.parents[1])).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


_KEEP_OTHERS_S = 7 * 24 * 3600  # caches of other code / settings are kept a week (another branch may use them)


def _age_s(path: Path) -> float:
    return time.time() - path.stat().st_mtime


#: errors that may not happen again in another environment or run: never cached
TRANSIENT = ("ImportError", "ModuleNotFoundError", "MemoryError", "OSError", "PermissionError", "TimeoutError")


def _transient(errors: pd.Series) -> pd.Series:
    text = errors.fillna("").astype(str)
    return text.str.split(":").str[0].isin(TRANSIENT)


class GraphCache:
    """``<directory>/graphs-<fingerprint>.parquet`` (op rows) and ``...-info.parquet`` (one row per graph)."""

    def __init__(self, directory: str | Path, fingerprint: str | None = None, variant: str = "") -> None:
        """``variant``: settings the cached values depend on besides the code (the optimizer of the memory)."""
        self.directory = Path(directory)
        base = fingerprint or code_fingerprint()
        self.fingerprint = hashlib.sha256(f"{base}|layout={CACHE_LAYOUT}|{variant}".encode()).hexdigest()[:16]

    @property
    def rows_path(self) -> Path:
        return self.directory / f"graphs-{self.fingerprint}.parquet"

    @property
    def info_path(self) -> Path:
        return self.directory / f"graphs-{self.fingerprint}-info.parquet"

    def load(self) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        """(op rows, info) as saved: info holds the graph keys, both hold the ``graph_id`` of the run that saved
        them (the op rows' ``dtype`` is the op's, the info's the workload's); None when empty or another layout."""
        if not (self.rows_path.exists() and self.info_path.exists()):
            return None
        try:
            pair = {(pq.read_schema(p).metadata or {}).get(PAIR_KEY) for p in (self.rows_path, self.info_path)}
            if len(pair) != 1 or None in pair:
                log.warning("graph cache %s: op rows and graph index are from different runs (a run stopped "
                            "between writing them): rebuilding", self.rows_path)
                return None
            rows, info = pd.read_parquet(self.rows_path), pd.read_parquet(self.info_path)
        except Exception as exc:  # noqa: BLE001 - a damaged cache is rebuilt, never trusted
            log.warning("graph cache %s unreadable (%s): rebuilding", self.rows_path, exc)
            return None
        missing = sorted(({"graph_id", *FRAME_COLUMNS} - set(rows.columns))
                         | ({"graph_id", *BUILD_KEYS} - set(info.columns)))
        if missing:
            log.warning("graph cache %s lacks columns %s (another layout): rebuilding", self.rows_path, missing)
            return None
        return rows, info

    def save(self, rows: pd.DataFrame, info: pd.DataFrame) -> None:
        """Replace the cache with these graphs (not those that failed for a transient reason); caches of
        other code or settings untouched for a week are removed. ``rows``: op rows with ``graph_id``;
        ``info``: one row per graph with ``graph_id`` and the graph keys."""
        keep = info.loc[~_transient(info["graph_error"]) & ~_transient(info["mem_error"])]
        rows = rows.loc[rows["graph_id"].isin(keep["graph_id"])]
        self.directory.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex.encode()
        write_atomic(self.rows_path, lambda t: _write_paired(rows, t, token))
        write_atomic(self.info_path, lambda t: _write_paired(keep, t, token))
        for old in self.directory.glob("graphs-*.parquet"):
            if self.fingerprint not in old.name and _age_s(old) > _KEEP_OTHERS_S:
                old.unlink(missing_ok=True)


def _write_paired(df: pd.DataFrame, path: Path, token: bytes) -> None:
    table = pa.Table.from_pandas(df, preserve_index=False)
    pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), PAIR_KEY: token}), path)
