"""Date-partitioned run outputs: ``<output_dir>/<YYYY-MM-DD>/`` replaced whole and atomically.

A job builds a complete run directory in a hidden staging folder beside it
(``.staging-<date>-<job id>/``, holding a marker file :data:`MARKER` that names the job and its process),
flushes it to disk, then :func:`publish` swaps it in under a lock (:func:`tilecast.atomic.swap_in`: one
atomic exchange of the two names, or, where the file system has none, two renames through
``.old-<date>-<job id>/``). Readers see the previous outputs or the new ones, never a mix, never half a file;
re-running a date replaces that date's outputs (no duplicated rows). Jobs that add to a run (the
report) stage a hard-linked copy of it first, so they use the same single swap.

A crash (a kill, a power cut) at any step leaves the old complete run or the new complete run under
``<date>/``, and the next job on the store (:meth:`RunStore.recover`) puts back a run a crash left only
under its ``.old-`` name and removes the folders of jobs that ended without cleaning up. It touches only
folders named like its own that hold a tilecast marker whose process has ended (or, for a process on
another host, that is older than ``stale_after_s``): other people's folders in a shared directory, and
the folders of jobs still running, are left alone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tilecast.atomic import crash_point, fsync_dir, fsync_tree, swap_in, umask, write_text_atomic
from tilecast.errors import UserError, UserLookupError
from tilecast.owner import Owner

log = logging.getLogger(__name__)

DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_STAGING = ".staging-"
_OLD = ".old-"
#: the folders a job creates in ``output_dir``: ``.staging-<date>-<job id>`` and ``.old-<date>-<job id>``
OWN_FOLDER_RE = re.compile(r"^\.(staging|old)-(\d{4}-\d{2}-\d{2})-([0-9a-f]{8,32})$")
#: the marker file in each of them (and in each published run: where it came from)
MARKER = ".tilecast-owner.json"
#: a marked folder whose owner this host cannot check (another host) is swept after this long
STALE_S = 24 * 3600


class RunNotFoundError(UserLookupError):
    """No run for the requested date (lists the dates that exist)."""


def run_date(value: str | dt.date | None = None) -> str:
    """``YYYY-MM-DD``: the given date (validated) or today's UTC date."""
    if value is None or value == "":
        return dt.datetime.now(dt.UTC).date().isoformat()
    text = value.isoformat() if isinstance(value, dt.date) else str(value)
    if not DATE_RE.match(text):
        raise UserError(f"run date {value!r}: expected YYYY-MM-DD")
    try:
        dt.date.fromisoformat(text)  # a real calendar date
    except ValueError as exc:
        raise UserError(f"run date {value!r}: {exc}") from None
    return text


