"""From per-op latencies to wall-clock phases: sequential, data-parallel overlap, pipeline schedule.

Inputs are per-section phase totals (ms summed over op instances): a :class:`PhaseTotals`. Each
schedule returns the wall-clock ``fw_ms``, ``bw_ms`` and ``acc_ms`` whose sum is the step time
(inference graphs have no bw / acc ops, so the same sum is the forward pass).

- sequential (one GPU, tensor parallel): every op in turn, communication included.
- dp: the forward, then the backward (with gradient accumulation) as one compute stream, its
  sections in backward order (epilogue, the layers last to first, prologue); each section's
  gradient all-reduces start when its backward is done and the link is free. The step ends when
  both streams are done (:func:`overlap_end_ms`).
- pp (GPipe, fill and drain): ``p`` stages, the prologue on the first, the epilogue on the last, the
  layers spread evenly; with ``m`` micro-batches each phase takes the sum of the stage times, one
  send-recv per boundary, and ``m - 1`` more times of its slowest stage. One micro-batch gives
  docs/method.md §9's formula (one send-recv per boundary and direction).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SECTIONS = ("prologue", "layer", "epilogue")
PHASES = ("fw", "bw", "acc")


@dataclass(frozen=True)
class PhaseTotals:
    """``compute[phase][section]`` and ``comm[phase][section]``: ms summed over op instances."""

    compute: dict[str, dict[str, float]]
    comm: dict[str, dict[str, float]]
    num_layers: int = 1
    degree: int = 1
    microbatches: int = 1

    def phase(self, phase: str, with_comm: bool = True) -> float:
        total = sum(self.compute[phase].values())
        return total + (sum(self.comm[phase].values()) if with_comm else 0.0)


def overlap_end_ms(compute_ms: np.ndarray, comm_ms: np.ndarray) -> float:
    """End of two streams: event ``i`` computes ``compute_ms[i]``, then its ``comm_ms[i]`` is sent on a
    link that serves events in order. Vectorised max-plus recurrence (no Python loop)."""
    compute_ms, comm_ms = np.asarray(compute_ms, float), np.asarray(comm_ms, float)
    if compute_ms.size == 0:
        return 0.0
    done = np.cumsum(compute_ms)
    sent = np.cumsum(comm_ms)
    link_end = sent + np.maximum.accumulate(done - (sent - comm_ms))
    return float(max(done[-1], link_end[-1]))


def sequential(t: PhaseTotals) -> dict[str, float]:
    """Every op in turn."""
    return {"fw_ms": t.phase("fw"), "bw_ms": t.phase("bw"), "acc_ms": t.phase("acc")}


def data_parallel(t: PhaseTotals) -> dict[str, float]:
    """Gradient all-reduces overlap the backward pass, per layer."""
    acc = t.phase("acc", with_comm=False)
    if t.phase("bw") == 0 and acc == 0:
        return sequential(t)
    L = max(1, t.num_layers)

    def per_section(table: dict[str, dict[str, float]], phases: tuple[str, ...]) -> np.ndarray:
        s = {sec: sum(table[ph].get(sec, 0.0) for ph in phases) for sec in SECTIONS}
        return np.array([s["epilogue"], *([s["layer"] / L] * L), s["prologue"]])

    compute = per_section(t.compute, ("bw", "acc"))
    comm = per_section(t.comm, ("bw", "acc"))
    end = overlap_end_ms(compute, comm)
    return {"fw_ms": t.phase("fw"), "bw_ms": end - acc, "acc_ms": acc}


def stage_layers(num_layers: int, stages: int) -> np.ndarray:
    """Layers per pipeline stage, as even as possible (earlier stages take the remainder)."""
    base, extra = divmod(num_layers, stages)
    return np.array([base + (1 if i < extra else 0) for i in range(stages)], dtype=float)


def pipeline_parallel(t: PhaseTotals) -> dict[str, float]:
    """GPipe fill-and-drain over ``degree`` stages with ``microbatches`` micro-batches."""
    p, m, L = t.degree, t.microbatches, max(1, t.num_layers)
    layers = stage_layers(L, p)

    def stage_ms(phase: str) -> np.ndarray:
        c = t.compute[phase]
        ms = layers * c.get("layer", 0.0) / L
        ms[0] += c.get("prologue", 0.0)
        ms[-1] += c.get("epilogue", 0.0)
        return ms

    def sendrecv_ms(phase: str) -> float:
        return sum(t.comm[phase].values())  # (p - 1) boundaries, all in the totals

    fw = stage_ms("fw")
    bw, acc = stage_ms("bw"), stage_ms("acc")
    fw_span = fw.sum() + sendrecv_ms("fw") + (m - 1) * fw.max()
    back = bw + acc
    slow = int(np.argmax(back))
    bw_span = back.sum() + sendrecv_ms("bw") + sendrecv_ms("acc") + (m - 1) * back[slow]
    acc_ms = float(acc.sum() + (m - 1) * acc[slow])
    return {"fw_ms": float(fw_span), "bw_ms": float(bw_span) - acc_ms, "acc_ms": acc_ms}


#: parallel kind (None: one GPU) -> schedule
SCHEDULES: dict[str | None, Callable[[PhaseTotals], dict[str, float]]] = {
    None: sequential,
    "tp": sequential,
    "dp": data_parallel,
    "pp": pipeline_parallel,
}


def schedule(kind: str | None, totals: PhaseTotals) -> dict[str, float]:
    """Wall-clock ``fw_ms``, ``bw_ms``, ``acc_ms`` and ``e2e_ms`` of one step under ``kind``."""
    if kind not in SCHEDULES:
        raise ValueError(f"no schedule for parallel kind {kind!r}; known: {', '.join(map(str, SCHEDULES))}")
    out = SCHEDULES[kind](totals)
    out["e2e_ms"] = out["fw_ms"] + out["bw_ms"] + out["acc_ms"]
    return out
