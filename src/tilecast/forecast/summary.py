"""Per-op latencies -> the numbers people ask for: step time, phases, and time per op group.

:func:`summarise` works on one workload's op frame; :func:`summarise_many` on many workloads stacked
in one frame (a ``cell`` column), in one pass. The parallel scheme and layer count come from the
arguments, else per-row ``parallel`` / ``num_layers`` columns, else the frame's ``attrs`` (which
:func:`tilecast.forecast.graph_frame` sets).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.forecast.ops import COMM_KINDS, lookup, op_family
from tilecast.forecast.schedule import PHASES, SECTIONS, PhaseTotals, schedule
from tilecast.graph.parallel import parse_parallel

#: op groups of the breakdown: the kernel families, data movement, communication (expert-parallel all-to-all
#: included), the rest
GROUPS = ("bmm", "linear", "elementwise", "softmax", "layernorm", "tc_gemm", "attn_prefill", "attn_decode",
          "vec_half", "moe", "mla_prefill", "mla_decode", "mem", "comm", "other")
SUMMARY_KEYS = ("e2e_ms", "fw_ms", "bw_ms", "acc_ms", *(f"ms_{g}" for g in GROUPS))
_PHASE = {p: i for i, p in enumerate(PHASES)}
_SECTION = {s: i for i, s in enumerate(SECTIONS)}
_GROUP = {g: i for i, g in enumerate(GROUPS)}
_SLOTS = len(PHASES) * len(SECTIONS) * 2  # phase x section x (compute, comm)


def op_groups(op_frame: pd.DataFrame) -> np.ndarray:
    """Breakdown group of each op row (a key of :data:`GROUPS`)."""
    fam = op_family(op_frame)
    kind = op_frame["kind"].to_numpy(dtype=object)
    out = np.where(pd.notna(fam), fam, "other").astype(object)
    out[kind == "mem"] = "mem"
    out[np.isin(kind, COMM_KINDS) | (kind == "a2a")] = "comm"
    return out


def _codes(values: np.ndarray, table: dict[str, int], what: str) -> np.ndarray:
    codes = lookup(values, table, -1).astype(np.int64)
    if (codes < 0).any():
        bad = np.asarray(values, dtype=object)[codes < 0][0]
        raise ValueError(f"op frame has {what} {bad!r}; known: {', '.join(table)}")
    return codes


def _slots(op_frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per row: its (phase, section, compute|comm) slot and its breakdown group code."""
    kind = op_frame["kind"].to_numpy(dtype=object)
    phase = _codes(op_frame["phase"].to_numpy(dtype=object), _PHASE, "phase")
    section = _codes(op_frame["section"].to_numpy(dtype=object), _SECTION, "section")
    comm = np.isin(kind, COMM_KINDS).astype(np.int64)
    slot = (phase * len(SECTIONS) + section) * 2 + comm
    return slot, _codes(op_groups(op_frame), _GROUP, "group")


def _totals(sums: np.ndarray, layers: int, degree: int, micro: int) -> PhaseTotals:
    grid = sums.reshape(len(PHASES), len(SECTIONS), 2)
    compute = {p: {s: float(grid[i, j, 0]) for j, s in enumerate(SECTIONS)} for i, p in enumerate(PHASES)}
    comm = {p: {s: float(grid[i, j, 1]) for j, s in enumerate(SECTIONS)} for i, p in enumerate(PHASES)}
    return PhaseTotals(compute, comm, layers, degree, micro)


def _result(sums: np.ndarray, groups: np.ndarray, parallel: str | None, layers: int) -> dict[str, float]:
    spec = parse_parallel(parallel)
    totals = _totals(sums, layers, spec.degree if spec else 1, spec.microbatches if spec else 1)
    out = schedule(spec.kind if spec else None, totals)
    result = {k: float(out[k]) for k in SUMMARY_KEYS[:4]}
    result.update({f"ms_{g}": float(groups[i]) for i, g in enumerate(GROUPS)})
    return result


def summarise(op_frame: pd.DataFrame, ms: np.ndarray, parallel: str | None = None,
              num_layers: int | None = None) -> dict[str, float]:
    """``e2e_ms``, wall-clock ``fw_ms`` / ``bw_ms`` / ``acc_ms`` (their sum is ``e2e_ms``) and ``ms_<group>``
    (kernel time per group summed over one GPU's ops, for every group of :data:`GROUPS`).

    ``ms`` is per op instance (``op_latency_ms``); ``parallel`` (``dp4``, ``pp4_1``...) and ``num_layers``
    default to the frame's ``attrs``.
    """
    ms = np.asarray(ms, dtype=float)
    if ms.shape != (len(op_frame),):
        raise ValueError(f"ms has shape {ms.shape}; expected one value per op row ({len(op_frame)})")
    attrs = op_frame.attrs
    parallel = parallel if parallel is not None else attrs.get("parallel")
    layers = int(num_layers if num_layers is not None else attrs.get("num_layers", 1) or 1)
    total = ms * op_frame["count"].to_numpy(dtype=float)
    slot, group = _slots(op_frame)
    sums = np.bincount(slot, weights=total, minlength=_SLOTS)
    return _result(sums, np.bincount(group, weights=total, minlength=len(GROUPS)), parallel, layers)


def summarise_many(op_frame: pd.DataFrame, ms: np.ndarray, cell: str = "cell") -> pd.DataFrame:
    """:func:`summarise` for many workloads stacked in one frame: one row per distinct ``cell`` value
    (index, in order of first appearance) with :data:`SUMMARY_KEYS`. Per-row ``parallel`` and
    ``num_layers`` columns describe each cell (absent: one GPU, one layer)."""
    ms = np.asarray(ms, dtype=float)
    if ms.shape != (len(op_frame),):
        raise ValueError(f"ms has shape {ms.shape}; expected one value per op row ({len(op_frame)})")
    codes, cells = pd.factorize(op_frame[cell], sort=False)
    n = len(cells)
    total = ms * op_frame["count"].to_numpy(dtype=float)
    slot, group = _slots(op_frame)
    sums = np.bincount(codes * _SLOTS + slot, weights=total, minlength=n * _SLOTS).reshape(n, _SLOTS)
    groups = np.bincount(codes * len(GROUPS) + group, weights=total, minlength=n * len(GROUPS)).reshape(n, -1)
    first = np.unique(codes, return_index=True)[1]
    par = op_frame["parallel"].to_numpy(dtype=object)[first] if "parallel" in op_frame else [None] * n
    layers = op_frame["num_layers"].to_numpy()[first] if "num_layers" in op_frame else np.ones(n)
    rows = [_result(sums[i], groups[i], None if pd.isna(par[i]) else par[i], int(layers[i] or 1))
            for i in range(n)]
    return pd.DataFrame(rows, index=pd.Index(cells, name=cell), columns=list(SUMMARY_KEYS))
