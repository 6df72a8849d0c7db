"""Where MLflow tracking and the model registry live: one place decides, always as an absolute URI.

Precedence: an explicit URI (``mlflow.tracking_uri=`` in a job's config) > ``MLFLOW_TRACKING_URI``
> the embedded default ``sqlite:///<ROOT>/mlruns/mlflow.db``. The registry uses the same URI.
For a local sqlite store the artifacts live beside the database (``<db dir>/artifacts``); a
tracking server decides its own artifact location (``--default-artifact-root`` /
``--artifacts-destination``).

A store that cannot be used stops a job at once with one line naming the URI (:class:`TrackingError`),
never after minutes of retries: before MLflow touches it, a sqlite path must be a database file (or
not exist yet) in an existing directory, a mistyped directory is never created (only the embedded
default's ``mlruns/`` is), and a server must accept a connection within ``timeout_s``; then one
cheap request to tracking and registry checks the store answers. MLflow's HTTP requests get the same
timeout and few retries (``MLFLOW_HTTP_REQUEST_TIMEOUT`` / ``_MAX_RETRIES`` / ``_BACKOFF_FACTOR``,
set before the first request; values already in the environment are kept).

Run lifecycle: every run a tilecast process starts is tagged with the process that owns it
(``tilecast.owner.pid`` / ``.host`` / ``.boot`` / ``.started``, :class:`tilecast.owner.Owner`). A run that
ends with an exception (or ``sys.exit``) is closed FAILED by ``mlflow.start_run``'s context; one whose
process was killed stays RUNNING until the next job that records runs on the store calls
:func:`ensure_experiment`, which marks every RUNNING run whose owning process has ended FAILED, with the
tag ``tilecast.failed_reason`` saying why (:func:`fail_dead_runs`). Runs of processes on other hosts, and
runs without owner tags, are left alone: their process cannot be checked from here.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import socket
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse

import mlflow
from mlflow import MlflowClient
from mlflow.tracking.context.abstract_context import RunContextProvider

from tilecast.errors import UserError
from tilecast.owner import Owner
from tilecast.paths import MLRUNS_DIR
from tilecast.registry.local_store import prepare_store, require_writable
from tilecast.registry.models import RegistryError

log = logging.getLogger(__name__)

ENV_VAR = "MLFLOW_TRACKING_URI"
#: seconds a server gets to accept a connection and to answer each request (``mlflow.connect_timeout_s``)
DEFAULT_TIMEOUT_S = 10
#: MLflow's HTTP retry settings while tilecast runs (MLflow's own defaults retry for minutes)
HTTP_RETRIES, HTTP_BACKOFF_FACTOR = 2, 1
TIMEOUT_ENV, RETRIES_ENV, BACKOFF_ENV = ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
                                         "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_CHECKED: set[str] = set()  # URIs whose store answered in this process
#: the tag of each field of the run's owning process (:class:`tilecast.owner.Owner`)
OWNER_TAGS = {"pid": "tilecast.owner.pid", "host": "tilecast.owner.host", "boot": "tilecast.owner.boot",
              "started": "tilecast.owner.started"}
#: set on a run marked FAILED because its process ended without closing it
FAILED_REASON_TAG = "tilecast.failed_reason"
_SWEPT: set[str] = set()  # URIs whose dead runs this process has marked
_OWNER_TAGGING = False


class TrackingError(RegistryError):
    """The tracking store cannot be used (unreachable server, not a database, missing directory, bad scheme)."""


def default_tracking_uri() -> str:
    """The embedded store: ``sqlite:///<abs ROOT>/mlruns/mlflow.db``."""
    return f"sqlite:///{MLRUNS_DIR.resolve() / 'mlflow.db'}"


def _absolute(uri: str) -> str:
    """Make a local store URI absolute (a Hydra run dir or another cwd must never move the store)."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else ""
        if not path or path == ":memory:":
            raise UserError(f"tracking URI {uri!r}: expected sqlite:///<path to a .db file>")
        return f"sqlite:///{Path(path).expanduser().resolve()}"
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme == "file" else uri
        return Path(path).expanduser().resolve().as_uri()
    return uri


def local_artifact_root(tracking_uri: str) -> str | None:
    """Artifact root for new experiments of a local store; None where a server decides."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///"):])
        return (db.parent / "artifacts").as_uri()
    return None


def http_limits(timeout_s: float | None = None) -> int:
    """Set MLflow's HTTP timeout (``timeout_s``, else ``MLFLOW_HTTP_REQUEST_TIMEOUT``, else
    :data:`DEFAULT_TIMEOUT_S`) and short retries for this process; returns the timeout in whole seconds."""
    if timeout_s is not None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
            raise UserError(f"mlflow.connect_timeout_s must be > 0 seconds, got {timeout_s!r}")
        os.environ[TIMEOUT_ENV] = str(max(1, math.ceil(timeout_s)))
    os.environ.setdefault(TIMEOUT_ENV, str(DEFAULT_TIMEOUT_S))
    os.environ.setdefault(RETRIES_ENV, str(HTTP_RETRIES))
    os.environ.setdefault(BACKOFF_ENV, str(HTTP_BACKOFF_FACTOR))
    try:
        return int(os.environ[TIMEOUT_ENV])
    except ValueError:
        raise UserError(f"{TIMEOUT_ENV}={os.environ[TIMEOUT_ENV]!r} is not a whole number of seconds") from None


