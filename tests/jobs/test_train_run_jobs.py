"""``predict.py mode=train_run`` and ``evaluate.py training_runs=<csv>`` end to end (roofline, throwaway store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import mlflow
import pandas as pd

from tilecast.paths import LLM_FOUNDRY_DIR, ROOT

PREDICT = ["mode=train_run", "model=mpt_7b", "gpu=a100_sxm4_80gb", "n_gpus=64", "seq_len=2048", "micro_batch=6",
           "global_batch=384", "sharding=zero3", "activation_checkpointing=false", "forecaster=roofline"]


def _run(job: str, args: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}", TILECAST_HOME=str(tmp_path))
    return subprocess.run([sys.executable, str(ROOT / "jobs" / f"{job}.py"), *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)


def test_predict_train_run_prints_and_writes_the_forecast(tmp_path):
    out = tmp_path / "run.json"
    proc = _run("predict", [*PREDICT, f"output={out}", "train_tokens=1e12"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for text in ("tokens/s/GPU", "MFU", "all_gather", "exposed", "hidden", "memory per GPU", "(fits)",
                 "USD per 1B tokens", "days"):
        assert text in proc.stdout
    record = json.loads(out.read_text())
    assert record["n_gpus"] == 64 and record["grad_accum"] == 1 and record["fits"] is True
    assert record["collectives_ms"]["all_gather"]["total"] > 0 and record["usd_per_1b_tokens"] > 0


def test_bad_training_runs_exit_2_with_a_named_error(tmp_path):
    cases = [
        (["n_gpus=10", "tp=4"], "not divisible by tp x pp x cp"),
        (["global_batch=100"], "not divisible by micro_batch x dp"),
        (["sharding=zero9"], "unknown sharding 'zero9'"),
    ]  # every other named error: tests/specs/test_train_run_spec.py

    def one(case):
        extra, text = case
        args = [a for a in PREDICT if a.split("=")[0] not in {e.split("=")[0] for e in extra}] + extra
        return _run("predict", args, tmp_path), text

    with ThreadPoolExecutor(3) as pool:
        for proc, text in pool.map(one, cases):
            assert proc.returncode == 2, (text, proc.stdout[-500:], proc.stderr[-1500:])
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], lines


def test_a_run_that_does_not_fit_is_flagged_with_the_change_that_fits(tmp_path):
    proc = _run("predict", ["mode=train_run", "model=llama31_8b", "gpu=h100_sxm_80gb", "n_gpus=8", "seq_len=4096",
                            "micro_batch=1", "global_batch=64", "forecaster=roofline"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "DOES NOT FIT" in proc.stdout and "fits with sharding=zero3" in proc.stdout


def test_evaluate_training_runs_writes_the_table_and_logs_ape_per_gpu(tmp_path):
    rows = pd.read_csv(LLM_FOUNDRY_DIR / "mpt_training.csv").iloc[[0, 61, 100]]
    src = tmp_path / "runs.csv"
    rows.to_csv(src, index=False)
    out = tmp_path / "out.csv"
    proc = _run("evaluate", [f"training_runs={src}", "forecaster=roofline", f"output={out}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = pd.read_csv(out)
    assert len(table) == 3 and {"pred_step_s", "pred_tokens_per_s_per_gpu", "pred_mfu_pct", "error"} <= set(table)
    assert "3 of 3 training runs forecast" in proc.stdout
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = mlflow.search_runs(experiment_names=["tilecast-evaluate"], output_format="list")[0]
    assert {"tokens_mape_pct.a100_sxm4_80gb", "tokens_mape_pct.a100_sxm4_40gb", "tokens_mape_pct.all"} <= set(
        run.data.metrics)
