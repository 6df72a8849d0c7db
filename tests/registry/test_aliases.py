"""Alias moves are recorded: from/to version, time, reason and metrics, oldest first."""

from __future__ import annotations

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from tilecast.registry.aliases import (
    HISTORY_PREFIX,
    AliasMove,
    NothingToRollBack,
    alias_history,
    move_alias,
    roll_back,
    rollback_target,
)
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
    keys = [m.key for m in alias_history(name)]  # one uniquely named tag per move, in the history's order
    assert sorted(k for k in tags if k.startswith(HISTORY_PREFIX)) == keys and len(set(keys)) == 3
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


def test_a_second_rollback_goes_further_back(sqlite_store):
    """v1 -> v2 -> v4; rollback: v2; rollback: v1 (never back to v4); then nothing older: refused."""
    name = "alias-rollback-test"
    v1, v2, _, v4 = _versions(name, 4)
    for v in (v1, v2, v4):
        move_alias(name, "champion", v, reason=f"promote v{v}")
    assert roll_back(name, "champion", reason="test").describe() == f"v{v4} -> v{v2}"
    assert _aliases(name) == {"champion": v2}
    assert roll_back(name, "champion", reason="test").describe() == f"v{v2} -> v{v1}"
    assert _aliases(name) == {"champion": v1}
    with pytest.raises(NothingToRollBack, match="first champion"):
        roll_back(name, "champion", reason="test")
    assert _aliases(name) == {"champion": v1}
    history = alias_history(name, "champion")
    assert [m.kind for m in history] == ["move", "move", "move", "rollback", "rollback"]
    assert history[-1].undoes == history[1].key  # the second rollback undid v1 -> v2
    # a promotion after the rollbacks, then a rollback: back to v1 again
    move_alias(name, "champion", v4, reason="promote again")
    assert roll_back(name, "champion", reason="test").to_version == v1
    # allow_remove: the first move is undone by removing the alias (a calibration with nothing before it)
    removed = roll_back(name, "champion", reason="test", allow_remove=True)
    assert removed.to_version is None and "champion" not in _aliases(name)
    with pytest.raises(NothingToRollBack, match="no recorded move left"):
        roll_back(name, "champion", reason="test", allow_remove=True)


def test_rollback_target_replays_the_history_as_a_stack():
    def mv(key, frm, to, kind="move", undoes="", reason="r"):
        return AliasMove("m", "a", frm, to, "t", reason, kind=kind, undoes=undoes, key=key)

    a, b, c = mv("k1", None, "1"), mv("k2", "1", "2"), mv("k3", "2", "4")
    assert rollback_target([a, b, c]) is c
    assert rollback_target([a, b, c, mv("k4", "4", "2", "rollback", "k3")]) is b
    assert rollback_target([a, b, c, mv("k4", "4", "2", "rollback", "k3"), mv("k5", "2", "1", "rollback", "k2")]) is a
    assert rollback_target([a, mv("k2", "1", None, "rollback", "k1")]) is None
    # a history written before rollbacks were marked: its rollback (by reason) undid the last move
    assert rollback_target([a, b, mv("k3", "2", "1", reason="rollback of move #2 (v1 -> v2)")]) is a
    assert rollback_target([a, mv("k2", "1", "1")]) is a  # a move to the same version changes nothing


def test_histories_of_the_older_layout_are_read(sqlite_store):
    name = "alias-legacy-test"
    v1, v2 = _versions(name, 2)
    client = MlflowClient()
    old = {1: (None, v1, "first"), 2: (v1, v2, "better")}
    for seq, (frm, to, reason) in old.items():
        value = AliasMove(name, "champion", frm, to, f"2026-01-0{seq}T00:00:00+00:00", reason, seq=seq).to_json()
        client.set_registered_model_tag(name, f"{HISTORY_PREFIX}{seq:06d}", value)
    client.set_registered_model_alias(name, "champion", v2)
    move_alias(name, "champion", v1, reason="newer layout")
    history = alias_history(name, "champion")
    assert [(m.from_version, m.to_version, m.seq) for m in history] == [(None, v1, 1), (v1, v2, 2), (v2, v1, 3)]
