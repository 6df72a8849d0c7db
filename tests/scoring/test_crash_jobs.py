"""The real jobs killed (SIGKILL) while publishing (issue 17, item 8): ``score.py`` and ``nightly.py`` leave the old
complete run or the new complete one, never part of one; the next job cleans up, publishes, and marks the
killed nightly's MLflow run FAILED. Other people's folders in the output directory survive all of it."""

import json
import os
import signal
import subprocess
import sys

import pandas as pd
from mlflow import MlflowClient

from tilecast.atomic import CRASH_ENV
from tilecast.paths import ROOT
from tilecast.registry.tracking import FAILED_REASON_TAG
from tilecast.scoring.store import RunStore

DATE = "2026-05-01"
OLD = b"the previous run"


def _previous_run(out):
    """A published run of DATE (its scores file a marker string, so its survival is easy to see), and two
    folders of other people in the same directory."""
    with RunStore(out).stage(DATE) as d:
        (d / "scores.parquet").write_bytes(OLD)
    for name in (".old-important-project", ".staging-thesis"):
        (out / name).mkdir()
        (out / name / "notes.txt").write_text("mine")


def _job(name, tmp_path, *args, crash=None):
    env = {k: v for k, v in os.environ.items() if k not in (CRASH_ENV, "MLFLOW_TRACKING_URI")}
    if crash:
        env[CRASH_ENV] = crash
    return subprocess.run([sys.executable, f"jobs/{name}.py", "matrix=smoke", "forecaster=roofline", f"date={DATE}",
                           f"output_dir={tmp_path / 'reports'}", "dask.n_workers=1", "dask.processes=false",
                           "progress=false", f"hydra.run.dir={tmp_path / 'hydra' / (crash or 'ok')}", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def _whole_new_run(run):
    """A complete new run: its table reads (whole Parquet), for this date, and run.json (written last) is there."""
    table = pd.read_parquet(run / "scores.parquet")
    assert len(table) > 0 and set(table["run_date"]) == {DATE}
    assert json.loads((run / "run.json").read_text())["date"] == DATE


def _names(out):
    return sorted(p.name for p in out.iterdir())


def test_score_killed_after_the_swap_has_published_the_whole_new_run(tmp_path):
    out = tmp_path / "reports"
    _previous_run(out)
    proc = _job("score", tmp_path, crash="publish.swapped")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    _whole_new_run(out / DATE)
    assert len(list(out.glob(f".staging-{DATE}-*"))) == 1  # the replaced run, not removed by the killed job
    assert RunStore(out).recover() and _names(out) == [".cache", ".lock", ".old-important-project",
                                                       ".staging-thesis", DATE]


def test_nightly_killed_before_the_swap_keeps_the_old_run_and_the_next_one_recovers(tmp_path, sqlite_uri):
    out = tmp_path / "reports"
    _previous_run(out)
    uri = f"mlflow.tracking_uri={sqlite_uri}"
    proc = _job("nightly", tmp_path, uri, crash="publish.staged")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert (out / DATE / "scores.parquet").read_bytes() == OLD  # untouched
    assert len(list(out.glob(f".staging-{DATE}-*"))) == 1
    client = MlflowClient(sqlite_uri)
    exp = client.get_experiment_by_name("nightly").experiment_id
    (killed,) = client.search_runs([exp], filter_string="attributes.status = 'RUNNING'")

    proc = _job("nightly", tmp_path, uri)  # the next night
    assert proc.returncode == 0, proc.stderr[-3000:]
    _whole_new_run(out / DATE)
    assert {"report.md", "report.html"} <= {p.name for p in (out / DATE).iterdir()}
    assert _names(out) == [".cache", ".lock", ".old-important-project", ".staging-thesis", DATE]
    assert all((out / n / "notes.txt").read_text() == "mine" for n in (".old-important-project", ".staging-thesis"))
    run = client.get_run(killed.info.run_id)
    assert run.info.status == "FAILED" and "ended without closing this run" in run.data.tags[FAILED_REASON_TAG]
    assert client.search_runs([exp], filter_string="attributes.status = 'RUNNING'") == []
