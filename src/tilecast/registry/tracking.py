"""Where MLflow tracking and the model registry live: one place decides, always as an absolute URI.

Precedence: an explicit URI (``mlflow.tracking_uri=`` in a job's config) > ``MLFLOW_TRACKING_URI``
> the embedded default ``sqlite:///<ROOT>/mlruns/mlflow.db``. The registry uses the same URI.
For a local sqlite store the artifacts live beside the database (``<db dir>/artifacts``); a
tracking server decides its own artifact location (``--default-artifact-root`` /
``--artifacts-destination``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import urlparse

import mlflow
from mlflow import MlflowClient

from tilecast.paths import MLRUNS_DIR

log = logging.getLogger(__name__)

ENV_VAR = "MLFLOW_TRACKING_URI"


def default_tracking_uri() -> str:
    """The embedded store: ``sqlite:///<abs ROOT>/mlruns/mlflow.db``."""
    return f"sqlite:///{MLRUNS_DIR.resolve() / 'mlflow.db'}"


def _absolute(uri: str) -> str:
    """Make a local store URI absolute (a Hydra run dir or another cwd must never move the store)."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else ""
        if not path or path == ":memory:":
            raise ValueError(f"tracking URI {uri!r}: expected sqlite:///<path to a .db file>")
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


def configure(tracking_uri: str | None = None) -> str:
    """Point MLflow tracking and registry at one absolute URI and return it.

    ``tracking_uri`` wins over ``MLFLOW_TRACKING_URI``, which wins over the embedded sqlite default.
    """
    uri = _absolute(tracking_uri or os.environ.get(ENV_VAR) or default_tracking_uri())
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one log line per event, no bars
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return uri


def current_uri() -> str:
    """The tracking URI MLflow uses now."""
    return mlflow.get_tracking_uri()


def ensure_experiment(name: str) -> str:
    """Id of experiment ``name``, created with the store's artifact root if it does not exist yet."""
    client = MlflowClient()
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
