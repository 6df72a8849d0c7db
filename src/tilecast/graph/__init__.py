"""Workload -> operator graph: op kinds, family builders, training expansion, fusion, memory, fx tracing,
and the reader for the reference graphs shipped with the data."""

from tilecast.graph.build import build_graph
from tilecast.graph.compare import compare_graphs
from tilecast.graph.memory import MemoryFootprint, memory_footprint
from tilecast.graph.ops import Op, OpGraph
from tilecast.graph.reference import parse_reference

__all__ = ["MemoryFootprint", "Op", "OpGraph", "TraceResult", "build_graph", "compare_graphs",
           "memory_footprint", "parse_reference", "trace_module"]


def __getattr__(name: str):
    """``trace_module`` / ``TraceResult`` import torch.fx lazily (the rest of the package does not need it)."""
    if name in ("trace_module", "TraceResult", "TraceError"):
        from tilecast.graph import fx_tracer

        return getattr(fx_tracer, name)
    raise AttributeError(f"module 'tilecast.graph' has no attribute {name!r}")
