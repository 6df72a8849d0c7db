"""The servable forecaster: registered, served with ``mlflow models serve`` on loopback, queried over HTTP."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from tests.registry.helpers import free_port, stop_group
from tilecast.forecast import forecast
from tilecast.registry.forecaster import (
    FORECASTER_NAME,
    as_family_predictor,
    find_forecaster,
    forecast_rows,
    predictors_from_versions,
    register_forecaster,
)
from tilecast.registry.tracking import ENV_VAR, configure
from tilecast.registry.training import TrainSpec, train
from tilecast.tiles.ops import FAMILIES

GOOD = {"model": "gpt2_large", "gpu": "l4", "batch": 2, "seq_len": 256, "mode": "inference"}
ROWS = [GOOD,
        {"model": "gpt9", "gpu": "l4", "batch": 2, "seq_len": 256, "mode": "inference"},
        {"model": "bert_large", "gpu": "NVIDIA L5", "batch": 2, "seq_len": 128, "mode": "training"},
        {"model": "gpt2_large", "gpu": "NVIDIA A100-SXM4-40GB", "batch": 4, "seq_len": 128, "mode": "training",
         "parallel": "tp3", "fused": False},
        {"model": "bert_large", "gpu": "a100_sxm4_40gb", "batch": 8, "seq_len": 128, "mode": "training",
         "parallel": "dp4", "fused": False},
        {**GOOD, "fused": True}]


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    uri = configure(f"sqlite:///{tmp_path_factory.mktemp('forecaster') / 'mlflow.db'}")
    results = train(TrainSpec(predictor="roofline", families=FAMILIES, max_rows=200, experiment="test-train"))
    versions = {r.family: r.version for r in results}
    version = register_forecaster(versions, "champion", reason="test")
    yield uri, versions, version
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def test_rows_answer_or_carry_their_error(registered):
    _, versions, _ = registered
    predict = as_family_predictor(predictors_from_versions(versions))
    out = forecast_rows(pd.DataFrame(ROWS), predict)
    assert out.loc[0, "e2e_ms"] == pytest.approx(forecast("gpt2_large", "l4", 2, 256, "inference",
                                                          predict=predict).e2e_ms)
    assert "gpt2_large" in out.loc[1, "error"] and "unknown model 'gpt9'" in out.loc[1, "error"]
    assert "unknown GPU 'NVIDIA L5'" in out.loc[2, "error"] and "l4" in out.loc[2, "error"]
    assert "num_heads=20" in out.loc[3, "error"]
    assert out.loc[4, "error"] == "" and out.loc[4, "ms_comm"] > 0
    assert out.loc[5, "fused"] and out.loc[5, "e2e_ms"] < out.loc[0, "e2e_ms"]
    assert find_forecaster(versions) == registered[2]


def _post(url: str, payload: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def test_served_over_http(registered, tmp_path):
    uri, versions, _ = registered
    port = free_port()
    env = {**os.environ, ENV_VAR: uri}
    log = tmp_path / "serve.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "models", "serve", "-m",
                                 f"models:/{FORECASTER_NAME}@champion", "-h", "127.0.0.1", "-p", str(port),
                                 "--env-manager", "local", "-w", "1"], stdout=fh, stderr=subprocess.STDOUT, env=env,
                                cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert proc.poll() is None, Path(log).read_text()[-3000:]
            assert time.monotonic() < deadline, "server did not come up:\n" + Path(log).read_text()[-3000:]
            time.sleep(0.5)
        got = _post(f"http://127.0.0.1:{port}/invocations", {"dataframe_records": ROWS})["predictions"]
        assert len(got) == len(ROWS)
        predict = as_family_predictor(predictors_from_versions(versions))
        assert got[0]["e2e_ms"] == pytest.approx(forecast("gpt2_large", "l4", 2, 256, "inference",
                                                          predict=predict).e2e_ms, rel=1e-6)
        assert got[0]["error"] == "" and got[0]["fw_ms"] == pytest.approx(got[0]["e2e_ms"])
        assert "unknown model 'gpt9'" in got[1]["error"]
        assert got[1]["e2e_ms"] is None or math.isnan(got[1]["e2e_ms"])
        assert "unknown GPU 'NVIDIA L5'" in got[2]["error"]
        assert "num_heads=20" in got[3]["error"]
        assert got[4]["error"] == "" and got[4]["e2e_ms"] > 0 and got[4]["ms_comm"] > 0
        assert got[5]["fused"] is True and got[5]["e2e_ms"] < got[0]["e2e_ms"]
    finally:
        stop_group(proc, timeout_s=20)
