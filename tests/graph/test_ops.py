"""Op costs in the data's conventions, merging, and OpGraph totals / frame."""

import pytest

from tilecast.graph.ops import COLUMNS, Op, OpGraph, gemm, mem, merge_ops, vec


def test_gemm_costs_follow_the_data_convention():
    lin = gemm("fw", "linear", (4096, 1280, 3840))
    assert (lin.b, lin.m, lin.n, lin.k) == (1, 4096, 1280, 3840)
    assert lin.dims == (4096, 1280, 3840)
    assert lin.flops == 2 * 4096 * 1280 * 3840
    assert lin.bytes == 4 * (4096 * 1280 + 1280 * 3840 + 4096 * 3840)
    bmm = gemm("bw", "bmm", (80, 1024, 64, 1024))
    assert bmm.dims == (80, 1024, 64, 1024)
    assert bmm.flops == 2 * 80 * 1024 * 64 * 1024
    assert bmm.bytes == 4 * 80 * (1024 * 64 + 64 * 1024 + 1024 * 1024)


def test_vector_and_memory_costs():
    ln = vec("fw", "ln", 4096, 1280, mem_per_o=8.0, ops_per_o=6.0)
    assert ln.dims == (4096, 1280)
    assert ln.flops == 6 * 4096 * 1280 and ln.bytes == 8 * 4096 * 1280
    m = mem("bw", 1000)
    assert m.flops == 0 and m.bytes == 4000 and m.dims == (1000,)


def test_op_rejects_unknown_phase_kind_section():
    with pytest.raises(ValueError, match="phase"):
        Op("fwd", "vec", "add")
    with pytest.raises(ValueError, match="kind"):
        Op("fw", "matmul", "x")
    with pytest.raises(ValueError, match="section"):
        Op("fw", "vec", "add", section="middle")


def test_merge_sums_counts_of_identical_ops_only():
    a = vec("fw", "add", 8, 16, 12.0, 1.0, name="x")
    b = vec("fw", "add", 8, 16, 12.0, 1.0, count=3, name="y")
    c = vec("fw", "add", 8, 16, 12.0, 1.0, section="prologue")
    d = vec("fw", "add", 8, 16, 8.0, 1.0)  # different bytes per output: a different kernel
    merged = merge_ops([a, b, c, d])
    assert len(merged) == 3
    first = next(o for o in merged if o.section == "layer" and o.mem_per_o == 12.0)
    assert first.count == 4 and first.name == "x, y"


def test_graph_totals_and_frame():
    g = OpGraph.from_ops([gemm("fw", "linear", (2, 3, 4), count=2), mem("fw", 10), mem("bw", 5, count=3)])
    assert g.total_flops() == 2 * (2 * 2 * 3 * 4)
    assert g.total_bytes(phase="bw") == 60
    assert g.total_bytes(kind="mem") == 100
    assert g.count() == 6 and g.count(phase="fw") == 3
    frame = g.to_frame()
    assert list(frame.columns) == COLUMNS
    assert frame["total_flops"].sum() == g.total_flops()
