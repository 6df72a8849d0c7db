"""The jobs run the way a user runs them: Hydra multirun over catalog names, what-if GPUs, the ``tilecast``
command from another directory. Every run's Hydra directories go to a throwaway ``TILECAST_HOME``."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tilecast.paths import ROOT
from tilecast.specs import get_gpu
from tilecast.tiles.roofline import roofline_ms


@pytest.fixture
def env(tmp_path):
    return dict(os.environ, TILECAST_HOME=str(tmp_path / "home"))


def job(env, cwd, name, *args):
    return subprocess.run([sys.executable, str(ROOT / "jobs" / f"{name}.py"), *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


PREDICT = ["model=gpt2_large", "batch=4", "seq_len=1024", "mode=inference", "forecaster=roofline"]


def test_multirun_over_two_gpus_named_any_way(env, tmp_path):
    rows = pd.DataFrame({"OPName": ["linear", "bmm", "add"], "B": [1, 8, 4], "M": [512, 64, 0], "N": [1024, 64, 0],
                         "K": [256, 64, 0], "H": [0, 0, 4096]})
    rows.to_csv(tmp_path / "rows.csv", index=False)
    out = tmp_path / "runs"
    proc = job(env, tmp_path, "predict_kernels", "-m", "gpu=NVIDIA_L4,Tesla T4", "predictor=roofline",
               f"input={tmp_path / 'rows.csv'}", f"output={out}/" + "${gpu.key}.csv")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for key in ("l4", "tesla_t4"):
        got = pd.read_csv(out / f"{key}.csv")["pred_ms"].to_numpy()
        assert got == pytest.approx(roofline_ms(rows, get_gpu(key)), rel=1e-9)
    assert "gpu=l4" in proc.stdout and "gpu=tesla_t4" in proc.stdout  # Hydra's launch lines
    sweeps = list((tmp_path / "home" / "multirun" / "predict_kernels").iterdir())
    assert len(sweeps) == 1 and {p.name for p in sweeps[0].iterdir()} >= {"0", "1"}
    assert not (tmp_path / "multirun").exists() and not (tmp_path / "outputs").exists()


def test_an_unknown_name_in_a_sweep_fails_before_any_run(env, tmp_path):
    proc = job(env, tmp_path, "graph", "-m", "model=gpt2_large,gpt9", "batch=1", "seq_len=128")
    assert proc.returncode == 2 and "Launching" not in proc.stdout
    assert proc.stderr.startswith("error: unknown model 'gpt9'") and len(proc.stderr.splitlines()) == 1


def test_a_what_if_gpu_is_forecast_and_named_so(env, tmp_path):
    """A sweep over the field: 300 GB/s is the catalog L4 itself, 600 GB/s a hypothetical one."""
    proc = job(env, tmp_path, "predict", "-m", "gpu=l4", "gpu.mem_bw_gbs=300,600", *PREDICT,
               f"output={tmp_path}/" + "${hydra:job.num}.json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gpt2_large on l4: batch=4" in proc.stdout and "gpt2_large on l4+mem_bw_gbs=600: batch=4" in proc.stdout
    assert "what-if GPU l4+mem_bw_gbs=600" in proc.stdout  # the log line says it is not the catalog L4
    b, f = (json.loads((tmp_path / f"{n}.json").read_text()) for n in (0, 1))
    assert (b["gpu"], f["gpu"]) == ("l4", "l4+mem_bw_gbs=600")
    assert f["e2e_ms"] < b["e2e_ms"]
    assert f["ms_per_group"]["mem"] == pytest.approx(b["ms_per_group"]["mem"] / 2, rel=1e-6)


def test_a_bad_what_if_value_is_one_error_line(env, tmp_path):
    out = tmp_path / "x.json"
    proc = job(env, tmp_path, "predict", "gpu=l4", "gpu.mem_bw_gbs=-5", *PREDICT, f"output={out}")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == ["error: gpu=l4: field 'mem_bw_gbs' has invalid value -5 "
                                        "(expected a positive finite number)"]
    assert not out.exists()


def test_a_job_without_what_ifs_refuses_them(env, tmp_path):
    proc = job(env, tmp_path, "report", "gpu.mem_bw_gbs=600")
    assert proc.returncode == 2 and proc.stderr.startswith("error: gpu.mem_bw_gbs=600: this job takes no gpu what-if")


def tilecast_script() -> str:
    script = Path(sys.executable).parent / "tilecast"
    found = str(script) if script.exists() else shutil.which("tilecast")
    assert found, "no `tilecast` console script in this environment: run python3 -m pip install -e ."
    return found


def test_tilecast_command_runs_a_job_from_any_directory(env, tmp_path):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    args = [tilecast_script(), "graph", "model=gpt2_large", "batch=1", "seq_len=128", "mode=inference"]
    procs = [subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]  # two runs started in the same second
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    for out, err, rc in results:
        assert rc == 0, err[-3000:]
        assert "gpt2_large batch=1 seq_len=128 inference" in out and "memory (fp32)" in out
    assert list(cwd.iterdir()) == []  # no outputs/ (or anything else) in the caller's directory
    runs = list((tmp_path / "home" / "outputs" / "graph").iterdir())
    assert len(runs) == 2 and all((r / ".hydra" / "overrides.yaml").exists() for r in runs)


def test_tilecast_help_lists_the_jobs_and_each_job_has_its_help(env, tmp_path):
    listing = subprocess.run([tilecast_script(), "--help"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert listing.returncode == 0
    jobs = {p.stem for p in (ROOT / "jobs").glob("*.py")}
    listed = {line.split()[0] for line in listing.stdout.split("jobs:\n")[1].splitlines() if line.startswith("  ")}
    assert listed == jobs and "  predict          Forecast one workload" in listing.stdout
    one = subprocess.run([tilecast_script(), "graph", "model=gpt2_large", "--help"], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=300)
    assert one.returncode == 0 and "options (conf/graph.yaml" in one.stdout and "optimizer: adamw" in one.stdout
    mandatory = subprocess.run([tilecast_script(), "graph", "--help"], capture_output=True, text=True, cwd=tmp_path,
                               env=env, timeout=300)  # the job's help needs no config composed (issue 27 item 12)
    assert mandatory.returncode == 0 and re.search(r"model: \d+ options \(required", mandatory.stdout)
    composed = subprocess.run([tilecast_script(), "graph", "model=gpt2_large", "--cfg", "job"], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=300)
    assert composed.returncode == 0 and "optimizer: adamw" in composed.stdout
    bad = subprocess.run([tilecast_script(), "predcit"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown job 'predcit'; jobs: calibrate")
