"""Date-partitioned run outputs: ``<output_dir>/<YYYY-MM-DD>/`` replaced whole and atomically.

A job builds a complete run directory in a hidden staging folder beside it, then :func:`publish`
swaps it in under a lock: the old directory is renamed away, the new one renamed into place, the
old one removed. Readers see the previous outputs or the new ones, never a mix, never half a file;
re-running a date replaces that date's outputs (no duplicated rows). Jobs that add to a run (the
report) stage a hard-linked copy of it first, so they use the same single swap.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_STAGING = ".staging-"
_OLD = ".old-"
_STALE_S = 24 * 3600


class RunNotFoundError(LookupError):
    """No run for the requested date (lists the dates that exist)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def run_date(value: str | dt.date | None = None) -> str:
    """``YYYY-MM-DD``: the given date (validated) or today's UTC date."""
    if value is None or value == "":
        return dt.datetime.now(dt.UTC).date().isoformat()
    text = value.isoformat() if isinstance(value, dt.date) else str(value)
    if not DATE_RE.match(text):
        raise ValueError(f"run date {value!r}: expected YYYY-MM-DD")
    dt.date.fromisoformat(text)  # a real calendar date
    return text


class RunStore:
    """The run directories under ``root`` (one per date)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

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

        ``from_existing``: start from a hard-linked copy of the published run (to add files to it).
        """
        date = run_date(date)
        self.root.mkdir(parents=True, exist_ok=True)
        self._sweep()
        staging = self.root / f"{_STAGING}{date}-{uuid.uuid4().hex[:8]}"
        try:
            if from_existing and (self.root / date).is_dir():
                shutil.copytree(self.root / date, staging, copy_function=_link_or_copy)
            else:
                staging.mkdir()
            yield staging
            self.publish(staging, date)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def publish(self, staging: Path, date: str) -> Path:
        """Swap ``staging`` in as the run of ``date`` (replacing any previous one) and return its path."""
        final = self.root / run_date(date)
        _readable(staging)
        with self._lock():
            old = None
            if final.exists():
                old = self.root / f"{_OLD}{final.name}-{uuid.uuid4().hex[:8]}"
                os.rename(final, old)
            try:
                os.rename(staging, final)
            except BaseException:
                if old is not None:
                    os.rename(old, final)
                raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def _sweep(self) -> None:
        """Remove leftovers of crashed runs: replaced directories, and staging folders older than a day."""
        now = time.time()
        for p in self.root.iterdir():
            if not p.is_dir():
                continue
            if p.name.startswith(_OLD) or (p.name.startswith(_STAGING) and now - p.stat().st_mtime > _STALE_S):
                shutil.rmtree(p, ignore_errors=True)


def _umask() -> int:
    """The process umask, read without changing it where /proc allows (changing it races other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _readable(directory: Path) -> None:
    """Give staged files the permissions of ordinary new files (temp files are created owner-only)."""
    umask = _umask()
    directory.chmod(0o777 & ~umask)
    for p in directory.rglob("*"):
        p.chmod((0o777 if p.is_dir() else 0o666) & ~umask)


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link (files are only ever replaced, never edited in place), copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
