"""The servable forecaster: registered, served with ``mlflow models serve`` on loopback, queried over HTTP."""

from __future__ import annotations

import json
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
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, ErrorCode

from tests.registry.helpers import free_port, stop_group
from tilecast.forecast import forecast
from tilecast.forecast.intervals import DEFAULT_LEVEL, record_interval
from tilecast.registry.forecaster import (
    DEFAULT_MAX_ROWS,
    FORECASTER_NAME,
    INTERVAL_COLUMNS,
    MAX_ROWS_ENV,
    OUTPUT_COLUMNS,
    as_family_predictor,
    find_forecaster,
    forecast_rows,
    max_rows,
    predictors_from_versions,
    register_forecaster,
)
from tilecast.registry.tracking import ENV_VAR, configure
from tilecast.tiles.ops import FAMILIES
from tilecast.training.train import TrainSpec, train

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
    results = train(TrainSpec(predictor="roofline", families=FAMILIES, max_rows=200, experiment="test-train",
                              logo=False))
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
    # the interval is predict.py's (one source of truth), null where the row failed
    want = record_interval(forecast("gpt2_large", "l4", 2, 256, "inference", predict=predict).to_dict(), "l4")
    assert {c: out.loc[0, c] for c in INTERVAL_COLUMNS} == pytest.approx({c: want[c] for c in INTERVAL_COLUMNS})
    for i in (1, 2, 3):
        assert out.loc[i, list(INTERVAL_COLUMNS)].isna().all()


def _strict(constant: str):
    raise ValueError(f"bare {constant} in the answer: not JSON")


def _post(url: str, payload: dict) -> dict:
    """POST ``payload``; the answer parsed as strict JSON (a bare NaN / Infinity fails)."""
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read(), parse_constant=_strict)


def test_served_over_http(registered, tmp_path):
    uri, versions, _ = registered
    port = free_port()
    env = {**os.environ, ENV_VAR: uri, MAX_ROWS_ENV: str(len(ROWS))}
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
        assert got[1]["e2e_ms"] is None and got[1]["ms_comm"] is None  # null, never a bare NaN
        assert "unknown GPU 'NVIDIA L5'" in got[2]["error"]
        assert "num_heads=20" in got[3]["error"]
        assert got[4]["error"] == "" and got[4]["e2e_ms"] > 0 and got[4]["ms_comm"] > 0
        assert got[5]["fused"] is True and got[5]["e2e_ms"] < got[0]["e2e_ms"]
        assert got[0]["pred_lo_ms"] <= got[0]["e2e_ms"] <= got[0]["pred_hi_ms"]
        assert got[0]["interval_note"].startswith("80% interval")
        assert got[1]["pred_lo_ms"] is None and got[1]["pred_hi_ms"] is None and got[1]["interval_note"] is None
        url = f"http://127.0.0.1:{port}/invocations"
        wide = _post(url, {"dataframe_records": [GOOD], "params": {"interval_level": 0.95}})["predictions"][0]
        assert wide["pred_lo_ms"] < got[0]["pred_lo_ms"] and wide["pred_hi_ms"] > got[0]["pred_hi_ms"]
        assert wide["interval_note"].startswith("95% interval")
        with pytest.raises(urllib.error.HTTPError) as bad:
            _post(url, {"dataframe_records": [GOOD], "params": {"interval_level": 1.5}})
        assert bad.value.code == 400
        assert "interval_level=1.5 must be a number in [0.5, 0.99]" in json.loads(bad.value.read())["message"]
        with pytest.raises(urllib.error.HTTPError) as exc:  # one row over the cap: refused whole, a 4xx
            _post(f"http://127.0.0.1:{port}/invocations", {"dataframe_records": [*ROWS, GOOD]})
        assert exc.value.code == 400
        body = json.loads(exc.value.read(), parse_constant=_strict)
        assert f"{len(ROWS) + 1} rows in one request; at most {len(ROWS)} ({MAX_ROWS_ENV}" in body["message"]
    finally:
        stop_group(proc, timeout_s=20)


def test_the_pyfunc_answers_strict_json_equal_to_one_forecast_per_row(registered, monkeypatch):
    """The served pyfunc as ``mlflow models serve`` loads it: rows that fail carry null (no bare NaN), and the
    batched answer of a request with repeated rows equals forecasting each row on its own."""
    _, versions, _ = registered
    monkeypatch.delenv(MAX_ROWS_ENV, raising=False)
    model = mlflow.pyfunc.load_model(f"models:/{FORECASTER_NAME}@champion")
    rows = pd.DataFrame([{**r, "parallel": r.get("parallel", ""), "fused": str(r.get("fused", False)).lower()}
                         for r in ROWS * 3])
    got = model.predict(rows)
    records = json.loads(json.dumps(got.to_dict("records"), allow_nan=False))
    alone = forecast_rows(rows.iloc[: len(ROWS)], as_family_predictor(predictors_from_versions(versions)))
    for i, rec in enumerate(records):
        want = alone.iloc[i % len(ROWS)]
        assert rec["error"] == want["error"]
        if want["error"]:
            assert rec["e2e_ms"] is None and rec["ms_linear"] is None
            assert rec["pred_lo_ms"] is None and rec["pred_hi_ms"] is None and rec["interval_note"] is None
        else:
            assert rec["e2e_ms"] == pytest.approx(want["e2e_ms"], rel=1e-12)
            assert rec["pred_lo_ms"] == pytest.approx(want["pred_lo_ms"], rel=1e-12)
            assert rec["pred_hi_ms"] == pytest.approx(want["pred_hi_ms"], rel=1e-12)
            assert rec["interval_note"] == want["interval_note"]