class RunStore:
    """The run directories under ``root`` (one per date)."""

    def __init__(self, root: str | os.PathLike, stale_after_s: float = STALE_S) -> None:
        self.root = Path(root)
        self.stale_after_s = stale_after_s

    def dates(self) -> list[str]:
        """Published run dates, oldest first."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and DATE_RE.match(p.name))

    def path(self, date: str) -> Path:
        return self.root / run_date(date)

    def resolve(self, run: str | None = "latest") -> Path:
        """Directory of ``run`` (``latest`` or a date); unknown -> :class:`RunNotFoundError` listing dates."""
        dates = self.dates()
        if run in (None, "", "latest"):
            if not dates:
                raise RunNotFoundError(f"no runs under {self.root}; score one with `python jobs/score.py`")
            return self.root / dates[-1]
        date = run_date(run)
        if date not in dates:
            known = ", ".join(dates) or "none"
            raise RunNotFoundError(f"no run dated {date} under {self.root}; runs: {known}")
        return self.root / date

    def previous(self, date: str) -> str | None:
        """The latest published date strictly before ``date``."""
        earlier = [d for d in self.dates() if d < run_date(date)]
        return earlier[-1] if earlier else None

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def stage(self, date: str, from_existing: bool = False) -> Iterator[Path]:
        """A fresh staging directory for ``date``, published on success and removed on any error.

        ``from_existing``: start from a hard-linked copy of the published run (to add files to it; files are
        only ever replaced in a staging folder, never edited in place, so the published run is untouched).
        """
        date = run_date(date)
        self.root.mkdir(parents=True, exist_ok=True)
        self.recover()
        job = uuid.uuid4().hex[:12]
        staging = self.root / f"{_STAGING}{date}-{job}"
        try:
            staging.mkdir()
            _write_marker(staging, job, date)
            final = self.root / date
            if from_existing and final.is_dir():
                shutil.copytree(final, staging, copy_function=_link_or_copy, dirs_exist_ok=True,
                                ignore=lambda d, names: [MARKER] if Path(d) == final else [])
            yield staging
            self.publish(staging, date)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def publish(self, staging: Path, date: str) -> Path:
        """Swap ``staging`` in as the run of ``date`` (replacing any previous one) and return its path.

        Crash points (:func:`tilecast.atomic.crash_point`): ``publish.staged`` (staged and on disk, nothing
        swapped), ``publish.old-moved`` and ``publish.swapped`` (see :func:`tilecast.atomic.swap_in`).
        """
        final = self.root / run_date(date)
        m = OWN_FOLDER_RE.match(staging.name)
        job = m.group(3) if m else uuid.uuid4().hex[:12]
        if _read_marker(staging) is None:
            _write_marker(staging, job, final.name)
        _readable(staging)
        fsync_tree(staging)
        crash_point("publish.staged")
        with self._lock():
            if final.is_dir():  # the run being replaced is this job's to remove (or to put back after a crash)
                _write_marker(final, job, final.name)
            old = swap_in(staging, final, self.root / f"{_OLD}{final.name}-{job}")
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def recover(self) -> list[str]:
        """Clean up after crashed jobs, under the lock: a run left only under ``.old-<date>-*`` (a crash between
        the two renames of a publish) is renamed back to ``<date>``; the staging and replaced folders of
        jobs that have ended are removed. Returns what it did, one line per folder."""
        if not self.root.is_dir():
            return []
        done = []
        with self._lock():
            for p in sorted(self.root.iterdir()):
                m = OWN_FOLDER_RE.match(p.name)
                if m is None or p.is_symlink() or not p.is_dir():
                    continue
                marker = _read_marker(p)
                if marker is None:
                    continue  # named like ours, but not made by tilecast: never touched
                final = self.root / m.group(2)
                if m.group(1) == "old" and not final.exists():
                    os.rename(p, final)
                    fsync_dir(self.root)
                    done.append(f"restored {final.name} from {p.name}")
                elif self._ended(marker, p):
                    shutil.rmtree(p, ignore_errors=True)
                    done.append(f"removed {p.name}")
        for line in done:
            log.warning("%s: %s (left by a job that ended without cleaning up)", self.root, line)
        return done

    def _ended(self, marker: dict[str, Any], folder: Path) -> bool:
        alive = Owner.from_dict(marker["owner"]).alive()
        if alive is not None:
            return not alive
        created = marker.get("created")
        if not isinstance(created, (int, float)):
            created = folder.stat().st_mtime
        return time.time() - created > self.stale_after_s


def _write_marker(folder: Path, job: str, date: str) -> None:
    """The marker of a folder this job made (replaced, never edited: a staged copy may hard-link the old one)."""
    data = {"tool": "tilecast", "kind": "run", "job_id": job, "date": date, "owner": Owner.current().as_dict(),
            "created": time.time(), "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    write_text_atomic(folder / MARKER, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _read_marker(folder: Path) -> dict[str, Any] | None:
    """The folder's tilecast marker; None when it has none or another program's (or an unreadable one)."""
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tool") != "tilecast" or Owner.from_dict(data.get("owner")) is None:
        return None
    return data


def _readable(directory: Path) -> None:
    """Give staged files the permissions of ordinary new files (temp files are created owner-only)."""
    mask = umask()
    directory.chmod(0o777 & ~mask)
    for p in directory.rglob("*"):
        p.chmod((0o777 if p.is_dir() else 0o666) & ~mask)


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link (files are only ever replaced, never edited in place), copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
