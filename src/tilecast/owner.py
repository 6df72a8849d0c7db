"""Which process owns something a job leaves on disk or in MLflow, and whether that process still runs.

An :class:`Owner` is a process's id, host, boot id and start time. The start time (clock ticks since boot,
``/proc/<pid>/stat``) and the boot id tell a dead owner from a new process that got the same pid after a
restart or pid reuse. On another host nothing can be checked: :meth:`Owner.alive` says ``None`` and the
caller decides by age.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, start ticks)`` of ``pid`` from ``/proc/<pid>/stat``; None where there is no /proc entry."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces and parentheses
    return fields[0], int(fields[19])


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    boot: str | None = None
    started: int | None = None

    @classmethod
    def current(cls) -> Owner:
        """This process."""
        stat = _stat(os.getpid())
        return cls(os.getpid(), socket.gethostname(), _boot_id(), stat[1] if stat else None)

    def alive(self) -> bool | None:
        """True while the owning process runs, False once it has ended, None where this host cannot tell."""
        if self.host != socket.gethostname():
            return None
        boot = _boot_id()
        if self.boot and boot and self.boot != boot:
            return False  # the host restarted since
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, another user's
        stat = _stat(self.pid)
        if stat is None:
            return True
        state, started = stat
        if state in ("Z", "X"):
            return False  # killed, not reaped yet
        return self.started is None or started == self.started  # else: the pid was reused

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Owner | None:
        """The owner recorded in ``data``; None when it is not one (a marker written by something else)."""
        if not isinstance(data, dict):
            return None
        try:
            pid, host = int(data["pid"]), data["host"]
            boot, started = data.get("boot"), data.get("started")
            if not isinstance(host, str) or not host or pid <= 0:
                return None
            return cls(pid, host, str(boot) if boot else None, int(started) if started not in (None, "") else None)
        except (KeyError, TypeError, ValueError):
            return None