def test_the_pyfunc_answers_intervals_at_the_asked_level(registered, monkeypatch):
    """Every answered row carries lo <= e2e <= hi at 80% (the signature says so), ``params={"interval_level":
    0.95}`` widens it, a level outside [0.5, 0.99] is a 400, and a GPU of a vendor trained on with few GPUs (AMD)
    or of a vendor never trained on (Intel) gets a wider interval that says why."""
    monkeypatch.delenv(MAX_ROWS_ENV, raising=False)
    model = mlflow.pyfunc.load_model(f"models:/{FORECASTER_NAME}@champion")
    signature = model.metadata.signature
    assert signature.outputs.input_names() == list(OUTPUT_COLUMNS)
    assert {p.name: p.default for p in signature.params.params} == {"interval_level": DEFAULT_LEVEL}
    rows = pd.DataFrame([GOOD, {**GOOD, "gpu": "mi300x"}, {**GOOD, "gpu": "tesla_t4", "mode": "training"},
                         {**GOOD, "gpu": "b60"}])
    at80, at95 = model.predict(rows), model.predict(rows, params={"interval_level": 0.95})
    assert (at80["error"] == "").all() and (at95["error"] == "").all()
    for got in (at80, at95):
        lo, pred, hi = (got[c].astype(float) for c in ("pred_lo_ms", "e2e_ms", "pred_hi_ms"))
        assert ((lo > 0) & (lo <= pred) & (pred <= hi)).all()
    assert (at95["pred_lo_ms"] <= at80["pred_lo_ms"]).all() and (at95["pred_hi_ms"] >= at80["pred_hi_ms"]).all()
    # strictly wider for inference (the training multiplier's 95% may sit at the top of the measured scores)
    assert (at95["pred_hi_ms"] / at95["pred_lo_ms"] > at80["pred_hi_ms"] / at80["pred_lo_ms"])[:2].all()
    assert at80["interval_note"].str.startswith("80% interval").all()
    assert at95["interval_note"].str.startswith("95% interval").all()
    width = at80["pred_hi_ms"].astype(float) / at80["pred_lo_ms"].astype(float)
    assert width[1] > width[0] and width[3] > width[1]  # MI300X (cdna3, far) > L4; Intel (no data) > MI300X
    assert "few GPUs of its vendor" in at80.loc[1, "interval_note"] and "AMD" in at80.loc[1, "interval_note"]
    assert "another vendor" in at80.loc[3, "interval_note"] and "intel GPU" in at80.loc[3, "interval_note"]
    assert "vendor" not in at80.loc[0, "interval_note"]
    for bad in (1.5, 0.3):
        with pytest.raises(MlflowException, match=rf"interval_level={bad} must be a number in \[0.5, 0.99\]") as exc:
            model.predict(rows, params={"interval_level": bad})
        assert exc.value.error_code == ErrorCode.Name(INVALID_PARAMETER_VALUE)
        assert exc.value.get_http_status_code() == 400
    with pytest.raises(MlflowException, match="interval_level") as exc:  # not a number: MLflow's own check
        model.predict(rows, params={"interval_level": "wide"})
    assert exc.value.get_http_status_code() == 400


def test_a_request_predicts_each_family_once_per_gpu(registered):
    """1,000 rows of 6 distinct workloads on 2 GPUs: one predictor call per family and GPU (it was one graph
    and five calls per row), and the same numbers as one ``forecast`` per row."""
    _, versions, _ = registered
    base = as_family_predictor(predictors_from_versions(versions))
    calls: list[tuple[str, str]] = []

    def counting(family, rows, gpu):
        calls.append((family, gpu.key))
        return base(family, rows, gpu)

    distinct = [{**GOOD, "gpu": g, "batch": b, "mode": m} for g in ("l4", "tesla_t4") for b in (1, 2)
                for m in ("inference", "training")][:6]
    rows = pd.DataFrame([distinct[i % len(distinct)] for i in range(1000)])
    out = forecast_rows(rows, counting)
    assert (out["error"] == "").all()
    assert len(calls) == len(set(calls)) and {g for _, g in calls} == {"l4", "tesla_t4"}
    for i, w in enumerate(distinct):
        fc = forecast(w["model"], w["gpu"], w["batch"], w["seq_len"], w["mode"], predict=base)
        assert out.loc[i, "e2e_ms"] == pytest.approx(fc.e2e_ms, rel=1e-12)
        assert out.loc[i + len(distinct), "e2e_ms"] == out.loc[i, "e2e_ms"]


def test_the_row_cap_is_a_400_and_is_configurable(registered, monkeypatch):
    monkeypatch.setenv(MAX_ROWS_ENV, "4")
    model = mlflow.pyfunc.load_model(f"models:/{FORECASTER_NAME}@champion")
    assert len(model.predict(pd.DataFrame([GOOD] * 4))) == 4
    with pytest.raises(MlflowException, match=rf"5 rows in one request; at most 4 \({MAX_ROWS_ENV}") as exc:
        model.predict(pd.DataFrame([GOOD] * 5))
    assert exc.value.get_http_status_code() == 400
    assert max_rows({}) == DEFAULT_MAX_ROWS
    for bad in ("abc", "0", "-3"):
        with pytest.raises(ValueError, match=f"{MAX_ROWS_ENV}='{bad}' must be a whole number"):
            max_rows({MAX_ROWS_ENV: bad})


def test_batch_must_be_a_whole_number(registered):
    _, versions, _ = registered
    out = forecast_rows(pd.DataFrame([{**GOOD, "batch": 2.7}, {**GOOD, "batch": 2.0}]),
                        as_family_predictor(predictors_from_versions(versions)))
    assert out.loc[0, "error"] == "UserError: batch=2.7 is not an integer" and out.loc[1, "error"] == ""
