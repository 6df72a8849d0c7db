"""One throwaway sqlite MLflow store shared by the registry tests (its first use costs ~10 s of migrations).

Every test that asks for ``sqlite_store`` gets MLflow pointed at it; the global URIs are restored after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import mlflow
import pytest

from tilecast.evaluation.labels import LabelSet, shipped_labels
from tilecast.registry.tracking import ENV_VAR, configure


@pytest.fixture(scope="session")
def sqlite_uri(tmp_path_factory) -> str:
    """``sqlite:///<tmp>/mlflow.db`` (artifacts go to ``<tmp>/artifacts``)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@contextlib.contextmanager
def pointed_at(uri: str) -> Iterator[str]:
    """MLflow tracking and registry at ``uri`` inside the block, the global URIs restored after."""
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    try:
        yield configure(uri)
    finally:
        mlflow.set_tracking_uri(before[0])
        mlflow.set_registry_uri(before[1])


@pytest.fixture
def sqlite_store(sqlite_uri, monkeypatch):
    """The shared sqlite store configured for tracking and registry during one test."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pointed_at(sqlite_uri) as uri:
        yield uri


@pytest.fixture(scope="module")
def module_store(tmp_path_factory, request):
    """A store of the test module's own (the shared one holds other tests' versions and aliases)."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    with pointed_at(f"sqlite:///{tmp_path_factory.mktemp(name) / 'mlflow.db'}") as uri:
        yield uri


@pytest.fixture(scope="module")
def few_labels():
    """A handful of shipped labels: inference, training, fused and 4-GPU, on training and unseen GPUs."""
    labels = shipped_labels().labels
    keep = labels["tag"].isin(["gpt2_large-inf-1024-4", "bert_large-train-512-2", "bert_large-inf-512-8-fusion",
                               "gpt2_large-train-1024-4-dp4"])
    return LabelSet(labels[keep].reset_index(drop=True), [], "shipped subset")
