"""Alias moves are recorded: from/to version, time, reason and metrics, oldest first."""

from __future__ import annotations

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from tilecast.registry.aliases import HISTORY_PREFIX, alias_history, move_alias
from tilecast.registry.tracking import ensure_experiment


def _versions(name: str, n: int) -> list[str]:
    client = MlflowClient()
    client.create_registered_model(name)
    out = []
    with mlflow.start_run(experiment_id=ensure_experiment("alias-test")) as run:
        mlflow.log_text("x", "m/x.txt")
    for _ in range(n):
        mv = client.create_model_version(name, source=f"{run.info.artifact_uri}/m", run_id=run.info.run_id)
        out.append(str(mv.version))
    return out


def _aliases(name: str) -> dict[str, str]:
    return {a: str(v) for a, v in MlflowClient().get_registered_model(name).aliases.items()}


def test_moves_are_recorded_in_order(sqlite_store):
    name = "alias-history-test"
    v1, v2, v3 = _versions(name, 3)
    first = move_alias(name, "champion", v1, reason="first", metrics={"unseen_mape_pct": 20.0})
    move_alias(name, "challenger", v3, reason="trained")
    second = move_alias(name, "champion", v2, reason="better", metrics={"unseen_mape_pct": 12.5})
    assert (first.from_version, first.to_version, first.seq) == (None, v1, 1)
    assert (second.from_version, second.to_version, second.seq) == (v1, v2, 3)
    client = MlflowClient()
    assert _aliases(name) == {"champion": v2, "challenger": v3}
    history = alias_history(name, "champion")
    assert [(m.from_version, m.to_version, m.reason) for m in history] == [(None, v1, "first"), (v1, v2, "better")]
    assert history[1].metrics == {"unseen_mape_pct": 12.5}
    assert history[1].time_utc >= history[0].time_utc
    assert [m.alias for m in alias_history(name)] == ["champion", "challenger", "champion"]
    tags = client.get_registered_model(name).tags
    assert sorted(k for k in tags if k.startswith(HISTORY_PREFIX)) == [f"{HISTORY_PREFIX}00000{i}" for i in (1, 2, 3)]
    assert "tilecast.alias.champion.removed_at" in client.get_model_version(name, v1).tags
    assert "tilecast.alias.champion.set_at" in client.get_model_version(name, v2).tags


def test_unknown_version_moves_nothing(sqlite_store):
    name = "alias-missing-version-test"
    (v1,) = _versions(name, 1)
    move_alias(name, "champion", v1, reason="first")
    with pytest.raises(MlflowException):
        move_alias(name, "champion", "99", reason="no such version")
    assert _aliases(name) == {"champion": v1}
    assert len(alias_history(name)) == 1
