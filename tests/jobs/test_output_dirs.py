"""Issue 27 item 7: an output directory a job cannot or must not write (read-only, a filesystem root, the home
directory) is refused before any work: exit 2, one ``error:`` line naming the path, nothing written."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tilecast.cli import output_directory
from tilecast.errors import UserError
from tilecast.paths import ROOT

ARGS = {"score": ["forecaster=roofline", "matrix=smoke", "progress=false"], "report": [],
        "nightly": ["forecaster=roofline", "progress=false"]}


def _run(job: str, out: str, tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TILECAST_HOME": str(tmp / "home"), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'no' / 'x.db'}"}
    env.pop("TILECAST_TRACEBACK", None)
    return subprocess.run([sys.executable, str(ROOT / "jobs" / f"{job}.py"), f"output_dir={out}", *ARGS[job]],
                          capture_output=True, text=True, cwd=tmp, env=env, timeout=240)


@pytest.fixture(scope="module")
def read_only(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ro") / "reports"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    yield folder
    folder.chmod(0o755)


def test_a_read_only_reports_directory_is_one_line_exit_2_in_every_job(read_only, tmp_path):
    with ThreadPoolExecutor(3) as pool:
        procs = dict(zip(ARGS, pool.map(lambda j: _run(j, str(read_only), tmp_path), ARGS), strict=True))
    for job, proc in procs.items():
        shown = f"{job}: rc={proc.returncode}\n{proc.stderr[-2000:]}"
        assert proc.returncode == 2, shown
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, shown
        assert str(read_only) in errors[0] and "read-only" in errors[0], shown
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("where", ["/", "~", "$HOME"])
def test_a_filesystem_root_or_the_home_directory_is_refused(where, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    value = where.replace("$HOME", str(tmp_path))
    with pytest.raises(UserError, match="root of the file system|home directory"):
        output_directory(value)
    assert list(tmp_path.iterdir()) == []


def test_the_nightly_refuses_the_root_before_any_work(tmp_path):
    proc = _run("nightly", "/", tmp_path)
    assert proc.returncode == 2 and "error: output_dir=/: / is the root of the file system" in proc.stderr, \
        proc.stderr[-2000:]
