"""Agreement of two op graphs (a built one against a reference), phase by phase.

GEMMs are compared as multisets of ``(kind, dims)`` weighted by FLOPs: the matched share is the
reference's GEMM FLOPs that the built graph has with the same kind and dims, the extra share the
built graph's GEMM FLOPs beyond those (both relative to the reference's GEMM FLOPs). Vector and
memory traffic is compared as total bytes per phase.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

import pandas as pd

from tilecast.graph.ops import GEMM_KINDS, Op, OpGraph


def gemm_inventory(graph: OpGraph, phase: str) -> Counter:
    """``(kind, dims) -> instances`` of the GEMMs of one phase."""
    inv: Counter = Counter()
    for op in graph.select(phase=phase, kind=GEMM_KINDS).ops:
        inv[(op.kind, op.dims)] += op.count
    return inv


def _flops(key: tuple) -> float:
    kind, dims = key
    probe = Op("fw", kind, kind, *(dims if kind != "linear" else (1, *dims)))
    return probe.flops


def _rel(value: float, ref: float) -> float:
    if ref == 0:
        return 0.0 if value == 0 else float("inf")
    return value / ref - 1.0


@dataclass(frozen=True)
class PhaseAgreement:
    """One phase's comparison; ``*_delta`` are relative (built / reference - 1)."""

    phase: str
    gemm_ref_gflops: float
    gemm_gflops: float
    matched_share: float
    extra_share: float
    vec_ref_gb: float
    vec_delta: float
    mem_ref_gb: float
    mem_delta: float


def compare_phase(built: OpGraph, ref: OpGraph, phase: str) -> PhaseAgreement:
    """GEMM share and vector / memory byte deltas of ``built`` against ``ref`` in ``phase``."""
    mine, theirs = gemm_inventory(built, phase), gemm_inventory(ref, phase)
    ref_flops = sum(_flops(k) * n for k, n in theirs.items())
    my_flops = sum(_flops(k) * n for k, n in mine.items())
    matched = sum(_flops(k) * min(n, mine.get(k, 0)) for k, n in theirs.items())
    share = matched / ref_flops if ref_flops else (1.0 if not my_flops else 0.0)
    extra = (my_flops - matched) / ref_flops if ref_flops else (0.0 if not my_flops else float("inf"))
    vec_ref, mem_ref = ref.total_bytes(phase, "vec"), ref.total_bytes(phase, "mem")
    return PhaseAgreement(phase, ref_flops / 1e9, my_flops / 1e9, share, extra, vec_ref / 1e9,
                          _rel(built.total_bytes(phase, "vec"), vec_ref), mem_ref / 1e9,
                          _rel(built.total_bytes(phase, "mem"), mem_ref))


def compare_graphs(built: OpGraph, ref: OpGraph, phases: tuple[str, ...] = ("fw", "bw", "acc")) -> pd.DataFrame:
    """One row per phase present in either graph: the fields of :class:`PhaseAgreement`."""
    present = [p for p in phases if built.select(phase=p).ops or ref.select(phase=p).ops]
    return pd.DataFrame([asdict(compare_phase(built, ref, p)) for p in present])
