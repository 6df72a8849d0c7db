"""Fusion: grouping rule and the cost of a fused group (docs/method.md §9)."""

from tilecast.graph.blocks import Ctx, activation
from tilecast.graph.fusion import fused_vec_op, fusion_groups
from tilecast.graph.lower import lower
from tilecast.graph.ops import OpGraph
from tilecast.graph.tape import Tape
from tilecast.specs import get_model


def _names(groups):
    return [[n.name for n in g] for g in groups]


def test_gelu_chain_reading_its_input_three_times_is_one_kernel():
    t = Tape()
    h = t.linear("fc", t.ext(64 * 16), 64, 16, 32)
    activation(Ctx(t, get_model("gpt2_large"), 1, 64, False), "act", h, 64, 32, "gelu_new")
    groups = fusion_groups(t)
    assert _names(groups)[0] == ["fc"]
    assert len(groups) == 2 and len(groups[1]) == 8
    op = fused_vec_op(groups[1])
    assert op.op == "mul" and (op.b, op.h) == (64, 32)
    assert op.ops_per_o == 8  # eight elementwise ops, one flop each
    assert op.mem_per_o == 8  # reads the Linear's output once, writes once


def test_node_with_consumers_in_different_groups_stays_alone():
    t = Tape()
    x = t.vec("residual", "add", [t.ext(8), t.ext(8)], 2, 4)
    t.ln("ln", x, 2, 4)
    t.vec("residual_2", "add", [x, t.ext(8)], 2, 4)
    assert _names(fusion_groups(t)) == [["residual"], ["ln"], ["residual_2"]]


def test_add_into_layer_norm_fuses_and_costs_external_inputs_once():
    t = Tape()
    a = t.linear("dense", t.ext(8 * 4), 8, 4, 4)
    s = t.vec("add", "add", [a, t.ext(32)], 8, 4)
    t.ln("ln", s, 8, 4)
    groups = fusion_groups(t)
    assert _names(groups) == [["dense"], ["add", "ln"]]
    op = fused_vec_op(groups[1])
    assert op.op == "ln" and op.ops_per_o == 7 and op.mem_per_o == 12  # two inputs in, one out


def test_gemms_and_copies_never_fuse():
    t = Tape()
    x = t.vec("scale", "divu", [t.ext(16)], 4, 4)
    y = t.mem("where", [x], 16)
    t.vec("softmax", "softmax", [y], 4, 4)
    assert _names(fusion_groups(t)) == [["scale"], ["where"], ["softmax"]]


def test_fused_lowering_keeps_memory_ops_and_gemms():
    t = Tape()
    e = t.embedding("wte", t.ext(16), 100, 8)
    x = t.vec("pos", "add", [e, t.ext(128)], 16, 8)
    t.linear("fc", x, 16, 8, 8)
    plain, fused = OpGraph.from_ops(lower(t, False)), OpGraph.from_ops(lower(t, False, fused=True))
    assert fused.total_bytes(kind="mem") == plain.total_bytes(kind="mem")
    assert fused.total_flops(kind="linear") == plain.total_flops(kind="linear")
    assert fused.count(kind="vec") == 1
