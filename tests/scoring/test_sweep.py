"""The store's clean-up removes only folders its own jobs left behind (issue 17, item 9): named like its staging
folders, holding a tilecast marker, whose process has ended (or, on another host, that are older than the limit).
Folders of other programs in a shared output directory and of jobs still running are left alone."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tilecast.atomic import CRASH_ENV
from tilecast.owner import Owner
from tilecast.scoring.store import MARKER, RunStore

HERE = Path(__file__).parent


def _folder(root: Path, name: str, marker=None, age_s: float = 0) -> Path:
    f = root / name
    f.mkdir(parents=True)
    (f / "data.txt").write_text(name)
    if marker is not None:
        (f / MARKER).write_text(marker if isinstance(marker, str) else json.dumps(marker))
    if age_s:
        t = time.time() - age_s
        os.utime(f, (t, t))
    return f


def _killed_job_staging(root: Path, date: str) -> Path:
    """The staging folder a real job left when it was killed (SIGKILL) before publishing."""
    env = {**os.environ, CRASH_ENV: "publish.staged"}
    proc = subprocess.run([sys.executable, str(HERE / "crash_publish.py"), str(root), date, "x"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (staging,) = root.glob(f".staging-{date}-*")
    return staging


def test_only_the_stale_folders_of_its_own_jobs_are_swept(tmp_path):
    root = tmp_path / "shared"
    dead = _killed_job_staging(root, "2026-01-03")
    dead_marker = json.loads((dead / MARKER).read_text())
    me = Owner.current().as_dict()
    day = 24 * 3600
    keep = [
        _folder(root, ".old-important-project"),  # the two folders: no marker, not our names
        _folder(root, ".staging-thesis", age_s=30 * day),
        _folder(root, ".staging-2026-01-01-0123456789ab", age_s=30 * day),  # our name, no marker
        _folder(root, ".staging-2026-01-01-aaaaaaaaaaaa", {"tool": "other", "owner": dead_marker["owner"]}),
        _folder(root, ".staging-2026-01-01-bbbbbbbbbbbb", "{not json", age_s=30 * day),
        _folder(root, ".staging-2026-01-01-cccccccccccc", {"tool": "tilecast", "owner": "someone"}),
        _folder(root, ".staging-thesis-2", dead_marker),  # a tilecast marker, not our name
        _folder(root, ".staging-2026-01-02-dddddddddddd", {**dead_marker, "owner": me}),  # owner still runs
        _folder(root, ".staging-2026-01-02-eeeeeeeeeeee",  # another host, recent: cannot tell, kept
                {**dead_marker, "owner": {"pid": 1, "host": "elsewhere"}, "created": time.time() - 3600}),
    ]
    gone = [
        dead,  # a real killed job's
        _folder(root, ".staging-2026-01-02-ffffffffffff",  # another host, older than the limit
                {**dead_marker, "owner": {"pid": 1, "host": "elsewhere"}, "created": time.time() - 2 * day}),
        _folder(root, ".staging-2026-01-02-000000000000",  # our pid, but reused: the recorded process ended
                {**dead_marker, "owner": {**me, "started": (me["started"] or 0) + 1}}),
    ]
    _folder(root, "2026-01-04")
    gone.append(_folder(root, ".old-2026-01-04-111111111111", dead_marker))  # a replaced run, its date published

    with RunStore(root).stage("2026-01-05") as d:  # the next job, in the shared directory
        (d / "scores.txt").write_text("mine")
    assert all(f.is_dir() and (f / "data.txt").read_text() == f.name for f in keep), \
        [f.name for f in keep if not f.is_dir()]
    assert not [f.name for f in gone if f.exists()]
    assert (root / "2026-01-05" / "scores.txt").read_text() == "mine"


def test_a_running_jobs_staging_folder_is_not_swept(tmp_path):
    """Two jobs on one output directory: the second one's clean-up leaves the first one's work alone."""
    root = tmp_path / "reports"
    store = RunStore(root)
    with store.stage("2026-01-01") as first:
        (first / "scores.txt").write_text("first")
        with RunStore(root).stage("2026-01-02") as second:
            (second / "scores.txt").write_text("second")
        assert (first / "scores.txt").read_text() == "first"
    assert store.dates() == ["2026-01-01", "2026-01-02"]
    assert sorted(p.name for p in root.iterdir()) == [".lock", "2026-01-01", "2026-01-02"]


def test_the_age_limit_is_a_setting(tmp_path):
    root = tmp_path / "reports"
    marker = {"tool": "tilecast", "owner": {"pid": 1, "host": "elsewhere"}, "created": time.time() - 120}
    f = _folder(root, ".staging-2026-01-02-eeeeeeeeeeee", marker)
    RunStore(root).recover()
    assert f.exists()
    assert RunStore(root, stale_after_s=60).recover() == [f"removed {f.name}"]
    assert not f.exists()
