"""``jobs/calibrate.py model_runs=<label dir>``: a calibration is stored only if it makes the GPU's measured model
runs better forecast than spec-only; kernel measurements that disagree with the model runs are refused by name.
Real MLflow (a throwaway sqlite store with roofline predictors of every fp32 family), real label files."""

from __future__ import annotations

import json

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from tests.registry.helpers import run_job, trained
from tilecast.data import load_kernels
from tilecast.evaluation.labels import shipped_labels
from tilecast.registry import load_calibration
from tilecast.registry.tracking import configure
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FP32_FAMILIES

L4 = get_gpu("l4")
COLUMNS = ["OPName", "B", "M", "N", "K", "Device", "Latency"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    uri = configure(f"sqlite:///{tmp_path_factory.mktemp('calibration-runs') / 'mlflow.db'}")
    trained(FP32_FAMILIES, "roofline")
    yield uri
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    """L4's plain inference labels as label files (``NVIDIA_L4/<tag>.json``)."""
    root = tmp_path_factory.mktemp("runs")
    labels = shipped_labels().labels
    mine = labels[(labels["gpu"] == "l4") & (labels["variant"] == "plain") & (labels["mode"] == "inference")]
    (root / L4.label_dir).mkdir()
    for r in mine.itertuples(index=False):
        (root / L4.label_dir / f"{r.tag}.json").write_text(json.dumps({"e2e_latency": float(r.label_ms)}))
    return root


def measured(slower: float = 1.0):
    """L4's measured bmm and linear kernels (20 distinct shapes each), latencies times ``slower``."""
    parts = [load_kernels("test", op).query("Device == @L4.device_name").drop_duplicates(["B", "M", "N", "K"])
             .sample(20, random_state=0)[COLUMNS] for op in ("bmm", "linear")]
    rows = pd.concat(parts, ignore_index=True)
    return rows.assign(Latency=rows["Latency"] * slower)


def run(capsys, store, tmp_path, rows, *overrides):
    path = tmp_path / "measured.csv"
    rows.to_csv(path, index=False)
    return run_job("calibrate", capsys, ["gpu=l4", f"mlflow.tracking_uri={store}", f"measurements={path}",
                                         *overrides])


def test_kernels_that_agree_with_the_model_runs_are_stored_with_the_check(store, runs_dir, tmp_path, capsys):
    before = load_calibration("l4")
    status, out, err = run(capsys, store, tmp_path, measured(), f"model_runs={runs_dir}")
    assert status == 0, err[-3000:]
    saved = load_calibration("l4")
    assert saved is not None and (before is None or int(saved.version) > int(before.version))
    run_id = MlflowClient().get_model_version("tilecast-calibration-l4", saved.version).run_id
    r = MlflowClient().get_run(run_id)
    assert r.data.tags["tilecast.model_runs"] == "checked"
    m = r.data.metrics
    assert m["model_runs.labels"] == 7  # L4's plain inference labels
    assert m["model_runs.calibrated_mape_pct"] <= m["model_runs.spec_only_mape_pct"] - 0.5


def test_kernels_that_disagree_with_the_model_runs_are_refused(store, runs_dir, tmp_path, capsys):
    before = load_calibration("l4")
    # kernels measured 4x slower than they run inside the models: calibrating to them overshoots every run
    status, out, err = run(capsys, store, tmp_path, measured(4.0), f"model_runs={runs_dir}")
    assert status == 2, out + err
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "Traceback" not in err
    assert "disagree with its 7 model runs" in error[0] and "nothing stored" in error[0]
    after = load_calibration("l4")
    assert (before is None and after is None) or after.version == before.version


def test_without_model_runs_it_is_stored_unchecked(store, tmp_path, capsys, caplog):
    status, out, err = run(capsys, store, tmp_path, measured(4.0))
    assert status == 0, err[-3000:]
    assert "not checked against its model runs" in caplog.text
    saved = load_calibration("l4")
    run_id = MlflowClient().get_model_version("tilecast-calibration-l4", saved.version).run_id
    assert MlflowClient().get_run(run_id).data.tags["tilecast.model_runs"] == "unchecked"


def test_model_runs_of_another_gpu_are_refused_by_name(store, tmp_path, capsys):
    other = tmp_path / "other" / "Tesla_T4"
    other.mkdir(parents=True)
    (other / "bert_large-inf-512-8.json").write_text(json.dumps({"e2e_latency": 694.5}))
    status, out, err = run(capsys, store, tmp_path, measured(), f"model_runs={tmp_path / 'other'}")
    assert status == 2
    assert "no end-to-end label of l4" in err and "tesla_t4" in err
