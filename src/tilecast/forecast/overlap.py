"""Two streams, compute and communication, each running its tasks in issue order (docs/method.md §19).

A task starts when its stream is free and every task it depends on has ended. This is how FSDP / ZeRO and
DDP hide collectives under compute: the all-gather of the next block is issued while this block computes
(prefetch, limited to ``depth`` blocks in flight by FSDP's ``limit_all_gathers``), a block's gradients are
reduced while the block before it runs its backward. :func:`simulate` returns when the last task ends and
how long compute waited, attributed to the collective it waited for (the *exposed* part of each kind; the
rest of its time is *hidden*).

Hidden is not free: NCCL runs its collectives as kernels, one thread block per channel, each holding an SM for
as long as the collective runs. While a collective is in flight the compute stream therefore runs on the SMs
left, at ``1 - contention`` of its speed (``contention``: the share of the SMs NCCL holds, see
:func:`tilecast.forecast.train_run.nccl_sm_share`); the compute time lost is attributed to the collective kinds
in flight (:attr:`Timeline.contention_ms`). With ``contention = 0`` hidden communication costs nothing.
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
    """What :func:`simulate` found: the end of the last task, compute time (the tasks' own ``ms``), and per
    communication kind its total time, the part compute waited for it (exposed) and the compute time it cost by
    holding SMs while compute ran (contention)."""

    end_ms: float = 0.0
    compute_ms: float = 0.0
    comm_ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    exposed_ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    contention_ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))

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


def simulate(tasks: list[Task], contention: float = 0.0) -> Timeline:
    """Run ``tasks`` (each depending only on earlier ones) on their two in-order streams; compute runs at
    ``1 - contention`` of its speed while a collective is in flight (module docstring)."""
    if not 0.0 <= contention < 1.0:
        raise ValueError(f"contention must be in [0, 1), got {contention!r}")
    queues: dict[str, list[int]] = {COMPUTE: [], COMM: []}
    for i, task in enumerate(tasks):
        queues[task.stream].append(i)
    head = {COMPUTE: 0, COMM: 0}
    running: dict[str, tuple[int, float]] = {}  # stream -> (task, work left in ms)
    end: list[float | None] = [None] * len(tasks)
    now, last_compute_end = 0.0, 0.0
    out = Timeline()
    while any(head[st] < len(queues[st]) for st in queues) or running:
        progressed = False
        for st in (COMPUTE, COMM):  # start what can start
            while st not in running and head[st] < len(queues[st]):
                i = queues[st][head[st]]
                if any(end[d] is None for d in tasks[i].deps):
                    break
                head[st] += 1
                progressed = True
                task = tasks[i]
                if st == COMPUTE:
                    out.compute_ms += task.ms
                    wait = now - last_compute_end
                    if wait > 1e-12 and task.deps:  # waited for the dependency that ended last
                        blocker = max(task.deps, key=lambda d: end[d])
                        if tasks[blocker].stream == COMM:
                            out.exposed_ms[tasks[blocker].kind] += wait
                else:
                    out.comm_ms[task.kind] += task.ms
                if task.ms <= 0.0:
                    end[i] = now
                    if st == COMPUTE:
                        last_compute_end = now
                    continue
                running[st] = (i, task.ms)
        if not running:
            if progressed:
                continue
            raise ValueError("the tasks wait on each other: a dependency on a later task")
        slowed = COMM in running and COMPUTE in running and contention > 0.0
        rate = {COMPUTE: 1.0 - contention if slowed else 1.0, COMM: 1.0}
        dt = min(left / rate[st] for st, (_, left) in running.items())
        now += dt
        if slowed:
            out.contention_ms[tasks[running[COMM][0]].kind] += contention * dt
        for st in list(running):
            i, left = running[st]
            left -= rate[st] * dt
            if left <= 1e-9 * max(1.0, tasks[i].ms):
                end[i] = now
                del running[st]
                if st == COMPUTE:
                    last_compute_end = now
            else:
                running[st] = (i, left)
    out.end_ms = max((e for e in end if e is not None), default=0.0)
    tail = out.end_ms - last_compute_end
    if tail > 1e-12:  # communication still running after the last compute: exposed, by the kinds that run then
        t = out.end_ms
        for i in range(len(tasks) - 1, -1, -1):
            if tasks[i].stream != COMM or t <= last_compute_end:
                continue
            finish = end[i] or 0.0
            start = finish - tasks[i].ms
            part = min(t, finish) - max(start, last_compute_end)
            if part > 0:
                out.exposed_ms[tasks[i].kind] += part
                t = max(start, last_compute_end)
    return out


__all__ = ["COMM", "COMPUTE", "Schedule", "Task", "Timeline", "simulate"]
