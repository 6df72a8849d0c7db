"""Per-op latencies of the distinct ops -> one summary per (graph, GPU) cell, vectorised.

For every GPU, each op row's total time (``count`` x per-instance ms of its distinct op) is summed
with ``np.bincount`` into per-graph buckets: phase x section x compute/communication (what the
schedule needs) and breakdown group. The schedule of the graph's parallel kind
(:func:`tilecast.forecast.schedule.schedule`) then turns the phase totals into wall-clock phases;
this matches :func:`tilecast.forecast.summarise` cell for cell (tests check it), without a Python
loop over ops.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.forecast.ops import COMM_KINDS
from tilecast.forecast.schedule import PHASES, SCHEDULES, SECTIONS, PhaseTotals, schedule, sequential
from tilecast.forecast.summary import GROUPS, op_groups

_NP, _NS = len(PHASES), len(SECTIONS)
_NB = _NP * _NS * 2  # phase x section x (compute, comm)


def _codes(values: pd.Series, names: tuple[str, ...], what: str) -> np.ndarray:
    codes = pd.Categorical(values, categories=names).codes.astype(np.int64)
    if (codes < 0).any():
        bad = values.to_numpy()[codes < 0][0]
        raise ValueError(f"op {what} {bad!r} is not one of {', '.join(names)}")
    return codes


def summarise_cells(rows: pd.DataFrame, op_ms: np.ndarray, info: pd.DataFrame, gpu_keys: list[str]
                    ) -> pd.DataFrame:
    """Summaries of every (graph, GPU) pair.

    ``rows``: op rows with ``graph_id``, ``op_id``, ``count``, ``phase``, ``section``, ``kind``, ``op``;
    ``op_ms``: per-instance ms, shape (distinct ops, GPUs), NaN where a prediction failed; ``info``:
    one row per built graph (``graph_id``, ``num_layers``, ``parallel_kind``, ``degree``, ``microbatches``).
    Returns ``graph_id``, ``gpu``, ``e2e_ms``, ``fw_ms``, ``bw_ms``, ``acc_ms``, ``ms_<group>`` and
    ``nan_ops`` (op rows without a latency: the cell cannot be summarised).
    """
    graph_ids = info["graph_id"].to_numpy()
    gidx = pd.Index(graph_ids).get_indexer(rows["graph_id"].to_numpy())
    if (gidx < 0).any():
        raise ValueError("op rows reference a graph without an info row")
    n_graphs = len(graph_ids)
    phase = _codes(rows["phase"], PHASES, "phase")
    section = _codes(rows["section"], SECTIONS, "section")
    comm = rows["kind"].isin(COMM_KINDS).to_numpy().astype(np.int64)
    group = _codes(pd.Series(op_groups(rows)), GROUPS, "group")
    bucket = gidx * _NB + (phase * _NS + section) * 2 + comm
    gbucket = gidx * len(GROUPS) + group
    count = rows["count"].to_numpy(dtype=float)
    op_id = rows["op_id"].to_numpy()
    out = []
    for j, gpu in enumerate(gpu_keys):
        total = count * op_ms[op_id, j]
        bad = np.isnan(total)
        nan_ops = np.bincount(gidx, weights=bad.astype(float), minlength=n_graphs)
        total = np.where(bad, 0.0, total)
        pt = np.bincount(bucket, weights=total, minlength=n_graphs * _NB).reshape(n_graphs, _NP, _NS, 2)
        by_group = np.bincount(gbucket, weights=total, minlength=n_graphs * len(GROUPS)).reshape(n_graphs, -1)
        sched = _schedule_all(pt, info)
        frame = pd.DataFrame({"graph_id": graph_ids, "gpu": gpu, **sched,
                              **{f"ms_{g}": by_group[:, i] for i, g in enumerate(GROUPS)},
                              "nan_ops": nan_ops.astype(np.int64)})
        out.append(frame)
    return pd.concat(out, ignore_index=True)


#: parallel kinds whose schedule runs every op in turn: their phases are plain sums (vectorised below)
_SEQUENTIAL = frozenset(k for k, f in SCHEDULES.items() if f is sequential)


def _schedule_all(pt: np.ndarray, info: pd.DataFrame) -> dict[str, np.ndarray]:
    """Wall-clock phases per graph: sums for the sequential kinds (one GPU, tensor parallel), one schedule
    call per graph for the others (dicts of a few floats; no op loop)."""
    kinds = np.array([k if isinstance(k, str) else None for k in info["parallel_kind"].to_numpy(dtype=object)],
                     dtype=object)
    phase_sum = pt.sum(axis=(2, 3))  # graphs x phases, compute and communication
    res = {f"{ph}_ms": phase_sum[:, p].copy() for p, ph in enumerate(PHASES)}
    layers = info["num_layers"].to_numpy(dtype=np.int64)
    degree = info["degree"].to_numpy(dtype=np.int64)
    micro = info["microbatches"].to_numpy(dtype=np.int64)
    for i in np.flatnonzero([k not in _SEQUENTIAL for k in kinds]):
        compute = {ph: {sec: float(pt[i, p, s, 0]) for s, sec in enumerate(SECTIONS)} for p, ph in enumerate(PHASES)}
        comm = {ph: {sec: float(pt[i, p, s, 1]) for s, sec in enumerate(SECTIONS)} for p, ph in enumerate(PHASES)}
        out = schedule(kinds[i], PhaseTotals(compute, comm, int(layers[i]), int(degree[i]), int(micro[i])))
        for ph in PHASES:
            res[f"{ph}_ms"][i] = out[f"{ph}_ms"]
    res["e2e_ms"] = res["fw_ms"] + res["bw_ms"] + res["acc_ms"]
    return {k: res[k] for k in ("e2e_ms", "fw_ms", "bw_ms", "acc_ms")}
