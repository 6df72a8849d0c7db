"""MLflow runs left RUNNING by a killed job are marked FAILED, saying why, when the next job starts on the store
(issue 17, item 8); runs of live processes, of other hosts and of other tools are left alone."""

import os
import signal
import subprocess
import sys
import uuid

import mlflow
from mlflow import MlflowClient

from tilecast.owner import Owner
from tilecast.registry import tracking
from tilecast.registry.tracking import FAILED_REASON_TAG, OWNER_TAGS, ensure_experiment, fail_dead_runs

JOB = """
import sys, time, mlflow
from tilecast.registry.tracking import configure, ensure_experiment
configure(sys.argv[1])
experiment = ensure_experiment(sys.argv[2])
if sys.argv[3] != "none":
    with mlflow.start_run(experiment_id=experiment, run_name=sys.argv[3]) as run:
        print(run.info.run_id, flush=True)
        time.sleep(120)
"""


def _job(uri, experiment, run_name):
    return subprocess.Popen([sys.executable, "-c", JOB, uri, experiment, run_name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_a_killed_jobs_run_is_marked_failed_at_the_next_start(sqlite_store, monkeypatch, caplog):
    uri, exp_name = sqlite_store, f"dead-runs-{uuid.uuid4().hex[:6]}"
    killed = _job(uri, exp_name, "killed")
    try:
        killed_id = killed.stdout.readline().strip()
        assert killed_id, killed.stderr.read()
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name(exp_name).experiment_id
        assert client.get_run(killed_id).info.status == "RUNNING"  # what a kill leaves
        live = client.create_run(exp, tags={k: str(v) for k, v in  # a job still running (this process)
                                            ((OWNER_TAGS[f], v) for f, v in Owner.current().as_dict().items())
                                            if v is not None}).info.run_id
        foreign = client.create_run(exp).info.run_id  # another tool's run: no owner recorded
        elsewhere = client.create_run(exp, tags={OWNER_TAGS["pid"]: "1", OWNER_TAGS["host"]: "elsewhere"}).info.run_id

        monkeypatch.setattr(tracking, "_SWEPT", set())  # this process is the next job to start on the store
        ensure_experiment("another-experiment")

        run = client.get_run(killed_id)
        assert run.info.status == "FAILED" and run.info.end_time is not None
        assert f"process {killed.pid} on " in run.data.tags[FAILED_REASON_TAG]
        assert "killed or crashed" in run.data.tags[FAILED_REASON_TAG]
        assert f"MLflow run {killed_id} (killed)" in caplog.text  # the next job says what it did
        for rid in (live, foreign, elsewhere):
            assert client.get_run(rid).info.status == "RUNNING"
            assert FAILED_REASON_TAG not in client.get_run(rid).data.tags
        assert fail_dead_runs([exp], client) == []  # nothing left to mark
        for rid in (live, foreign, elsewhere):
            client.set_terminated(rid)
    finally:
        if killed.poll() is None:
            killed.kill()
        killed.wait()


def test_runs_record_their_process_and_finished_runs_stay_finished(sqlite_store):
    exp = ensure_experiment(f"owner-tags-{uuid.uuid4().hex[:6]}")
    with mlflow.start_run(experiment_id=exp) as run:  # a plain mlflow.start_run, as every job's
        pass
    tags = MlflowClient().get_run(run.info.run_id).data.tags
    assert Owner.from_dict({k: tags.get(t) for k, t in OWNER_TAGS.items()}) == Owner.current()
    assert fail_dead_runs([exp]) == []
    assert MlflowClient().get_run(run.info.run_id).info.status == "FINISHED"