def _fail(uri: str, source: str, why: str) -> TrackingError:
    return TrackingError(f"tracking URI {uri} (from {source}) {why}")


def check_sqlite(uri: str, source: str = "mlflow.tracking_uri", create_dir: bool = False,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> Path:
    """The database file of a ``sqlite:///`` URI, checked before MLflow opens it (MLflow would create any
    missing directory and retry a bad file for minutes). ``create_dir``: create a missing parent directory
    (the embedded default only)."""
    db = Path(uri[len("sqlite:///"):])
    if db.is_dir():
        raise _fail(uri, source, f"names a directory, not a database file: {db} is a directory "
                                 f"(did you mean sqlite:///{db / 'mlflow.db'}?)")
    if not db.parent.is_dir():
        if not create_dir:
            raise _fail(uri, source, f"points into {db.parent}, which does not exist (a mistyped path?); no store "
                                     f"was created. To start a new store there, create the directory first")
        db.parent.mkdir(parents=True, exist_ok=True)
    if not db.exists():
        others = sorted(p.name for p in db.parent.glob("*.db") if p.is_file())
        if others:  # a store beside it: a mistyped name would silently start a second, empty one
            raise _fail(uri, source, f"names {db.name}, which does not exist, beside {', '.join(others)} in "
                                     f"{db.parent} (a mistyped name?); no store was created. To start a new store, "
                                     "use a directory without one")
        log.warning("no MLflow store at %s yet: a new, empty one is created", db)
        return db
    if not os.access(db, os.R_OK):  # read-only is fine for forecasts (local_store.require_writable guards writes)
        raise _fail(uri, source, f"cannot be used: {db} is not readable by this user")
    if db.stat().st_size == 0:
        return db
    with db.open("rb") as f:
        if f.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC:
            raise _fail(uri, source, f"cannot be used: {db} is not an SQLite database")
    try:
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=timeout_s) as con:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    except sqlite3.Error as exc:
        raise _fail(uri, source, f"cannot be read: {db}: {exc}") from None
    if tables and "alembic_version" not in tables:
        raise _fail(uri, source, f"cannot be used: {db} is an SQLite database but not an MLflow store (its tables: "
                                 f"{', '.join(sorted(tables)[:8])})")
    return db


def _check_server(uri: str, source: str, timeout_s: float) -> None:
    parsed = urlparse(uri)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname or "", port), timeout=timeout_s).close()
    except OSError as exc:
        raise _fail(uri, source, f"does not answer: cannot connect to {parsed.hostname}:{port} "
                                 f"({exc.strerror or exc or type(exc).__name__}; waited at most {timeout_s:g} s); "
                                 f"start the tracking server or point mlflow.tracking_uri= / {ENV_VAR} at a "
                                 f"running one") from None


def _probe(uri: str, source: str) -> None:
    """One request each to tracking and registry, without retries: the store answers, or a TrackingError."""
    retries = os.environ.get(RETRIES_ENV)
    os.environ[RETRIES_ENV] = "0"
    try:
        client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        client.search_experiments(max_results=1)
        client.search_registered_models(max_results=1)
    except Exception as exc:  # any failure here means the store is unusable: say which and why, on one line
        text = " ".join(str(exc).split())[:400] or type(exc).__name__
        raise _fail(uri, source, f"cannot be used: {type(exc).__name__}: {text}") from None
    finally:
        if retries is None:
            os.environ.pop(RETRIES_ENV, None)
        else:
            os.environ[RETRIES_ENV] = retries


#: what ``mlflow run`` sets for the command it starts: the project run, its experiment, its tracking URI
PROJECT_RUN_ENV, PROJECT_EXPERIMENT_ENV = "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID"
#: the tag naming, on every run a job started by ``mlflow run`` records, that project run
PROJECT_RUN_TAG = "tilecast.mlflow_project_run"
_PROJECT_RUN: str | None = None


def adopt_project_run() -> str | None:
    """Under ``mlflow run`` (``MLFLOW_RUN_ID`` set): remember the project run, tag every run this job records with
    it (:data:`PROJECT_RUN_TAG`), and take ``MLFLOW_RUN_ID`` / ``MLFLOW_EXPERIMENT_ID`` out of the environment:
    a tilecast job records its own runs in its own experiments (``mlflow.start_run`` would otherwise resume the
    project run for the job's first run, in another experiment). Returns the project run's id (None: no project)."""
    global _PROJECT_RUN
    run_id = os.environ.pop(PROJECT_RUN_ENV, None)
    os.environ.pop(PROJECT_EXPERIMENT_ENV, None)
    if run_id:
        _PROJECT_RUN = run_id
    return _PROJECT_RUN


