"""Tracking configuration: precedence, absolute URIs, artifact location beside the sqlite file."""

from __future__ import annotations

import os
from pathlib import Path

import mlflow
import pytest

from tilecast.paths import MLRUNS_DIR
from tilecast.registry.tracking import (
    ENV_VAR,
    configure,
    default_tracking_uri,
    ensure_experiment,
    local_artifact_root,
)


@pytest.fixture
def restore_uris():
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    yield
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def test_default_is_absolute_sqlite_under_mlruns():
    uri = default_tracking_uri()
    assert uri == f"sqlite:///{MLRUNS_DIR.resolve()}/mlflow.db"
    assert Path(uri.removeprefix("sqlite:///")).is_absolute()
    assert local_artifact_root(uri) == (MLRUNS_DIR.resolve() / "artifacts").as_uri()


def test_precedence_explicit_over_env_over_default(tmp_path, monkeypatch, restore_uris):
    env_db, arg_db = tmp_path / "env" / "e.db", tmp_path / "arg" / "a.db"
    env_db.parent.mkdir()
    arg_db.parent.mkdir()
    monkeypatch.setenv(ENV_VAR, f"sqlite:///{env_db}")
    assert configure(None, check=False) == f"sqlite:///{env_db}"
    assert mlflow.get_registry_uri() == f"sqlite:///{env_db}"
    assert configure(f"sqlite:///{arg_db}", check=False) == f"sqlite:///{arg_db}"
    assert mlflow.get_tracking_uri() == f"sqlite:///{arg_db}"
    monkeypatch.delenv(ENV_VAR)
    assert configure(check=False) == default_tracking_uri()


def test_relative_paths_become_absolute(tmp_path, monkeypatch, restore_uris):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()  # a store's directory must exist (a mistyped one is never created)
    assert configure("sqlite:///rel/store.db", check=False) == f"sqlite:///{tmp_path / 'rel' / 'store.db'}"
    assert configure("http://127.0.0.1:5000", check=False) == "http://127.0.0.1:5000"
    assert local_artifact_root("http://127.0.0.1:5000") is None
    with pytest.raises(ValueError, match="sqlite"):
        configure("sqlite://")


def test_experiment_artifacts_live_beside_the_db(sqlite_store, tmp_path, monkeypatch):
    db_dir = Path(sqlite_store.removeprefix("sqlite:///")).parent
    monkeypatch.chdir(tmp_path)  # another cwd (a Hydra run dir) must not move the artifacts
    exp_id = ensure_experiment("tracking-test")
    assert ensure_experiment("tracking-test") == exp_id
    location = mlflow.get_experiment(exp_id).artifact_location
    assert location == (db_dir / "artifacts" / "tracking-test").as_uri()
    with mlflow.start_run(experiment_id=exp_id):
        mlflow.log_text("x", "a.txt")
        uri = mlflow.get_artifact_uri("a.txt")
    assert Path(uri.removeprefix("file://")).read_text() == "x"
    assert not any(os.scandir(tmp_path))
