"""A tracking store that cannot be used fails fast with one line naming the URI (issue 17): a dead server, a
sqlite URI pointing at a directory, a file that is no database, a mistyped directory (no new empty store is
created there), an unknown scheme. Only 127.0.0.1 is ever contacted (a port nothing listens on)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import mlflow
import pytest

from tests.registry.helpers import compose_job, free_port
from tilecast.paths import ROOT
from tilecast.registry.tracking import ENV_VAR, TrackingError, configure


@pytest.fixture
def restore_uris(monkeypatch):
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    for var in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"):
        monkeypatch.delenv(var, raising=False)
    yield
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def test_a_dead_server_stops_the_job_in_seconds(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {**os.environ, ENV_VAR: uri}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "model=gpt2_large", "gpu=l4", "batch=1",
                           "seq_len=128"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=150)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and uri in errors[0] and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert elapsed < 100, f"took {elapsed:.0f} s"  # the interpreter and imports included; MLflow's retries: ~250 s


def test_a_closed_port_is_refused_within_the_timeout(restore_uris):
    uri = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(TrackingError, match=uri.replace(".", r"\.")) as err:
        configure(uri, timeout_s=2)
    assert time.monotonic() - t0 < 10
    assert "mlflow.tracking_uri" in str(err.value) or ENV_VAR in str(err.value)
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "2"  # every later request gives up as quickly
    assert int(os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]) <= 2


def test_sqlite_paths_are_checked_before_mlflow_touches_them(tmp_path, restore_uris):
    directory = tmp_path / "store"
    directory.mkdir()
    garbage = tmp_path / "garbage.db"
    garbage.write_text("this is not a database\n" * 10)
    other = tmp_path / "other.db"  # an SQLite file of something else: MLflow would add its tables to it
    import sqlite3

    with sqlite3.connect(other) as con:
        con.execute("create table invoices (id integer)")
    cases = {f"sqlite:///{directory}": "is a directory", f"sqlite:///{garbage}": "not an SQLite database",
             f"sqlite:///{other}": "not an MLflow store",
             f"sqlite:///{tmp_path / 'typo' / 'mlflow.db'}": "does not exist",
             f"sqlite:///{tmp_path / 'mlfow.db'}": "mlfow.db, which does not exist, beside garbage.db, other.db"}
    for uri, why in cases.items():
        t0 = time.monotonic()
        with pytest.raises(TrackingError, match=why) as err:
            configure(uri)
        assert uri in str(err.value) and time.monotonic() - t0 < 5
    assert not (tmp_path / "typo").exists()  # a mistyped directory never becomes a new empty store
    assert not (tmp_path / "mlfow.db").exists()  # nor a mistyped file name beside a store
    assert garbage.read_text().startswith("this is not") and sqlite3.connect(other).execute(
        "select name from sqlite_master").fetchall() == [("invoices",)]


def test_an_unknown_scheme_is_one_clear_error(restore_uris):
    with pytest.raises(TrackingError, match="htp://127.0.0.1:5000"):
        configure("htp://127.0.0.1:5000")


def test_the_timeout_is_configurable():
    for job, args in {"train": [], "calibrate": ["gpu=l4"], "promote": [], "predict": []}.items():
        cfg = compose_job(job, [*args, "mlflow.connect_timeout_s=3"])  # every job composes the mlflow group
        assert cfg.mlflow.connect_timeout_s == 3
