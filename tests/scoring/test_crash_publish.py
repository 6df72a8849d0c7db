"""A job killed (SIGKILL) at each step of publishing a run leaves the old complete run or the new complete run,
never half of one, and the next job on the store cleans up and publishes (issue 17, item 8).

The job is a real subprocess (``crash_publish.py``, through the store's own code) killed by the one test
hook, ``TILECAST_CRASH_AT=<step>`` (:func:`tilecast.atomic.crash_point`); both ways of swapping are tested:
the atomic exchange of this file system, and the two renames used where there is none.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tilecast.atomic import CRASH_ENV
from tilecast.scoring.store import MARKER, RunStore

HERE = Path(__file__).parent
DATE = "2026-03-01"
BIG = 2 << 20


def _job(root, text, step=None, renames=False, add=False):
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if step:
        env[CRASH_ENV] = step
    args = [sys.executable, str(HERE / "crash_publish.py"), str(root), DATE, text]
    args += ["--renames"] * renames + ["--add"] * add
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


def _run(d: Path) -> dict[str, str]:
    """The files of a run directory; a run is complete when big.bin has all its bytes."""
    out = {p.name: p.read_text() for p in d.iterdir() if p.suffix in (".txt", ".md")}
    big = (d / "big.bin").read_bytes()
    assert big == out["scores.txt"].encode()[:1] * BIG, "big.bin is incomplete"
    return out


def _look_alikes(root: Path) -> list[Path]:
    """Other people's folders in a shared output directory, named like the store's."""
    folders = [root / ".old-important-project", root / ".staging-thesis", root / f".staging-{DATE}-0123456789ab"]
    for f in folders:
        f.mkdir()
        (f / "notes.txt").write_text("mine")
    os.utime(root / ".staging-thesis", (0, 0))  # very old
    return folders


CASES = [  # step, renames, add -> what <date>/ holds right after the kill
    ("publish.staged", False, False, "old"),
    ("publish.staged", True, False, "old"),
    ("publish.swapped", False, False, "new"),
    ("publish.swapped", True, False, "new"),
    ("publish.old-moved", True, False, None),  # between the two renames: only .old- holds it, recovered below
    ("publish.staged", False, True, "old"),  # the report job adding to a published run
    ("publish.swapped", False, True, "new"),
]


@pytest.mark.parametrize("step, renames, add, after", CASES)
def test_a_kill_at_each_publish_step_keeps_a_complete_run(tmp_path, step, renames, add, after):
    root = tmp_path / "reports"
    assert _job(root, "old").returncode == 0
    alike = _look_alikes(root)
    proc = _job(root, "new", step, renames, add)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    old = {"scores.txt": "old"}
    new = {"scores.txt": "old", "report.md": "new"} if add else {"scores.txt": "new"}
    final = root / DATE
    if after is None:
        assert not final.exists() and [p.name for p in root.glob(f".old-{DATE}-*")]
    else:
        assert _run(final) == (old if after == "old" else new)
    leftovers = [p for p in root.iterdir() if p.name.startswith(".") and p not in alike and p.name != ".lock"]
    assert leftovers or after is None  # the killed job could not clean up

    store = RunStore(root)
    store.recover()  # what the next job does first
    assert _run(final) == (new if after == "new" else old)  # a run only under .old- is put back
    assert sorted(p.name for p in root.iterdir()) == sorted([".lock", DATE] + [p.name for p in alike])
    with store.stage(DATE) as d:  # and the next job publishes
        (d / "scores.txt").write_text("next")
        (d / "big.bin").write_bytes(b"n" * BIG)
    assert _run(final) == {"scores.txt": "next"}
    assert sorted(p.name for p in root.iterdir()) == sorted([".lock", DATE] + [p.name for p in alike])
    assert all((f / "notes.txt").read_text() == "mine" for f in alike)


def test_a_crash_of_the_swap_itself_puts_the_old_run_back(tmp_path, monkeypatch):
    """The second rename failing (an exception, not a kill) renames the old run back at once."""
    import tilecast.atomic as atomic

    root = tmp_path / "reports"
    assert _job(root, "old").returncode == 0
    monkeypatch.setattr(atomic, "exchange", lambda a, b: False)
    real = os.rename

    def rename(src, dst):
        if Path(src).name.startswith(".staging-"):
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "rename", rename)
    with pytest.raises(OSError, match="Input/output"), RunStore(root).stage(DATE) as d:
        (d / "scores.txt").write_text("new")
        (d / "big.bin").write_bytes(b"n" * BIG)
    assert _run(root / DATE) == {"scores.txt": "old"}
    assert sorted(p.name for p in root.iterdir()) == [".lock", DATE]


def test_a_published_run_says_which_job_made_it(tmp_path):
    root = tmp_path / "reports"
    assert _job(root, "old").returncode == 0
    marker = (root / DATE / MARKER).read_text()
    assert '"tool": "tilecast"' in marker and '"pid"' in marker and '"job_id"' in marker
