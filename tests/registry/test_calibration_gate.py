"""A calibration goes live only when it is sound (issue 17): bad measured rows are rejected by name; a
calibration must have enough distinct kernels, finite parameters and a better leave-one-out error than no
calibration, else it is refused (exit 2, one ``error:`` line, nothing stored); ``rollback=true`` restores the
previous calibration (or removes the only one), recorded; forecasts can be made without calibration. Jobs run
as a user runs them, on a throwaway sqlite store with a registered roofline ``tilecast-bmm``."""

from __future__ import annotations

import os
import subprocess
import sys

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient
from omegaconf import OmegaConf

from tests.registry.helpers import compose_job, run_job
from tilecast.data import load_kernels
from tilecast.paths import ROOT
from tilecast.pipelines.nightly import settings_from_config as nightly_settings
from tilecast.pipelines.score import prepare
from tilecast.pipelines.score import settings_from_config as score_settings
from tilecast.predictors import fit_predictor
from tilecast.registry import forecast_from_registry, load_calibration, log_predictor, move_alias
from tilecast.registry.aliases import alias_history
from tilecast.registry.tracking import ENV_VAR, configure, ensure_experiment
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FAMILIES
from tilecast.tiles.roofline import roofline_ms

L4 = get_gpu("l4")
COLUMNS = ["OPName", "B", "M", "N", "K", "Device", "Latency"]
CALIBRATION = "tilecast-calibration-l4"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A roofline ``tilecast-bmm`` v1 (@challenger) in a store of its own."""
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    uri = configure(f"sqlite:///{tmp_path_factory.mktemp('calibration-gate') / 'mlflow.db'}")
    example = pd.DataFrame([{"OPName": "bmm", "B": 2, "M": 64, "N": 64, "K": 64, "Device": L4.device_name}] * 2)
    with mlflow.start_run(experiment_id=ensure_experiment("calibration-gate")):
        mv = log_predictor(fit_predictor("roofline", "bmm", None), example)
    move_alias(mv.name, "challenger", mv.version, reason="test")
    yield uri
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def _measured(n: int = 15, seed: int = 1) -> pd.DataFrame:
    rows = load_kernels("test", "bmm").query("Device == @L4.device_name").drop_duplicates(["B", "M", "N", "K"])
    return rows.sample(n, random_state=seed)[COLUMNS].reset_index(drop=True)


def _csv(tmp_path, rows: pd.DataFrame, name: str = "l4.csv"):
    path = tmp_path / name
    rows.to_csv(path, index=False)
    return path


def _run_in_process(capsys, uri: str, *overrides: str) -> tuple[int, str, str]:
    """The calibrate job's main on a composed config: (exit status, stdout, stderr)."""
    return run_job("calibrate", capsys, ["gpu=l4", f"mlflow.tracking_uri={uri}", *overrides])


def _one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def _nothing_stored() -> bool:
    return not MlflowClient().search_registered_models(f"name = '{CALIBRATION}'")


def test_a_non_numeric_dimension_is_refused_by_name(store, tmp_path):
    rows = _measured().astype({"M": object})
    rows.loc[3, "M"] = "x"
    path = _csv(tmp_path, rows)
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "calibrate.py"), "gpu=l4", f"measurements={path}"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, ENV_VAR: store},
                          timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    error = _one_error(proc.stderr)
    assert str(path) in error and "row 3" in error and "M='x'" in error
    assert "nan%" not in proc.stdout and _nothing_stored()


def test_bad_values_are_each_named(store, tmp_path, capsys):
    rows = _measured().astype({"M": float, "N": float, "K": float})
    bad = {2: ("M", 0), 4: ("K", -3), 5: ("N", 1.5), 6: ("Latency", 0.0), 7: ("Latency", -1.0), 8: ("Latency", np.nan),
           9: ("Latency", np.inf), 10: ("Latency", 1e30)}
    for i, (col, value) in bad.items():
        rows.loc[i, col] = value
    status, out, err = _run_in_process(capsys, store, f"measurements={_csv(tmp_path, rows)}")
    assert status == 2, out + err
    error = _one_error(err)
    for i, (col, _) in bad.items():
        assert f"row {i}: {col}=" in error, error
    assert "Latency=1e+30" in error and "absurd" in error
    assert _nothing_stored()


