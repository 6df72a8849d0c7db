"""Registry round trips with the real predictors: train a tiny model -> registered version with alias ->
``predict_kernels`` loads it by alias -> the same predictions as in memory. Once on a throwaway sqlite
store, once through a real ``mlflow server`` started here on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from tests.registry.helpers import compose_job as _compose
from tests.registry.helpers import free_port, stop_group
from tests.registry.helpers import job_main as _job
from tilecast.data import load_kernels
from tilecast.paths import ROOT
from tilecast.predictors import PREDICTORS
from tilecast.predictors.rows import AMD_TRAINING_GPUS
from tilecast.registry import (
    RegistryError,
    alias_history,
    configure,
    forecast_from_registry,
    load_calibration,
    load_predictor,
    resolve_alias,
)
from tilecast.specs import get_gpu
from tilecast.training.train import TrainSpec, train_family

FAMILY = "bmm"
TINY = {"rounds": 20, "max_depth": 4, "tile_chooser": "nearest"}  # seconds, not minutes
SPEC = TrainSpec("xgboost", TINY, families=(FAMILY,), experiment="registry-test", max_rows=400,
                 logo=False)
L4, T4 = get_gpu("l4"), get_gpu("tesla_t4")


def _kernel_rows(n: int = 12, seed: int = 0) -> pd.DataFrame:
    """Shuffled bmm test rows on several GPUs plus one row of an op no predictor covers."""
    rows = load_kernels("test", "bmm").sample(n, random_state=seed)[["OPName", "B", "M", "N", "K", "Device", "Latency"]]
    odd = pd.DataFrame([{"OPName": "conv2d", "B": 1, "M": 1, "N": 1, "K": 1, "Device": T4.device_name, "Latency": 1.0}])
    rows = pd.concat([rows.iloc[: n // 2], odd, rows.iloc[n // 2:]], ignore_index=True)
    return rows.assign(tag=[f"r{i}" for i in range(len(rows))])


@pytest.fixture(scope="module", autouse=True)
def server_boot(tmp_path_factory):
    """Start ``mlflow server`` (own sqlite store, proxied artifacts) on a free loopback port when this module
    starts, so it boots while the sqlite tests run; stopped when the module ends."""
    if shutil.which("mlflow") is None:
        yield None
        return
    root = tmp_path_factory.mktemp("server")
    port = free_port()
    with open(root / "server.log", "w") as log_file:
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        proc = subprocess.Popen(["mlflow", "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                                 "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1",
                                 "--port", str(port), "--workers", "1"],
                                stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            yield proc, f"http://127.0.0.1:{port}", root
        finally:
            stop_group(proc)


@pytest.fixture
def mlflow_server(server_boot):
    """The server's URL and root directory once ``/health`` answers."""
    if server_boot is None:
        pytest.skip("the mlflow CLI is not installed")
    proc, url, root = server_boot
    deadline = time.monotonic() + 240
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return url, root
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"mlflow server did not come up:\n{(root / 'server.log').read_text()[-3000:]}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def trained(sqlite_uri):
    """A tiny xgboost bmm model trained, logged and registered (@challenger) in the sqlite store."""
    configure(sqlite_uri)
    return train_family(SPEC, FAMILY, config_yaml="predictor: xgboost\n")


