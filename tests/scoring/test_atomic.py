"""The one atomic-publish helper (tilecast.atomic) and the owner of what a job leaves behind (tilecast.owner)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tilecast import atomic
from tilecast.owner import Owner


def test_write_atomic_keeps_the_old_file_when_the_rename_fails(tmp_path, monkeypatch):
    path = tmp_path / "report.md"
    atomic.write_text_atomic(path, "old")
    assert path.stat().st_mode & 0o777 == 0o666 & ~atomic.umask()

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", fail)
    with pytest.raises(OSError, match="No space"):
        atomic.write_text_atomic(path, "new")
    monkeypatch.undo()
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_write_atomic_removes_its_temp_file_when_the_writer_fails(tmp_path):
    def half(tmp):
        tmp.write_text("half")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        atomic.write_atomic(tmp_path / "t.parquet", half)
    assert list(tmp_path.iterdir()) == []


def test_exchange_swaps_two_directories_or_changes_nothing(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "A").touch()
    (b / "B").touch()
    if atomic.exchange(a, b):
        assert [p.name for p in a.iterdir()] == ["B"] and [p.name for p in b.iterdir()] == ["A"]
    else:  # a file system without renameat2(RENAME_EXCHANGE)
        assert [p.name for p in a.iterdir()] == ["A"] and [p.name for p in b.iterdir()] == ["B"]
    with pytest.raises(OSError):
        atomic.exchange(a, tmp_path / "missing")


@pytest.mark.parametrize("exchange", [True, False])
def test_swap_in_returns_where_the_old_content_went(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(atomic, "exchange", lambda a, b: False)
    staging, final, backup = tmp_path / ".staging", tmp_path / "final", tmp_path / ".old"
    staging.mkdir()
    (staging / "new").touch()
    assert atomic.swap_in(staging, final, backup) is None and (final / "new").exists()
    staging.mkdir()
    (staging / "newer").touch()
    old = atomic.swap_in(staging, final, backup)
    assert [p.name for p in final.iterdir()] == ["newer"] and [p.name for p in old.iterdir()] == ["new"]
    if not exchange:
        assert old == backup
    elif old == staging:
        assert not backup.exists()


def test_owner_alive_dead_reused_and_elsewhere():
    me = Owner.current()
    assert me.alive() is True and Owner.from_dict(me.as_dict()) == me
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert Owner(int(done.stdout), me.host, me.boot).alive() is False
    if me.started is not None:
        assert Owner(me.pid, me.host, me.boot, me.started + 1).alive() is False  # same pid, another process
    if me.boot is not None:
        assert Owner(me.pid, me.host, "another-boot", me.started).alive() is False
    assert Owner(me.pid, "another-host").alive() is None
    for junk in (None, "x", {}, {"pid": "abc", "host": "h"}, {"pid": 3, "host": ""}, {"pid": -1, "host": "h"}):
        assert Owner.from_dict(junk) is None


def test_a_killed_process_not_reaped_yet_is_dead():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    me = Owner.current()
    try:
        assert Owner(proc.pid, me.host, me.boot).alive() is True
        os.kill(proc.pid, signal.SIGKILL)
        time.sleep(0.5)  # a zombie until waited for
        assert Owner(proc.pid, me.host, me.boot).alive() is False
    finally:
        proc.kill()
        proc.wait()
