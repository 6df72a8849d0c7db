"""``mlflow run . -e <entry> --env-manager local -P overrides="..."``, the form README and MLproject document,
run for real against a throwaway sqlite store."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tilecast.paths import ROOT


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow_run")
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}", TILECAST_HOME=str(root / "home"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


def mlflow_run(env, cwd, entry, *params):
    args = [sys.executable, "-m", "mlflow", "run", str(ROOT), "-e", entry, "--env-manager", "local"]
    for p in params:
        args += ["-P", p]
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def finished_runs(env):
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    exps = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exps)


def test_predict_with_several_overrides(env, tmp_path):
    out = tmp_path / "forecast.json"
    overrides = f"model=gpt2_large gpu=NVIDIA_L4 batch=4 seq_len=1024 mode=inference forecaster=roofline output={out}"
    proc = mlflow_run(env, tmp_path, "predict", f"overrides={overrides}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gpt2_large on l4: batch=4 seq_len=1024 inference" in proc.stdout
    record = json.loads(out.read_text())
    assert (record["model"], record["gpu"], record["batch"], record["seq_len"]) == ("gpt2_large", "l4", 4, 1024)
    assert record["e2e_ms"] > 0 and record["forecaster"] == "roofline"
    runs = [r for r in finished_runs(env) if r.data.params.get("overrides") == shlex.quote(overrides)]
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert not (tmp_path / "outputs").exists() and (Path(env["TILECAST_HOME"]) / "outputs" / "predict").is_dir()


def test_graph_runs_on_its_own_default(env, tmp_path):
    proc = mlflow_run(env, tmp_path, "graph")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gpt2_large batch=4 seq_len=1024 training" in proc.stdout  # the MLproject default
    assert "memory (fp32)" in proc.stdout
