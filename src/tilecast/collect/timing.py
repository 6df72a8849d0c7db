"""Timing the way the shipped data was measured: warm-up, N timed calls, mean of the k fastest.

CUDA: one pair of CUDA events around each call (device time, ms). CPU: ``time.perf_counter``
around each call. Both return every sample so callers can aggregate more than one phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from tilecast.errors import UserError


@dataclass(frozen=True)
class TimingPlan:
    """How many calls to warm up with, to time, and how many of the fastest to average."""

    warmup: int = 5
    repeats: int = 25
    fastest: int = 5

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.repeats < 1 or not 1 <= self.fastest <= self.repeats:
            raise UserError(f"invalid timing plan warmup={self.warmup}, repeats={self.repeats}, "
                             f"fastest={self.fastest}: need warmup >= 0 and 1 <= fastest <= repeats")


def mean_of_fastest(samples_ms: Sequence[float], k: int) -> float:
    """Mean of the ``k`` smallest samples (all of them when fewer)."""
    if not samples_ms:
        raise ValueError("no timing samples")
    best = sorted(samples_ms)[:k]
    return sum(best) / len(best)


def time_phases(phases: Sequence[Callable[[], object]], device: torch.device, plan: TimingPlan,
                before: Callable[[], object] | None = None) -> list[list[float]]:
    """Run ``phases`` in order ``warmup + repeats`` times; per timed repeat, the ms of each phase.

    ``before`` runs ahead of every repeat, outside the timed region.
    """
    timer = _cuda_repeat if device.type == "cuda" else _cpu_repeat
    for _ in range(plan.warmup):
        if before is not None:
            before()
        for ph in phases:
            ph()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    out = []
    for _ in range(plan.repeats):
        if before is not None:
            before()
        out.append(timer(phases, device))
    return out


def time_call(fn: Callable[[], object], device: torch.device, plan: TimingPlan) -> float:
    """Latency of ``fn`` in ms: mean of the ``plan.fastest`` fastest of ``plan.repeats`` timed calls."""
    samples = [s[0] for s in time_phases([fn], device, plan)]
    return mean_of_fastest(samples, plan.fastest)


def _cuda_repeat(phases: Sequence[Callable[[], object]], device: torch.device) -> list[float]:
    events = [torch.cuda.Event(enable_timing=True) for _ in range(len(phases) + 1)]
    events[0].record()
    for ph, ev in zip(phases, events[1:], strict=True):
        ph()
        ev.record()
    events[-1].synchronize()
    return [a.elapsed_time(b) for a, b in zip(events, events[1:], strict=False)]


def _cpu_repeat(phases: Sequence[Callable[[], object]], device: torch.device) -> list[float]:
    marks = [time.perf_counter()]
    for ph in phases:
        ph()
        marks.append(time.perf_counter())
    return [(b - a) * 1e3 for a, b in zip(marks, marks[1:], strict=False)]