def test_training_run_is_traceable(sqlite_store, trained):
    client = MlflowClient()
    run = client.get_run(trained.run_id)
    tags, metrics, params = run.data.tags, run.data.metrics, run.data.params
    assert tags["tilecast.git_commit"] and tags["tilecast.data_hash"] and tags["tilecast.train_rows_hash"]
    assert params["predictor"] == "xgboost" and params["family"] == FAMILY and int(params["train_rows"]) < 400
    train_gpus = {get_gpu(d).key for d in load_kernels("train", "bmm")["Device"].unique()} | set(AMD_TRAINING_GPUS)
    assert {k.split(".", 1)[1] for k in metrics if k.startswith("val_mape_pct.")} == train_gpus
    assert {"unseen_mape_pct.l4", "unseen_mape_pct.a100_pcie_80gb", "unseen_mape_pct", "fit_s"} <= set(metrics)
    assert all(np.isfinite(v) and v >= 0 for v in metrics.values())
    files = {f.path for f in client.list_artifacts(trained.run_id, "plots")}
    assert files == {"plots/parity.png"}
    png = Path(mlflow.artifacts.download_artifacts(run_id=trained.run_id, artifact_path="plots/parity.png"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = mlflow.artifacts.download_artifacts(run_id=trained.run_id, artifact_path="config/config.yaml")
    assert Path(config).read_text() == "predictor: xgboost\n"
    mv = client.get_model_version(trained.model, trained.version)
    assert mv.run_id == trained.run_id and mv.tags["tilecast.predictor"] == "xgboost"
    aliases = client.get_registered_model("tilecast-bmm").aliases
    assert str(aliases["challenger"]) == str(aliases["xgboost"]) == trained.version
    move = alias_history("tilecast-bmm", "challenger")[-1]
    assert move.to_version == trained.version and move.metrics["val_mape_pct"] == metrics["val_mape_pct"]


def test_load_by_alias_gives_the_in_memory_predictions(sqlite_store, trained):
    rows = _kernel_rows().query("OPName == 'bmm'")
    expected = trained.predictor.predict_ms(rows)
    loaded = load_predictor(FAMILY, "champion")  # no champion yet: falls back to the challenger
    assert loaded.resolved.fell_back and loaded.resolved.alias == "challenger"
    assert str(loaded.version.version) == trained.version
    np.testing.assert_allclose(loaded.predictor.predict_ms(rows), expected, rtol=1e-12)
    np.testing.assert_allclose(loaded.predictor.predict_ms(rows, L4), trained.predictor.predict_ms(rows, L4),
                               rtol=1e-12)
    served = mlflow.pyfunc.load_model(loaded.resolved.uri)  # the servable pyfunc gives the same numbers
    np.testing.assert_allclose(served.predict(rows)["pred_ms"].to_numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(served.predict(rows.drop(columns="Device"), params={"gpu": "l4"})["pred_ms"],
                               trained.predictor.predict_ms(rows, L4), rtol=1e-12)


def test_predict_kernels_job_uses_the_registry(sqlite_store, trained, tmp_path):
    rows = _kernel_rows()
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    rows.to_csv(src, index=False)
    env = {**os.environ, "MLFLOW_TRACKING_URI": sqlite_store}
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict_kernels.py"), f"input={src}",
                           f"output={out}"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = pd.read_csv(out)
    assert list(got.columns) == [*rows.columns, "pred_ms", "error"]
    assert got["tag"].tolist() == rows["tag"].tolist()
    odd = (rows["OPName"] == "conv2d").to_numpy()
    assert (got["error"].fillna("") != "").tolist() == odd.tolist()
    assert got["pred_ms"].isna().to_numpy().tolist() == odd.tolist()
    np.testing.assert_allclose(got["pred_ms"][~odd], trained.predictor.predict_ms(rows[~odd]), rtol=1e-9)
    log = proc.stdout + proc.stderr
    assert "conv2d" in log and "no @champion yet" in log and f"tilecast-bmm v{trained.version}" in log
    assert not (tmp_path / "mlruns").exists()  # the store is where the URI says, not under the cwd


def test_missing_model_or_alias_names_the_train_command(sqlite_store, trained):
    with pytest.raises(RegistryError, match=r"python jobs/train.py families=\[linear\]"):
        resolve_alias("linear", "champion")
    with pytest.raises(RegistryError, match=r"no alias @nightly .*python jobs/train.py families=\[bmm\] alias=nightly"):
        resolve_alias("bmm", "nightly")
    rows = pd.concat([_kernel_rows(4), pd.DataFrame([{"OPName": "linear", "B": 1, "M": 8, "N": 8, "K": 8,
                                                      "Device": T4.device_name}])], ignore_index=True)
    with pytest.raises(RegistryError, match=r"families=\[linear\]"):
        forecast_from_registry(rows)


@pytest.fixture(scope="module")
def calibrated(sqlite_uri, trained, tmp_path_factory):
    """``jobs/calibrate.py gpu=l4`` run on 15 bmm kernels measured on L4; returns the stored calibration."""
    configure(sqlite_uri)
    assert load_calibration("l4") is None
    measured = load_kernels("test", "bmm").query("Device == @L4.device_name").sample(15, random_state=1)
    path = tmp_path_factory.mktemp("calibrate") / "l4.csv"
    measured.to_csv(path, index=False)
    cfg = _compose("calibrate", ["gpu=l4", f"measurements={path}", f"mlflow.tracking_uri={sqlite_uri}"])
    assert cfg.alias == "champion" and cfg.mlflow.experiment == "tilecast-calibration"
    _job("calibrate")(cfg)
    return load_calibration("l4")


def test_calibration_is_stored_versioned_and_applied(sqlite_store, trained, calibrated):
    saved = calibrated
    assert saved.label == f"tilecast-calibration-l4 v{saved.version}"
    fc = saved.families[FAMILY]
    assert (fc.base_model, fc.base_version, fc.rows) == ("tilecast-bmm", trained.version, 15)
    assert fc.metrics["mape_after_pct"] <= fc.metrics["mape_before_pct"] + 1e-9
    assert alias_history("tilecast-calibration-l4", "current")[-1].to_version == saved.version

    rows = _kernel_rows(10, seed=4).assign(Device=lambda d: np.where(np.arange(len(d)) % 2 == 0, L4.device_name,
                                                                     T4.device_name))
    result = forecast_from_registry(rows, alias="champion")
    on_l4 = ((rows["Device"] == L4.device_name) & (rows["OPName"] == "bmm")).to_numpy()
    assert result.table["calibration"].tolist() == [saved.label if m else "" for m in on_l4]
    assert result.calibrations == {"l4": saved.label}
    known = (rows["OPName"] == "bmm").to_numpy()
    raw = trained.predictor.predict_ms(rows[known])
    expect = np.where(on_l4[known], fc.calibration.apply(raw, rows[known]), raw)
    np.testing.assert_allclose(result.table["pred_ms"][known], expect, rtol=1e-12)
    plain = forecast_from_registry(rows, calibrate=False)
    assert "calibration" not in plain.table
    np.testing.assert_allclose(plain.table["pred_ms"][known], raw, rtol=1e-12)


def test_train_job_composes_and_registers(sqlite_store, trained, calibrated):
    cfg = _compose("train", [f"families=[{FAMILY}]", "max_rows=300", "mlflow.experiment=registry-test",
                             f"mlflow.tracking_uri={sqlite_store}",
                             *[f"++predictor.params.{k}={v}" for k, v in TINY.items()]])
    assert cfg.predictor.name == "xgboost" and cfg.mlflow.experiment == "registry-test"
    _job("train")(cfg)
    versions = MlflowClient().search_model_versions("name = 'tilecast-bmm'")
    newest = max(versions, key=lambda v: int(v.version))
    assert int(newest.version) > int(trained.version)
    assert str(MlflowClient().get_registered_model("tilecast-bmm").aliases["challenger"]) == str(newest.version)
    # the l4 calibration was fitted against the previous version: reported, not applied
    rows = _kernel_rows(6).assign(Device=L4.device_name)
    result = forecast_from_registry(rows, alias="challenger")
    assert "calibration" not in result.table and result.calibrations == {}
    assert any("not applied" in note and "calibrate.py gpu=l4" in note for note in result.notes)


@pytest.mark.parametrize("name", ["xgboost", "mlp", "roofline"])
def test_predictor_configs_are_accepted_by_the_predictors(name):
    cfg = _compose("train", [f"predictor={name}"])
    assert cfg.predictor.name == name and name in PREDICTORS
    params = dict(cfg.predictor.get("params") or {})
    known = getattr(sys.modules[PREDICTORS[name].__module__], "DEFAULTS", {"floor_ms": 0.0})
    assert set(params) <= set(known), f"conf/predictor/{name}.yaml: unknown params {set(params) - set(known)}"


def test_round_trip_through_a_tracking_server(mlflow_server, tmp_path, monkeypatch):
    url, root = mlflow_server
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    try:
        assert configure() == url
        result = train_family(SPEC, FAMILY, config_yaml="server: true\n")
        assert (root / "artifacts").is_dir() and any((root / "artifacts").rglob("MLmodel"))
        rows = _kernel_rows(seed=7)
        src, out = tmp_path / "in.parquet", tmp_path / "out.csv"
        rows.to_parquet(src, index=False)
        cfg = _compose("predict_kernels", [f"input={src}", f"output={out}", f"mlflow.tracking_uri={url}"])
        _job("predict_kernels")(cfg)
        got = pd.read_csv(out)
        assert got["tag"].tolist() == rows["tag"].tolist()
        known = (rows["OPName"] == "bmm").to_numpy()
        np.testing.assert_allclose(got["pred_ms"][known], result.predictor.predict_ms(rows[known]), rtol=1e-9)
        assert got["pred_ms"][~known].isna().all()
        assert load_predictor(FAMILY, "challenger").version.version == result.version
    finally:
        mlflow.set_tracking_uri(before[0])
        mlflow.set_registry_uri(before[1])
