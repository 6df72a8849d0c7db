"""One throwaway sqlite MLflow store shared by the registry tests (its first use costs ~10 s of migrations).

Every test that asks for ``sqlite_store`` gets MLflow pointed at it; the global URIs are restored after.
"""

from __future__ import annotations

import mlflow
import pytest

from tilecast.registry.tracking import ENV_VAR, configure


@pytest.fixture(scope="session")
def sqlite_uri(tmp_path_factory) -> str:
    """``sqlite:///<tmp>/mlflow.db`` (artifacts go to ``<tmp>/artifacts``)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def sqlite_store(sqlite_uri, monkeypatch):
    """The shared sqlite store configured for tracking and registry during one test."""
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    monkeypatch.delenv(ENV_VAR, raising=False)
    yield configure(sqlite_uri)
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])
