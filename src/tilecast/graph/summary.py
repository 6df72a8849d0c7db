"""Readable summaries of an op graph: ops by kind and phase, totals, and the memory footprint."""

from __future__ import annotations

import pandas as pd

from tilecast.graph.memory import MemoryFootprint
from tilecast.graph.ops import KINDS, PHASES, OpGraph

#: columns of the graph job's csv: the required ones first, then what a predictor row needs
OP_ROW_COLUMNS = ["phase", "kind", "op", "b", "m", "n", "k", "h", "count", "flops", "bytes", "mem_per_o",
                  "ops_per_o", "section", "name"]


def op_rows(graph: OpGraph) -> pd.DataFrame:
    """One row per distinct op (``flops``/``bytes`` per instance), phase by phase."""
    frame = graph.to_frame()[OP_ROW_COLUMNS]
    order = {p: i for i, p in enumerate(PHASES)}
    return frame.sort_values("phase", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def kind_phase_table(graph: OpGraph) -> pd.DataFrame:
    """Kernels (instances), GFLOP and GB moved per (phase, kind); each phase's total and the overall total."""
    rows = []
    for phase in [p for p in PHASES if graph.select(phase=p).ops] + ["all"]:
        sub = graph.select(phase=None if phase == "all" else phase)
        kinds = [k for k in KINDS if sub.select(kind=k).ops] if phase != "all" else []
        for kind in kinds + ["total"]:
            sel = sub if kind == "total" else sub.select(kind=kind)
            rows.append({"phase": phase, "kind": kind, "kernels": sel.count(),
                         "GFLOP": sel.total_flops() / 1e9, "GB": sel.total_bytes() / 1e9})
    return pd.DataFrame(rows).set_index(["phase", "kind"])


def _gb(x: float) -> str:
    return f"{x / 1e9:,.2f} GB"


def format_summary(graph: OpGraph, footprint: MemoryFootprint, title: str = "") -> str:
    """The graph job's printout."""
    meta = graph.meta
    head = title or f"{meta.get('model')} batch={meta.get('batch')} seq_len={meta.get('seq_len')} {meta.get('mode')}"
    lines = [f"{head}  ({graph.num_layers} layers, {len(graph)} distinct ops, {graph.count()} kernels)", ""]
    table = kind_phase_table(graph)
    lines.append(table.to_string(float_format=lambda x: f"{x:,.1f}"))
    lines += ["", f"total: {graph.total_flops() / 1e9:,.1f} GFLOP, {graph.total_bytes() / 1e9:,.1f} GB moved"]
    fp = footprint
    lines.append(f"memory ({fp.dtype}): params {_gb(fp.params_bytes)}, grads {_gb(fp.grads_bytes)}, "
                 f"optimizer {_gb(fp.optimizer_bytes)}, activations {_gb(fp.activations_bytes)}, "
                 f"transient {_gb(fp.transient_bytes)}; total {_gb(fp.total_bytes)}")
    return "\n".join(lines)
