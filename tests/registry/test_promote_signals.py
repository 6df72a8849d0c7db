"""Issue 27 item 3: a SIGTERM or SIGINT during ``promote`` is handled like a crash at every step: the job stops
(exit 128 + signal, one line), no run is left RUNNING, and the aliases agree with their recorded history, so a
later ``rollback=true`` undoes only moves that happened. Real signals (``TILECAST_CRASH_AT`` /
``TILECAST_CRASH_SIGNAL``: the job sends itself the signal at the named step) on real subprocess jobs, each on its
own copy of one store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from mlflow import MlflowClient

from tilecast.paths import ROOT
from tilecast.registry.aliases import alias_history
from tilecast.registry.forecaster import BUNDLE_TAG, FORECASTER_NAME, bundle_of
from tilecast.registry.models import model_name
from tilecast.tiles.ops import FP32_FAMILIES
from tilecast.training.promotion import PromotionPolicy, promote

from .conftest import pointed_at
from .helpers import trained

#: (step, signal): before the decision (nothing moves), inside the commit (it completes, then the job stops)
CASES = [("promote.scored", "TERM"), ("promote.moving", "TERM"), ("alias.recorded", "TERM"), ("alias.recorded", "INT"),
         ("promote.moved", "TERM"), ("promote.synced", "TERM")]


@pytest.fixture(scope="module")
def labels(few_labels, tmp_path_factory):
    """A label directory of four shipped labels (the suite promote scores: small, so each job takes seconds)."""
    root = tmp_path_factory.mktemp("labels")
    for row in few_labels.labels.itertuples():
        (root / row.device.replace(" ", "_")).mkdir(exist_ok=True)
        (root / row.device.replace(" ", "_") / f"{row.tag}.json").write_text(json.dumps({"e2e_latency": row.label_ms}))
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory, few_labels):
    """A store with v1 of every fp32 family at @champion and v2 at @challenger (roofline: they tie, so a promotion
    passes)."""
    root = tmp_path_factory.mktemp("signals") / "store"
    root.mkdir()
    with pointed_at(f"sqlite:///{root / 'mlflow.db'}"):
        trained(FP32_FAMILIES)
        promote(FP32_FAMILIES, PromotionPolicy(require_logo=False), labels=few_labels)
        trained(FP32_FAMILIES)
    return root


def _promote(store, tmp, labels, step: str, sig: str, *extra: str) -> tuple[subprocess.CompletedProcess, str]:
    copy = tmp / f"{step}-{sig}"
    shutil.copytree(store, copy)
    uri = f"sqlite:///{copy / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "TILECAST_CRASH_AT": step, "TILECAST_CRASH_SIGNAL": sig,
           "TILECAST_HOME": str(tmp / "home")}
    env.pop("TILECAST_TRACEBACK", None)
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "promote.py"), "require_logo=false",
                           f"labels_dir={labels}", *extra],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    return proc, uri


@pytest.fixture(scope="module")
def interrupted(store, labels, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(CASES, pool.map(lambda c: _promote(store, tmp, labels, *c), CASES), strict=True))


def _state(uri: str) -> tuple[dict[str, str | None], dict[str, str | None], list[str]]:
    """(champion per family, last recorded champion move per family, runs still RUNNING)."""
    client = MlflowClient(uri, uri)
    alias, recorded = {}, {}
    for fam in FP32_FAMILIES:
        name = model_name(fam)
        have = client.get_registered_model(name).aliases.get("champion")
        alias[fam] = None if have is None else str(have)
        moves = alias_history(name, "champion", client)
        recorded[fam] = moves[-1].to_version if moves else None
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return alias, recorded, [r.info.run_id for r in runs if r.info.status == "RUNNING"]


@pytest.mark.parametrize("step, sig", CASES)
def test_a_signal_at_any_step_leaves_alias_and_history_agreeing(interrupted, step, sig):
    proc, uri = interrupted[step, sig]
    code = {"TERM": 143, "INT": 130}[sig]
    assert proc.returncode == code, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: interrupted by SIG{sig}: stopped; what was recorded is whole (open MLflow runs closed "
                      f"FAILED, no alias moved halfway)"], proc.stderr[-3000:]
    alias, recorded, running = _state(uri)
    assert not running
    assert alias == recorded  # the alias is where its history says
    want = "1" if step == "promote.scored" else "2"  # before the decision nothing moves; inside, it completes
    assert set(alias.values()) == {want}, alias
    client = MlflowClient(uri, uri)
    served = client.get_registered_model(FORECASTER_NAME).aliases.get("champion")  # follows the family champions
    assert client.get_model_version(FORECASTER_NAME, served).tags[BUNDLE_TAG] == bundle_of(alias)
    promote_runs = client.search_runs([client.get_experiment_by_name("tilecast-promote").experiment_id],
                                      order_by=["attributes.start_time DESC"], max_results=1)
    assert promote_runs[0].info.status == ("FAILED" if step == "promote.scored" else "FINISHED")


def test_a_rollback_after_an_interrupted_promotion_undoes_only_what_happened(interrupted):
    _, uri = interrupted["alias.recorded", "TERM"]
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    env.pop("TILECAST_CRASH_AT", None)
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "promote.py"), "rollback=true"], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    alias, recorded, _ = _state(uri)
    assert alias == recorded and set(alias.values()) == {"1"}
