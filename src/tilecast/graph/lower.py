"""Lowering: a recorded :class:`~tilecast.graph.tape.Tape` -> the ops of an :class:`OpGraph`.

A node's ops depend only on its :attr:`~tilecast.graph.tape.Node.signature`, which repeats from
block to block: they are made once per signature and reused (ops are immutable).
"""

from __future__ import annotations

from collections.abc import Callable

from tilecast.graph.fusion import fused_forward_ops
from tilecast.graph.ops import ATTR_KINDS, BYTES_PER_ELEMENT, Op, attn, attr_op, comm_op, gemm, mem, vec
from tilecast.graph.tape import Node, Tape
from tilecast.graph.training import accumulation_ops, backward_ops
from tilecast.tiles.ops import ops_per_output

_MEMO_SIZE = 1 << 15  # signatures kept per table before it is cleared
_FORWARD: dict[tuple, Op] = {}
_BACKWARD: dict[tuple, tuple[Op, ...]] = {}


def forward_op(node: Node) -> Op:
    """The forward op of one node; vector memory-per-output from its actual input and output sizes."""
    kw = {"section": node.section, "name": node.name}
    if node.kind in ("linear", "bmm", "conv"):
        return gemm("fw", node.kind, node.dims, **kw)
    if node.kind == "attn":
        return attn("fw", node.op, node.dims, attrs=node.attrs, **kw)
    if node.kind in ATTR_KINDS:
        return attr_op("fw", node.kind, node.op, node.dims, node.attrs, **kw)
    if node.kind in ("allreduce", "sendrecv"):
        return comm_op("fw", node.kind, node.dims[0], node.section, node.name, attrs=node.attrs)
    if node.kind == "vec":
        b, h = node.dims
        mpo = BYTES_PER_ELEMENT * (sum(node.in_numels) + node.out_numel) / node.out_numel
        return vec("fw", node.op, b, h, mpo, ops_per_output(node.op), **kw)
    return mem("fw", sum(node.in_numels) + node.out_numel, **kw)


def _memo(table: dict, node: Node, make: Callable[[Node], object]):
    key = node.signature
    out = table.get(key)
    if out is None:
        if len(table) >= _MEMO_SIZE:
            table.clear()
        out = table[key] = make(node)
    return out


def _forward(node: Node) -> Op:
    return _memo(_FORWARD, node, forward_op)


def _backward(node: Node) -> tuple[Op, ...]:
    return _memo(_BACKWARD, node, lambda n: (*backward_ops(n), *accumulation_ops(n)))


def lower(tape: Tape, training: bool, fused: bool = False) -> list[Op]:
    """Forward ops (fused or not); with ``training`` also every node's backward and accumulation.

    Fusion applies to the forward pass only (the labels' fused runs are inference).
    """
    ops = fused_forward_ops(tape, _forward) if fused else [_forward(n) for n in tape.nodes]
    if training:
        for node in tape.nodes:
            ops.extend(_backward(node))
    return ops
