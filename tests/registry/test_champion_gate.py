"""Only promotion moves ``@champion`` (issue 17): ``jobs/train.py alias=champion`` is refused; ``promote.py
rollback=true`` run twice goes further back each time (never undoes the first rollback) and refuses when
nothing older is left; ``tilecast-forecaster@champion`` bundles exactly the family champions after each
rollback. Jobs run as a user runs them, against a throwaway sqlite store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from tilecast.paths import ROOT
from tilecast.predictors import fit_predictor
from tilecast.registry import log_predictor, move_alias
from tilecast.registry.aliases import alias_history
from tilecast.registry.forecaster import BUNDLE_TAG, FORECASTER_NAME, register_forecaster
from tilecast.registry.tracking import ENV_VAR, configure, ensure_experiment
from tilecast.training.promotion import PromotionRefused, alias_versions, rollback

FAMILY = "softmax"
EXAMPLE = pd.DataFrame([{"OPName": "softmax", "B": 64, "H": 512, "Device": "NVIDIA L4"}] * 2)


def _job(name: str, uri: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, ENV_VAR: uri}
    return subprocess.run([sys.executable, str(ROOT / "jobs" / f"{name}.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """``tilecast-softmax`` v1..v4 (roofline), ``@champion`` moved v1 -> v2 -> v4 (as three promotions would),
    and the forecaster bundling the champion."""
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    uri = configure(f"sqlite:///{tmp_path_factory.mktemp('champion') / 'mlflow.db'}")
    with mlflow.start_run(experiment_id=ensure_experiment("champion-test")):
        versions = [str(log_predictor(fit_predictor("roofline", FAMILY, None), EXAMPLE).version) for _ in range(4)]
    for v in (versions[0], versions[1], versions[3]):
        move_alias(f"tilecast-{FAMILY}", "champion", v, reason=f"test: promoted v{v}")
    register_forecaster({FAMILY: versions[3]}, "champion", reason="test")
    yield uri, versions
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def _forecaster_bundle() -> dict[str, str] | None:
    client = MlflowClient()
    version = client.get_registered_model(FORECASTER_NAME).aliases.get("champion")
    return None if version is None else json.loads(client.get_model_version(FORECASTER_NAME, version).tags[BUNDLE_TAG])


def test_train_refuses_to_set_the_champion(store):
    uri, _ = store
    proc = _job("train", uri, "families=[layernorm]", "max_rows=50", "predictor=roofline", "alias=champion")
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr
    assert "alias=champion" in errors[0] and "jobs/promote.py" in errors[0]
    assert MlflowClient().search_model_versions("name = 'tilecast-layernorm'") == []  # nothing trained


def test_rollback_twice_goes_further_back_and_keeps_the_forecaster_in_step(store):
    uri, (v1, v2, _, v4) = store
    assert alias_versions("champion", [FAMILY]) == {FAMILY: v4} and _forecaster_bundle() == {FAMILY: v4}
    for expected in (v2, v1):  # the job twice: v4 -> v2, then v2 -> v1 (not back to v4)
        proc = _job("promote", uri, f"families=[{FAMILY}]", "rollback=true")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert alias_versions("champion", [FAMILY]) == {FAMILY: expected}
        assert _forecaster_bundle() == {FAMILY: expected}  # the servable bundle follows the champions
    with pytest.raises(PromotionRefused, match="nothing older to restore"):  # v1 was the first champion
        rollback([FAMILY])
    assert alias_versions("champion", [FAMILY]) == {FAMILY: v1} and _forecaster_bundle() == {FAMILY: v1}
    history = alias_history(f"tilecast-{FAMILY}", "champion")
    assert [(m.from_version, m.to_version) for m in history] == [(None, v1), (v1, v2), (v2, v4), (v4, v2), (v2, v1)]
    assert [m.kind for m in history] == ["move", "move", "move", "rollback", "rollback"]
