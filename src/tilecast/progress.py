"""One line per phase of long work, with counts and elapsed time, in a log as on a terminal.

``with phase("graphs", "7058 to build") as p: ...; p.done("7058 built, 0 from the cache")`` logs
``graphs: 7058 to build ...`` when the phase starts and ``graphs: 7058 built, 0 from the cache (95.2 s, 61.0 CPU-s)``
when it ends (``failed after`` when it raises), on the ``tilecast.progress`` logger at INFO: a nightly with its stdout
in a file says what it is doing every phase, not only at the end. The terminal's progress bars (tqdm) are extra.

The CPU-seconds are those of the job and every process under it (Dask workers included, :func:`cpu_seconds`): on a
shared machine the wall time says how loaded it was, the CPU-seconds what the phase costs.
"""

from __future__ import annotations

import logging
import os
import time

log = logging.getLogger("tilecast.progress")


def cpu_seconds() -> float:
    """User + system CPU-seconds of this process, of its children that ended, and of those still running (Dask's
    workers: their own CPU and their children's), so far."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):  # ended meanwhile: counted once reaped
                pass
    except ImportError:  # psutil comes with Dask; without it only this process and its ended children count
        pass
    return total


class phase:  # noqa: N801 (a context manager read as a verb: ``with phase(...)``)
    """Log the start and the end (elapsed seconds, what it did) of one phase of a job."""

    def __init__(self, name: str, detail: str = "") -> None:
        self.name, self.detail, self.result = name, detail, ""

    def done(self, result: str) -> None:
        """What the phase did, for its closing line."""
        self.result = result

    def __enter__(self) -> phase:
        self.t0, self.cpu0 = time.perf_counter(), cpu_seconds()
        log.info("%s: %s ...", self.name, self.detail or "started")
        return self

    def __exit__(self, kind, exc, tb) -> None:
        elapsed, cpu = time.perf_counter() - self.t0, cpu_seconds() - self.cpu0
        if exc is not None:
            log.info("%s: failed after %.1f s (%.1f CPU-s)", self.name, elapsed, cpu)
        else:
            log.info("%s: %s (%.1f s, %.1f CPU-s)", self.name, self.result or "done", elapsed, cpu)
