"""One GPU's graph of a model spread by a :class:`~tilecast.specs.layout.Layout` (mixture-of-experts decoders).

Unlike the dense families, whose tensor parallelism is a transform of the one-GPU tape
(:mod:`tilecast.graph.parallel`), a mixture-of-experts decoder is recorded directly as one GPU of its layout
runs it (:mod:`tilecast.graph.families.moe_decoder`): attention on ``batch / dp`` sequences split ``tp`` ways,
the experts ``ep`` ways, and the collectives between them in the layers, each over its own GPUs. Training adds
one gradient all-reduce per replicated (non-expert) weight over the ``dp`` attention data-parallel groups; the
experts are sharded, never replicated (``moe_tp x ep`` is every GPU), so their gradients need none.
"""

from __future__ import annotations

from tilecast.graph.build import build_graph
from tilecast.graph.ops import OpGraph, comm_op
from tilecast.specs import ModelSpec, Workload
from tilecast.specs.layout import Layout

#: families recorded per layout (the others are split by the transforms of :mod:`tilecast.graph.parallel`)
LAYOUT_FAMILIES = frozenset({"moe"})
#: op-name prefix of the routed experts (their gradients are sharded, not all-reduced)
EXPERTS = "mlp.experts"


def schedule_tag(layout: Layout, training: bool) -> str | None:
    """The schedule a layout's step follows (:mod:`tilecast.forecast.schedule`): ``tp<n>`` (sequential) for
    plain tensor parallelism, ``dp<n>`` in training over data-parallel attention only (gradient all-reduces
    overlap the backward pass), else None (sequential, collectives on the critical path)."""
    if layout.dp == 1:
        return f"tp{layout.tp}" if layout.tp > 1 else None
    return f"dp{layout.dp}" if training and layout.tp == 1 else None


def build_layout_graph(spec: ModelSpec, batch: int, seq_len: int, mode: str, layout: Layout, fused: bool = False,
                       scale_layers: bool = True, dtype: str = "bf16", kv_len: int = 0, serving: bool = False
                       ) -> OpGraph:
    """The op graph one GPU of ``layout`` runs for ``model`` at global ``batch`` (``meta``: ``layout`` its tag,
    ``degree`` its GPUs, ``parallel`` the schedule tag); a layout that cannot run ``spec`` raises its named
    :class:`~tilecast.specs.layout.LayoutError`."""
    layout.check(spec)
    wl = Workload(spec, batch, seq_len, mode, fused, parallel=layout, dtype=dtype, kv_len=kv_len, serving=serving)
    graph = build_graph(wl, scale_layers=scale_layers)
    ops = graph.ops
    if wl.training and layout.dp > 1:
        group = (("group", layout.dp),)
        ops = (*ops, *(comm_op("bw", "allreduce", o.b * o.h, o.section, f"allreduce({o.name})", o.count, attrs=group)
                       for o in ops if o.phase == "acc" and not o.name.startswith(EXPERTS)))
    return OpGraph.from_ops(ops, graph.num_layers, **{**graph.meta, "batch": batch, "layout": layout.tag,
                                                       "parallel": schedule_tag(layout, wl.training),
                                                       "degree": layout.gpus, "microbatches": 1})
