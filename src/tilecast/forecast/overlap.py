"""Two streams, compute and communication, each running its tasks in issue order (docs/method.md §19).

A task starts when its stream is free and every task it depends on has ended. This is how FSDP / ZeRO and
DDP hide collectives under compute: the all-gather of the next block is issued while this block computes
(prefetch, limited to ``depth`` blocks in flight by FSDP's ``limit_all_gathers``), a block's gradients are
reduced while the block before it runs its backward. :func:`simulate` returns when the last task ends and
how long compute waited, attributed to the collective it waited for (the *exposed* part of each kind; the
rest of its time is *hidden*).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

COMPUTE, COMM = "compute", "comm"


@dataclass(frozen=True)
class Task:
    """One piece of work on ``stream`` taking ``ms``; ``kind`` labels it (``fw``, ``all_gather``, ...)."""

    stream: str
    ms: float
    kind: str
    deps: tuple[int, ...] = ()


@dataclass
class Timeline:
    """What :func:`simulate` found: the end of the last task, compute time, and per communication kind its
    total time and the part compute waited for it (exposed)."""

    end_ms: float = 0.0
    compute_ms: float = 0.0
    comm_ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    exposed_ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @property
    def exposed_total_ms(self) -> float:
        return float(sum(self.exposed_ms.values()))


class Schedule:
    """Build a list of tasks in issue order: :meth:`add` returns the task's index for later dependencies."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def add(self, stream: str, ms: float, kind: str, *deps: int | None) -> int:
        self.tasks.append(Task(stream, float(ms), kind, tuple(d for d in deps if d is not None and d >= 0)))
        return len(self.tasks) - 1

    def compute(self, ms: float, kind: str, *deps: int | None) -> int:
        return self.add(COMPUTE, ms, kind, *deps)

    def comm(self, ms: float, kind: str, *deps: int | None) -> int:
        return self.add(COMM, ms, kind, *deps)


def simulate(tasks: list[Task]) -> Timeline:
    """Run ``tasks`` (each depending only on earlier ones) on their two in-order streams."""
    end = [0.0] * len(tasks)
    free = {COMPUTE: 0.0, COMM: 0.0}
    last_compute_end = 0.0
    out = Timeline()
    for i, task in enumerate(tasks):
        ready = max((end[d] for d in task.deps), default=0.0)
        start = max(free[task.stream], ready)
        end[i] = start + task.ms
        free[task.stream] = end[i]
        if task.stream == COMPUTE:
            out.compute_ms += task.ms
            wait = start - last_compute_end
            if wait > 1e-12 and task.deps:  # waited for the dependency that ended last
                blocker = max(task.deps, key=lambda d: end[d])
                if tasks[blocker].stream == COMM:
                    out.exposed_ms[tasks[blocker].kind] += wait
            last_compute_end = end[i]
        else:
            out.comm_ms[task.kind] += task.ms
    out.end_ms = max(end, default=0.0)
    tail = out.end_ms - last_compute_end
    if tail > 1e-12:  # communication still running after the last compute: exposed, by the kinds that run then
        t = out.end_ms
        for i in range(len(tasks) - 1, -1, -1):
            if tasks[i].stream != COMM or t <= last_compute_end:
                continue
            start = end[i] - tasks[i].ms
            part = min(t, end[i]) - max(start, last_compute_end)
            if part > 0:
                out.exposed_ms[tasks[i].kind] += part
                t = max(start, last_compute_end)
    return out


__all__ = ["COMM", "COMPUTE", "Schedule", "Task", "Timeline", "simulate"]
