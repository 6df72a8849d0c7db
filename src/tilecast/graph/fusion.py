"""Operator fusion as torch.compile does it for the labels (docs/method.md §9).

Grouping: walking the forward nodes from the last to the first, a fusible node (vector op or
embedding gather) joins the group of its consumers when it has consumers, all of them are fusible
and all of them already sit in one group. This is "merge each vector-like node into its single
consumer" generalised to a node read several times inside one fused kernel (GELU's input).

Costing a group: data movement (embedding gathers) stays a MEM op each; the group's vector ops run
as one kernel, predicted by its last op with the summed ops-per-output and the group's own
memory-per-output: 4 bytes x (external input elements + output elements) / output elements.
"""

from __future__ import annotations

from tilecast.graph.ops import BYTES_PER_ELEMENT, Op, mem, vec
from tilecast.graph.tape import EXTERNAL, Node, Tape
from tilecast.tiles.ops import ops_per_output

FUSIBLE_KINDS = frozenset({"vec", "embedding"})


def fusion_groups(tape: Tape) -> list[list[Node]]:
    """Partition the forward nodes into fused groups (singletons for GEMMs and copies), in order."""
    nodes = tape.nodes
    cons = tape.consumers()
    group = list(range(len(nodes)))
    for node in reversed(nodes):
        readers = cons[node.id]
        if node.kind not in FUSIBLE_KINDS or not readers:
            continue
        if all(nodes[c].kind in FUSIBLE_KINDS for c in readers) and len({group[c] for c in readers}) == 1:
            group[node.id] = group[readers[0]]
    members: dict[int, list[Node]] = {}
    for node in nodes:
        members.setdefault(group[node.id], []).append(node)
    return sorted(members.values(), key=lambda g: g[-1].id)


def fused_vec_op(group: list[Node], phase: str = "fw") -> Op | None:
    """The one vector kernel a group runs (None when it has no vector op)."""
    vecs = [n for n in group if n.kind == "vec"]
    if not vecs:
        return None
    inside = {n.id for n in group}
    seen: set[int] = set()
    ext_numel = 0
    for node in group:
        for t in node.inputs:
            if t.node == EXTERNAL:
                ext_numel += t.numel
            elif t.node not in inside and t.node not in seen:
                seen.add(t.node)
                ext_numel += t.numel
    last = vecs[-1]
    out = last.out_numel
    b, h = last.dims
    return vec(phase, last.op, b, h, BYTES_PER_ELEMENT * (ext_numel + out) / out,
               sum(ops_per_output(n.op) for n in vecs), section=last.section,
               name="+".join(n.name for n in group))


def fused_forward_ops(tape: Tape, node_op) -> list[Op]:
    """Forward ops of the fused program: ``node_op(node)`` for singletons, fused kernels for groups."""
    out: list[Op] = []
    for group in fusion_groups(tape):
        if len(group) == 1:
            out.append(node_op(group[0]))
            continue
        for node in group:
            if node.kind != "vec":
                out.append(mem("fw", sum(node.in_numels) + node.out_numel, section=node.section,
                               name=node.name))
        fused = fused_vec_op(group)
        if fused is not None:
            out.append(fused)
    return out
