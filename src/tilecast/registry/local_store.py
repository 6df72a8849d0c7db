"""The embedded store (a sqlite database with its artifacts beside it) after a move, a copy, or read-only.

MLflow records absolute artifact locations in the database (experiments, runs, logged models, model
versions). tilecast puts a local store's artifacts under ``<db dir>/artifacts/<experiment>`` (see
:func:`tilecast.registry.tracking.local_artifact_root`), so an experiment recorded at
``<old dir>/artifacts/<its name>`` tells that the store was made at ``<old dir>`` and has since moved
(``mv``) or been copied (``cp -a``). At start-up (:func:`prepare_store`, called by ``configure``):

- a writable store is **rebased**: every location under an old directory is rewritten to the same
  path under the current one, in one transaction (a concurrent job finds nothing left to do), so
  reads find the artifacts here and new runs write here, never into the original of a copy;
- a **read-only** store (the database or its directory not writable, or every write bit cleared:
  ``chmod -R a-w``, which root would otherwise ignore) is left untouched; tilecast's loaders map old
  locations to the current directory in memory (:func:`local_path`), and a job that would write
  (anything that creates an MLflow run) stops with :func:`require_writable`'s one-line error.

Locations outside an old store directory (a tracking server's, another disk's) are never touched.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from tilecast.paths import is_writable as is_writable_path
from tilecast.registry.models import RegistryError

log = logging.getLogger(__name__)

ARTIFACTS_DIR = "artifacts"  # a local store's artifacts, beside its database (tracking.local_artifact_root)
#: (table, column) of every absolute artifact location MLflow keeps in a store
LOCATION_COLUMNS = (("experiments", "artifact_location"), ("runs", "artifact_uri"),
                    ("logged_models", "artifact_location"), ("model_versions", "source"),
                    ("model_versions", "storage_location"))


class ReadOnlyStoreError(RegistryError):
    """A job that writes runs or models was pointed at a read-only store (jobs: exit 2, one line)."""


@dataclass(frozen=True)
class StoreState:
    """What :func:`prepare_store` found: the store's directory, old directories it was made at, writable or not."""

    db: Path
    old_dirs: tuple[Path, ...]
    writable: bool
    rebased: int = 0  # locations rewritten at start-up

    @property
    def directory(self) -> Path:
        return self.db.parent


_STATES: dict[str, StoreState] = {}  # tracking URI -> state (this process)


def _path_of(location: str) -> Path | None:
    """The local path of a ``file://`` URI or a plain absolute path; None for anything else."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and location.startswith("/"):
        return Path(location)
    return None


def is_writable(db: Path) -> bool:
    """Whether jobs may write the store: database and directory writable, and not every write bit cleared
    (root passes ``os.access`` on a ``chmod a-w`` file; a cleared mode still means "published, read-only")."""
    return all(is_writable_path(path) for path in (db, db.parent) if path.exists())


def old_directories(con: sqlite3.Connection, directory: Path) -> tuple[Path, ...]:
    """Directories other than ``directory`` the store's experiments were created in (see the module doc)."""
    found: list[Path] = []
    for name, location in con.execute("select name, artifact_location from experiments"):
        path = _path_of(location or "")
        if path is None or path.name != name or path.parent.name != ARTIFACTS_DIR:
            continue
        old = path.parent.parent
        if old != directory and old not in found and not (old.exists() and old.resolve() == directory.resolve()):
            found.append(old)
    return tuple(found)


def _prefixes(old: Path, new: Path) -> list[tuple[str, str]]:
    """(old prefix, new prefix) pairs for a location as a ``file://`` URI and as a plain path."""
    return [(f"{old.as_uri()}/", f"{new.as_uri()}/"), (f"{old}/", f"{new}/")]


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}


def _rebase(db: Path, timeout_s: float) -> tuple[tuple[Path, ...], int]:
    """Rewrite the locations under old directories to the current one, in one transaction."""
    directory = db.parent
    con = sqlite3.connect(str(db), timeout=timeout_s, isolation_level=None)
    try:
        con.execute("begin immediate")  # one writer at a time; re-read under the lock
        olds = old_directories(con, directory)
        tables, changed = _tables(con), 0
        for old in olds:
            for before, after in _prefixes(old, directory):
                for table, column in LOCATION_COLUMNS:
                    if table not in tables:
                        continue
                    cur = con.execute(f"update {table} set {column} = ? || substr({column}, ?) "  # noqa: S608
                                      f"where substr({column}, 1, ?) = ?",
                                      (after, len(before) + 1, len(before), before))
                    changed += cur.rowcount
        con.execute("commit")
        return olds, changed
    except BaseException:
        if con.in_transaction:
            con.execute("rollback")
        raise
    finally:
        con.close()


def prepare_store(uri: str, db: Path, timeout_s: float = 10.0) -> StoreState:
    """Rebase a moved or copied writable store to ``db``'s directory; note a read-only one. Once per URI."""
    if uri in _STATES:
        return _STATES[uri]
    db = Path(db)
    writable = is_writable(db)
    olds: tuple[Path, ...] = ()
    changed = 0
    if db.exists() and db.stat().st_size > 0:
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=timeout_s)
        try:
            olds = old_directories(con, db.parent) if "experiments" in _tables(con) else ()
        finally:
            con.close()
        if olds and writable:
            olds, changed = _rebase(db, timeout_s)
            if olds:  # empty: a concurrent job rebased it first
                log.warning("the MLflow store at %s was made at %s: %d artifact locations now point into %s",
                            db.parent, ", ".join(map(str, olds)), changed, db.parent)
            olds = ()
        elif olds:
            log.warning("the read-only MLflow store at %s was made at %s: its artifacts are read from %s",
                        db.parent, ", ".join(map(str, olds)), db.parent)
    if not writable:
        log.info("the MLflow store at %s is read-only: forecasts work, jobs that write runs refuse", db.parent)
    state = StoreState(db, olds, writable, changed)
    _STATES[uri] = state
    return state


def state_of(uri: str) -> StoreState | None:
    """The state :func:`prepare_store` recorded for ``uri`` (None: not a local store, or not prepared)."""
    return _STATES.get(uri)


def forget(uri: str | None = None) -> None:
    """Drop what was recorded for ``uri`` (all URIs when None), so the next ``configure`` looks again."""
    if uri is None:
        _STATES.clear()
    else:
        _STATES.pop(uri, None)


def local_path(location: str, uri: str) -> Path | None:
    """The local directory of an artifact ``location`` of the store at ``uri``, with a location recorded
    under an old directory of a read-only moved store mapped to the current one; None when not local."""
    path = _path_of(location)
    if path is None:
        return None
    state = _STATES.get(uri)
    for old in state.old_dirs if state else ():
        if path == old or old in path.parents:
            return state.directory / path.relative_to(old)
    return path


def require_writable(uri: str) -> None:
    """Raise :class:`ReadOnlyStoreError` when the store at ``uri`` is read-only (a job that writes runs)."""
    state = _STATES.get(uri)
    if state is not None and not state.writable:
        raise ReadOnlyStoreError(f"tracking URI {uri} is a read-only store ({state.directory} is not writable): "
                                 f"this job records runs and models; forecasts (predict, predict_kernels, score) "
                                 f"work from it, or point mlflow.tracking_uri= at a writable store")
