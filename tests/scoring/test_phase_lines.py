"""Issue 27 item 14: long work says what it does in a log: one line per phase (start, and end with counts and
elapsed seconds and CPU-seconds) when stdout is a file, under CI too; no Dask nanny shutdown warnings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from tilecast.paths import ROOT

JOBS = {"score": ["matrix=smoke"], "nightly": ["matrix=smoke"]}


def test_score_and_nightly_log_one_line_per_phase(tmp_path):
    def run(job):
        log = tmp_path / f"{job}.log"
        env = {**os.environ, "CI": "true", "TILECAST_HOME": str(tmp_path / "home"),
               "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / job}.db"}
        with log.open("w") as out:  # stdout and stderr in a file, as a scheduler runs the nightly
            proc = subprocess.run([sys.executable, str(ROOT / "jobs" / f"{job}.py"), *JOBS[job], "forecaster=roofline",
                                   f"output_dir={tmp_path / job}", "dask.n_workers=1", "dask.processes=false"],
                                  stdout=out, stderr=subprocess.STDOUT, env=env, timeout=600)
        return job, proc.returncode, log.read_text()

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(run, JOBS))
    for job, rc, text in done:
        assert rc == 0, text[-3000:]
        for name in ("graphs", "forecast"):
            assert re.search(rf"{name}: .* \.\.\.$", text, re.M), (job, name, text[-2000:])
            assert re.search(rf"{name}: .*\(\d+\.\d s, \d+\.\d CPU-s\)$", text, re.M), (job, name, text[-2000:])
        assert "distributed.nanny" not in text
    nightly = dict((j, t) for j, _, t in done)["nightly"]
    for name in ("champions", "prepare", "report", "mlflow"):
        assert re.search(rf"{name}: .*\(\d+\.\d s, \d+\.\d CPU-s\)$", nightly, re.M), (name, nightly[-2000:])
