"""Lowering: a recorded :class:`~tilecast.graph.tape.Tape` -> the ops of an :class:`OpGraph`."""

from __future__ import annotations

from tilecast.graph.fusion import fused_forward_ops
from tilecast.graph.ops import BYTES_PER_ELEMENT, Op, gemm, mem, vec
from tilecast.graph.tape import Node, Tape
from tilecast.graph.training import accumulation_ops, backward_ops
from tilecast.tiles.ops import ops_per_output


def forward_op(node: Node) -> Op:
    """The forward op of one node; vector memory-per-output from its actual input and output sizes."""
    kw = {"section": node.section, "name": node.name}
    if node.kind in ("linear", "bmm", "conv"):
        return gemm("fw", node.kind, node.dims, **kw)
    if node.kind == "vec":
        b, h = node.dims
        mpo = BYTES_PER_ELEMENT * (sum(node.in_numels) + node.out_numel) / node.out_numel
        return vec("fw", node.op, b, h, mpo, ops_per_output(node.op), **kw)
    return mem("fw", sum(node.in_numels) + node.out_numel, **kw)


def lower(tape: Tape, training: bool, fused: bool = False) -> list[Op]:
    """Forward ops (fused or not); with ``training`` also every node's backward and accumulation.

    Fusion applies to the forward pass only (the labels' fused runs are inference).
    """
    ops = fused_forward_ops(tape, forward_op) if fused else [forward_op(n) for n in tape.nodes]
    if training:
        for node in tape.nodes:
            ops.extend(backward_ops(node))
            ops.extend(accumulation_ops(node))
    return ops