@pytest.mark.parametrize("case, why", [
    ("one row", "distinct"),
    ("20 copies of one row", "distinct"),
    ("already exact", "does not improve"),
    ("too few for the configured minimum", "distinct"),
])
def test_a_calibration_that_fails_the_gate_is_not_stored(store, tmp_path, capsys, case, why):
    rows, extra = _measured(), []
    if case == "one row":
        rows = rows.head(1)
    elif case == "20 copies of one row":
        rows = pd.concat([rows.head(1)] * 20, ignore_index=True)
    elif case == "already exact":  # the roofline predictor already forecasts these exactly: nothing to correct
        rows = rows.assign(Latency=roofline_ms(rows, L4))
    else:
        extra = ["gate.min_distinct_rows=16"]
    status, out, err = _run_in_process(capsys, store, f"measurements={_csv(tmp_path, rows)}", *extra)
    assert status == 2, out + err
    error = _one_error(err)
    assert "refused" in error and why in error and "bmm" in error and "nothing stored" in error
    assert _nothing_stored()


def test_a_sound_calibration_is_stored_and_can_be_rolled_back(store, tmp_path, capsys):
    status, out, err = _run_in_process(capsys, store, f"measurements={_csv(tmp_path, _measured(15, 1), 'a.csv')}")
    assert status == 0, err[-3000:]
    assert "leave-one-out" in out and "nan" not in out
    first = load_calibration("l4")
    fc = first.families["bmm"]
    assert fc.metrics["mape_loo_pct"] < fc.metrics["mape_before_pct"] and fc.calibration.non_finite() == []
    status, out, err = _run_in_process(capsys, store, f"measurements={_csv(tmp_path, _measured(15, 2), 'b.csv')}")
    assert status == 0, err[-3000:]
    second = load_calibration("l4")
    assert int(second.version) == int(first.version) + 1

    # forecasts with and without the calibration (predict_kernels / predict / score: calibrate=false)
    rows = _measured(6, 3)
    assert forecast_from_registry(rows).calibrations == {"l4": second.label}
    plain = forecast_from_registry(rows, calibrate=False)
    assert plain.calibrations == {} and np.allclose(plain.table["pred_ms"], roofline_ms(rows, L4))

    # the job rolls back, as a user runs it: @current is the previous calibration again
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "calibrate.py"), "gpu=l4", "rollback=true"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, ENV_VAR: store},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"v{second.version} -> v{first.version}" in proc.stdout
    assert load_calibration("l4").version == first.version
    # a second rollback goes further back: there was no calibration before the first one, so none applies now
    status, out, err = _run_in_process(capsys, store, "rollback=true")
    assert status == 0, err[-3000:]
    assert load_calibration("l4") is None and forecast_from_registry(rows).calibrations == {}
    status, out, err = _run_in_process(capsys, store, "rollback=true")
    assert status == 2 and "nothing" in _one_error(err)
    kinds = [(m.kind, m.to_version) for m in alias_history(CALIBRATION, "current")]
    assert kinds == [("move", first.version), ("move", second.version), ("rollback", first.version),
                     ("rollback", None)]


@pytest.mark.parametrize("job", ["predict", "predict_kernels", "score", "nightly"])
def test_every_forecasting_job_can_run_without_calibration(job):
    overrides = {"predict": ["model=gpt2_large", "gpu=l4", "batch=1", "seq_len=8"],
                 "predict_kernels": ["input=x.csv", "output=y.csv"]}.get(job, [])
    assert compose_job(job, overrides).calibrate is True  # stored calibrations apply by default
    assert compose_job(job, [*overrides, "calibrate=false"]).calibrate is False


def test_score_and_nightly_pin_predictors_without_calibration(store):
    """``calibrate=false`` reaches the pinned predictor source every Dask worker loads (score and nightly)."""
    settings = {}
    for job in ("score", "nightly"):
        for flag in (True, False):
            cfg = OmegaConf.to_container(compose_job(job, [f"mlflow.tracking_uri={store}", f"calibrate={flag}"]),
                                         resolve=True)
            settings[job, flag] = score_settings(cfg) if job == "score" else nightly_settings(cfg).score
            assert settings[job, flag].calibrate is flag
    example = pd.DataFrame([{"OPName": "add", "B": 2, "H": 64, "M": 64, "N": 64, "K": 64, "tokens": 64, "hidden": 64,
                             "inter": 64, "topk": 2, "experts": 8, "moe_tp": 1, "moe_ep": 1,
                             "Device": L4.device_name}] * 2)  # every family's dims (moe's own)
    with mlflow.start_run(experiment_id=ensure_experiment("calibration-gate")):
        for fam in FAMILIES:
            if fam != "bmm":
                mv = log_predictor(fit_predictor("roofline", fam, None), example.assign(OPName=fam))
                move_alias(mv.name, "challenger", mv.version, reason="test")
    for (_, flag), s in settings.items():
        assert prepare(s).source.calibrate is flag