def configure(tracking_uri: str | None = None, *, timeout_s: float | None = None, check: bool = True) -> str:
    """Point MLflow tracking and registry at one absolute URI and return it.

    ``tracking_uri`` wins over ``MLFLOW_TRACKING_URI``, which wins over the embedded sqlite default.
    ``timeout_s`` (``mlflow.connect_timeout_s``): how long a server gets (see :func:`http_limits`).
    ``check``: make sure the store can be used (once per URI and process), else :class:`TrackingError`.
    """
    adopt_project_run()
    source = "mlflow.tracking_uri" if tracking_uri else ENV_VAR if os.environ.get(ENV_VAR) else "the default"
    uri = _absolute(tracking_uri or os.environ.get(ENV_VAR) or default_tracking_uri())
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one log line per event, no bars
    timeout = http_limits(timeout_s)
    scheme = urlparse(uri).scheme
    if scheme == "sqlite":
        db = check_sqlite(uri, source, create_dir=uri == default_tracking_uri(), timeout_s=timeout)
        prepare_store(uri, db, timeout)  # a moved or copied store is rebased; a read-only one noted
    if check and uri not in _CHECKED and scheme in ("http", "https"):
        _check_server(uri, source, timeout)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    record_run_owner()
    if check and uri not in _CHECKED:
        _probe(uri, source)
        _CHECKED.add(uri)
    return uri


def current_uri() -> str:
    """The tracking URI MLflow uses now."""
    return mlflow.get_tracking_uri()


class _OwnerTags(RunContextProvider):
    """MLflow run-context provider: the owning process's tags on every run started with ``mlflow.start_run``."""

    def in_context(self) -> bool:
        return True

    def tags(self) -> dict[str, str]:
        tags = {OWNER_TAGS[k]: str(v) for k, v in Owner.current().as_dict().items() if v is not None}
        return {**tags, PROJECT_RUN_TAG: _PROJECT_RUN} if _PROJECT_RUN else tags


def record_run_owner() -> None:
    """Tag every run this process starts with its owner (:data:`OWNER_TAGS`); once per process."""
    global _OWNER_TAGGING
    if _OWNER_TAGGING:
        return
    from mlflow.tracking.context.registry import _run_context_provider_registry

    _run_context_provider_registry.register(_OwnerTags)
    _OWNER_TAGGING = True


def fail_dead_runs(experiment_ids: Iterable[str] | None = None, client: MlflowClient | None = None) -> list[str]:
    """Mark FAILED every RUNNING run (of ``experiment_ids``; None: every experiment) whose owning process has
    ended, tagging :data:`FAILED_REASON_TAG`; return their ids. Runs whose owner runs, is on another host or
    is not recorded are left alone."""
    client = client or MlflowClient()
    ids = list(experiment_ids) if experiment_ids is not None else [
        e.experiment_id for e in client.search_experiments(max_results=50_000)]
    if not ids:
        return []
    failed = []
    me = Owner.current()
    for run in client.search_runs(ids, filter_string="attributes.status = 'RUNNING'", max_results=10_000):
        owner = Owner.from_dict({k: run.data.tags.get(tag) for k, tag in OWNER_TAGS.items()})
        if owner is None or owner.alive() is not False:
            continue
        run_id = run.info.run_id
        if client.get_run(run_id).info.status != "RUNNING":  # closed by its process after all (before it ended)
            continue
        when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        client.set_tag(run_id, FAILED_REASON_TAG,
                       f"process {owner.pid} on {owner.host} ended without closing this run (killed or crashed); "
                       f"marked FAILED by process {me.pid} on {me.host} at {when}")
        client.set_terminated(run_id, status="FAILED")
        failed.append(run_id)
        log.warning("MLflow run %s (%s) was left RUNNING by process %d on %s, which has ended: marked FAILED",
                    run_id, run.info.run_name, owner.pid, owner.host)
    return failed


def ensure_experiment(name: str) -> str:
    """Id of experiment ``name``, created with the store's artifact root if it does not exist yet.

    The first call of a process on a store also marks the runs that killed jobs left RUNNING FAILED
    (:func:`fail_dead_runs`, every experiment), before this job starts its own.
    """
    record_run_owner()
    client = MlflowClient()
    uri = current_uri()
    require_writable(uri)  # a read-only store: one line naming it, before any run starts
    if uri not in _SWEPT:
        _SWEPT.add(uri)
        try:
            fail_dead_runs(client=client)
        except Exception as exc:  # housekeeping never stops a job (a read-only store, a server that refuses)
            log.warning("could not check %s for runs left RUNNING by killed jobs: %s", uri, exc)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        return exp.experiment_id
    root = local_artifact_root(current_uri())
    location = f"{root}/{name}" if root else None
    try:
        return client.create_experiment(name, artifact_location=location)
    except mlflow.exceptions.MlflowException:  # created concurrently (parallel sweep jobs)
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id
