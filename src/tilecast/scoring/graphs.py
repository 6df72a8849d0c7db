"""Build the distinct graphs of a grid and deduplicate their ops across every cell.

A graph depends on the workload (model, batch, seq_len, mode, parallel, fused, dtype; for the graphs of a
serve cell also the KV length and ``serving``), never on the GPU, so each one is built once per run
(:func:`build_graphs`, run on Dask workers in chunks). The op rows of all graphs are then reduced to the
distinct ops (:func:`dedupe_ops`): the same shape in another layer, phase, graph or cell is forecast once;
the same shape in another dtype is another op.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecast.forecast.ops import COMM_KINDS
from tilecast.graph.ops import OpGraph, encode_attrs
from tilecast.graph.parallel import build_parallel_graph
from tilecast.scoring.matrix import DEFAULT_DTYPE, NO_PARALLEL
from tilecast.scoring.memory import memory_required_bytes

#: op-frame columns the scorer keeps (``name`` and totals are dropped: not needed, and large)
FRAME_COLUMNS = ("phase", "kind", "op", "dtype", "b", "m", "n", "k", "h", "hkv", "attrs", "count", "flops", "bytes",
                 "mem_per_o", "ops_per_o", "section")
#: what an op's per-instance latency depends on (plus the all-reduce group size for communication)
OP_KEY = ("kind", "op", "dtype", "b", "m", "n", "k", "h", "hkv", "attrs", "flops", "bytes", "mem_per_o", "ops_per_o",
          "degree")
INFO_COLUMNS = ("graph_id", "num_layers", "parallel_kind", "degree", "microbatches", "mem_required_bytes",
                "graph_error", "mem_error")


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


_INT_COLUMNS = ("b", "m", "n", "k", "h", "hkv", "count")


def _append_rows(columns: dict[str, list], graph_id: int, graph: OpGraph) -> None:
    """The graph's op rows (:data:`FRAME_COLUMNS`, as ``OpGraph.to_frame`` has them) onto ``columns``."""
    for o in graph.ops:
        columns["graph_id"].append(graph_id)
        columns["phase"].append(o.phase)
        columns["kind"].append(o.kind)
        columns["op"].append(o.op)
        columns["dtype"].append(o.dtype)
        columns["b"].append(o.b)
        columns["m"].append(o.m)
        columns["n"].append(o.n)
        columns["k"].append(o.k)
        columns["h"].append(o.h)
        columns["hkv"].append(o.hkv)
        columns["attrs"].append(encode_attrs(o.attrs))
        columns["count"].append(o.count)
        columns["flops"].append(o.flops)
        columns["bytes"].append(o.bytes)
        columns["mem_per_o"].append(o.mem_per_o)
        columns["ops_per_o"].append(o.ops_per_o)
        columns["section"].append(o.section)


def _rows_frame(columns: dict[str, list]) -> pd.DataFrame:
    data = {c: (np.asarray(v, dtype=np.int64) if c in _INT_COLUMNS or c == "graph_id" else
                np.asarray(v, dtype=float) if c in ("flops", "bytes", "mem_per_o", "ops_per_o") else
                np.asarray(v, dtype=object)) for c, v in columns.items()}
    return pd.DataFrame(data, columns=["graph_id", *FRAME_COLUMNS])


def build_graphs(graphs: pd.DataFrame, optimizer: str | None = "adamw") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Op rows (``graph_id`` + :data:`FRAME_COLUMNS`) and one info row per graph (:data:`INFO_COLUMNS`).

    ``graphs`` holds ``graph_id`` and the graph keys (:data:`~tilecast.scoring.matrix.BUILD_KEYS`; without a
    ``dtype`` column every graph is fp32, without ``kv_len`` / ``serving`` none is a serving graph);
    ``optimizer`` is the state training cells hold. A serving graph's memory is left to the serve
    scorer (:func:`tilecast.forecast.serve.serve_memory_terms`: weights, KV cache and workspace per GPU).
    A graph that cannot be built gets its error text in ``graph_error`` (its cells will carry it); the
    others are unaffected. A memory model failure leaves the graph's memory unknown (``mem_error``),
    its latency still stands. Runs on a Dask worker.
    """
    columns: dict[str, list] = {c: [] for c in ("graph_id", *FRAME_COLUMNS)}
    info = []
    if "dtype" not in graphs:  # graph keys listed before the dtype axis: fp32
        graphs = graphs.assign(dtype=DEFAULT_DTYPE)
    if "kv_len" not in graphs:
        graphs = graphs.assign(kv_len=0, serving=False)
    for g in graphs.itertuples(index=False):
        parallel = None if g.parallel == NO_PARALLEL else g.parallel
        row = {"graph_id": g.graph_id, "num_layers": 1, "parallel_kind": None, "degree": 1, "microbatches": 1,
               "mem_required_bytes": np.nan, "graph_error": None, "mem_error": None}
        try:
            graph = build_parallel_graph(g.model, int(g.batch), int(g.seq_len), g.mode, parallel, bool(g.fused),
                                         dtype=str(g.dtype), kv_len=int(g.kv_len), serving=bool(g.serving))
        except Exception as exc:  # noqa: BLE001 - any failure is this cell's error, never the run's
            row["graph_error"] = _error(exc)
            info.append(row)
            continue
        meta = graph.meta
        tag = meta.get("parallel")
        row.update(num_layers=int(graph.num_layers or 1), degree=int(meta.get("degree", 1) or 1),
                   microbatches=int(meta.get("microbatches", 1) or 1),
                   parallel_kind=None if not tag else str(tag)[:2])
        try:
            if not g.serving:
                row["mem_required_bytes"] = memory_required_bytes(g.model, int(g.batch), int(g.seq_len), g.mode,
                                                                  parallel, optimizer, dtype=str(g.dtype))
        except Exception as exc:  # noqa: BLE001 - the latency stands; ``fits`` stays unknown
            row["mem_error"] = _error(exc)
        _append_rows(columns, g.graph_id, graph)
        info.append(row)
    return _rows_frame(columns), pd.DataFrame(info, columns=list(INFO_COLUMNS))


@dataclass(frozen=True)
class DistinctOps:
    """``rows``: every op row of every graph with ``op_id`` (its distinct op); ``distinct``: one row per op."""

    rows: pd.DataFrame
    distinct: pd.DataFrame


def dedupe_ops(rows: pd.DataFrame, degree_of_graph: pd.Series) -> DistinctOps:
    """Number the distinct ops (:data:`OP_KEY`: an op of another dtype is another op); the group size only
    matters for communication ops."""
    rows = rows.reset_index(drop=True)
    is_comm = rows["kind"].isin(COMM_KINDS).to_numpy()
    degree = rows["graph_id"].map(degree_of_graph).to_numpy(dtype=np.int64)
    rows["degree"] = np.where(is_comm, degree, 1)
    codes = rows.groupby(list(OP_KEY), sort=False, dropna=False).ngroup().to_numpy()
    rows["op_id"] = codes
    first = np.unique(codes, return_index=True)[1]
    distinct = rows.iloc[first][list(OP_KEY)].reset_index(drop=True)
    distinct.index.name = "op_id"
    return DistinctOps(rows, distinct)
