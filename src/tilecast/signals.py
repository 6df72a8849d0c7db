"""SIGTERM and SIGINT: handled like a crash at every step, and never in the middle of a step that must be whole.

Every job installs :func:`install` at start: SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``, as
SIGINT already does), so an MLflow run the job has open is closed FAILED by its context manager, a staged output is
removed by its own, and the job exits ``128 + signal`` with one line (:func:`tilecast.cli.with_catalog_args`).
Nothing stays RUNNING, and nothing is left half-recorded by a signal.

A step that must be whole (an alias move: its history record and the alias itself; a promotion: every family's
move and the servable forecaster that follows them) runs inside :class:`held`: a SIGTERM or SIGINT that arrives
then is kept and raised when the step is done, so the alias and its history always agree (a SIGKILL cannot be
caught: that is what the history-first design of :mod:`tilecast.registry.aliases` and the next job's clean-up of
dead runs are for). Outside the main thread, or in a process that did not :func:`install`, :class:`held` is a
no-op for signals it cannot see.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

#: the signals handled like a crash
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM, or SIGINT in :class:`held`): handled as an interruption."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_HOLD_DEPTH = 0
_PENDING: list[int] = []


def _handler(signum: int, frame: FrameType | None) -> None:
    if _HOLD_DEPTH:
        _PENDING.append(signum)  # raised when the whole step is done
        return
    raise Terminated(signum)


def install() -> None:
    """Raise :class:`Terminated` on SIGTERM and SIGINT in this process (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _handler)


class held:  # noqa: N801 (a context manager used like a function: ``with held("promotion"):``)
    """Run a step whole: a SIGTERM / SIGINT that arrives inside is raised (as :class:`Terminated`) only when the
    outermost ``held`` block ends. ``hold()`` / ``release()`` do the same where a ``with`` block cannot span
    the step (from the first alias move to after the MLflow run is closed)."""

    def __init__(self, what: str = "") -> None:
        self.what = what
        self._on = False

    def hold(self) -> None:
        global _HOLD_DEPTH
        if not self._on:
            self._on = True
            _HOLD_DEPTH += 1

    def release(self) -> None:
        global _HOLD_DEPTH
        if not self._on:
            return
        self._on = False
        _HOLD_DEPTH -= 1
        if _HOLD_DEPTH == 0 and _PENDING:
            signum = _PENDING[0]
            _PENDING.clear()
            raise Terminated(signum)

    def __enter__(self) -> held:
        self.hold()
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self.release()  # a held signal is raised now (after an error inside too: the job was asked to stop)
