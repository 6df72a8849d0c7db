"""``jobs/plan.py`` end to end (roofline, a throwaway MLflow store, a small search): the plan printed and written
(CSV, JSON, PNG), logged as an MLflow run; re-forecasting the chosen configuration with ``predict.py`` gives the
same TTFT / TPOT / step time; an impossible service level exits 0 with feasible=false; bad input exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mlflow
import pandas as pd
import pytest

from tilecast.paths import ROOT

SERVE = ["model=llama31_8b", "isl=1024", "osl=256", "ttft_ms=2000", "tpot_ms=50", "gpus=[l4,h100_sxm_80gb]",
         "dtypes=[bf16,fp8]", "search.serve.tp=[1,2]", "search.serve.concurrency=[1,8,32]", "forecaster=roofline",
         "dask.n_workers=1"]
TRAIN = ["model=llama31_8b", "tokens=2e10", "days=10", "seq_len=2048", "global_batch=256",
         "gpus=[h100_sxm_80gb,a100_sxm4_80gb]", "search.train.n_gpus=[8,16]", "search.train.tp=[1,2]",
         "search.train.pp=[1]", "search.train.micro_batch=[1]", "forecaster=roofline", "dask.n_workers=1"]


def _run(job: str, args: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}", TILECAST_HOME=str(tmp_path))
    extra = [f"cache_dir={tmp_path / 'cache'}"] if job == "plan" else []
    return subprocess.run([sys.executable, str(ROOT / "jobs" / f"{job}.py"), *args, *extra], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=300)


def test_a_serving_plan_written_logged_and_reforecast(tmp_path):
    out = tmp_path / "plan.csv"
    proc = _run("plan", [*SERVE, "rate=5", f"output={out}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Plan: llama31_8b, 1,024 in / 256 out, 300 requests/min" in proc.stdout
    assert "runners-up, and why they lost:" in proc.stdout and "/ month" in proc.stdout
    table = pd.read_csv(out)
    assert list(table.columns[:15]) == ["gpu", "engine", "n_gpus", "dtype", "layout", "concurrency", "replicas",
                                        "ttft_ms", "tpot_ms", "ttft_hi_ms", "tpot_hi_ms", "tokens_per_s_per_gpu",
                                        "usd_per_month", "feasible", "why"]
    record = json.loads(out.with_suffix(".json").read_text())
    plan = record["plan"]
    assert record["feasible"] is True and plan["chosen"] and plan["gpu"] in ("l4", "h100_sxm_80gb")
    assert plan["engine"] in ("vllm", "sglang", "trtllm")
    assert record["search"]["candidates"] == 3 * 2 * 2 * 2 * 3 and record["pareto"]  # engines x GPUs x ...
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["plan"])
    assert len(runs) == 1 and runs["metrics.feasible"].iloc[0] == 1.0
    assert runs["metrics.plan.usd_per_month"].iloc[0] == pytest.approx(plan["usd_per_month"])
    assert runs["params.question.model"].iloc[0] == "llama31_8b"
    # the chosen configuration, re-forecast on its own by predict.py: the same TTFT and TPOT
    again = tmp_path / "again.json"
    proc = _run("predict", ["mode=serve", "model=llama31_8b", f"gpu={plan['gpu']}", f"dtype={plan['dtype']}",
                            f"tp={plan['tp']}", "isl=1024", "osl=256", f"concurrency={plan['concurrency']}",
                            f"engine={plan['engine']}",
                            "forecaster=roofline", f"output={again}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one = json.loads(again.read_text())
    assert one["ttft_ms"] == pytest.approx(plan["ttft_ms"], rel=1e-9)
    assert one["tpot_ms"] == pytest.approx(plan["tpot_ms"], rel=1e-9)
    assert one["tpot_hi_ms"] == pytest.approx(plan["tpot_hi_ms"], rel=1e-9)


def test_an_impossible_service_level_exits_0_with_feasible_false(tmp_path):
    out = tmp_path / "plan.csv"
    proc = _run("plan", [*SERVE[:3], "ttft_ms=1", "tpot_ms=0.05", *SERVE[5:], "rate=5", f"output={out}",
                         "log=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "feasible=false" in proc.stdout and "miss_pct" in proc.stdout
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["feasible"] is False and record["plan"] is None
    assert record["closest"] and all(r["miss_pct"] > 0 for r in record["closest"])


def test_a_training_plan_and_its_reforecast(tmp_path):
    out = tmp_path / "train.csv"
    proc = _run("plan", [*TRAIN, f"output={out}", "log=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = json.loads(out.with_suffix(".json").read_text())["plan"]
    assert plan["status"] == "meets" and plan["days_to_train_hi"] <= 10
    again = tmp_path / "again.json"
    ckpt = {"none": "none", "full": "full", "selective": "selective"}[plan["activation_checkpointing"]]
    proc = _run("predict", ["mode=train_run", "model=llama31_8b", f"gpu={plan['gpu']}", f"n_gpus={plan['n_gpus']}",
                            "seq_len=2048", f"micro_batch={plan['micro_batch']}", "global_batch=256",
                            f"sharding={plan['sharding']}", f"tp={plan['tp']}", f"pp={plan['pp']}",
                            f"activation_checkpointing={ckpt}", "forecaster=roofline", f"output={again}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(again.read_text())["step_s"] == pytest.approx(plan["step_s"], rel=1e-9)


@pytest.mark.parametrize("args, message", [
    ([*SERVE, "rate=0"], "error: rate must be a positive number of requests per second, got 0"),
    ([*SERVE, "rate=-2"], "error: rate must be a positive number of requests per second, got -2"),
    ([*SERVE[:5], "gpus=[l4,h1000]", "rate=1"], "error: unknown GPU 'h1000'; closest known: "),
    ([*TRAIN[:-1], "days=1e-9", "gpus=[h100_sxm_80gb]"], "is shorter than one step: the fastest run takes"),
    ([*SERVE, "rate=1", "output=plan.json"], "error: output=plan.json: give a .csv path"),
])
def test_bad_input_exits_2_with_one_error_line(tmp_path, args, message):
    proc = _run("plan", [*args, "log=false"], tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert message in proc.stderr.strip().splitlines()[-1]
