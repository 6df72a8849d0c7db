"""``build_graphs`` writes the op rows ``forecast.workload_frame`` gives, graph by graph (values and dtypes)."""

import numpy as np
import pandas as pd
from pandas.testing import assert_frame_equal

from tilecast.forecast import workload_frame
from tilecast.graph import memory_footprint
from tilecast.scoring.graphs import FRAME_COLUMNS, OP_KEY, build_graphs, dedupe_ops
from tilecast.scoring.memory import memory_required_bytes

GRAPHS = pd.DataFrame([
    ("gpt2_large", 2, 512, "inference", "none", True, "fp32"),
    ("gpt3_xl", 8, 512, "training", "tp4", False, "fp32"),
    ("switchxl4", 1, 512, "inference", "none", False, "fp32"),
    ("llama2_7b", 8, 512, "training", "pp4_1", False, "fp32"),
    ("opt_13", 8, 512, "training", "dp4", False, "fp32"),
    ("gpt2_large", 2, 512, "inference", "none", False, "bf16"),
    ("llama2_7b", 2, 512, "inference", "none", False, "fp8"),
    ("gpt3_xl", 8, 512, "training", "tp4", False, "amp_bf16"),
], columns=["model", "batch", "seq_len", "mode", "parallel", "fused", "dtype"])


def test_op_rows_and_info_match_the_workload_frames():
    graphs = GRAPHS.assign(graph_id=np.arange(len(GRAPHS)) * 7 + 1)
    rows, info = build_graphs(graphs)
    assert list(rows.columns) == ["graph_id", *FRAME_COLUMNS]
    assert {"dtype", "hkv"} <= set(FRAME_COLUMNS) and {"dtype", "hkv"} <= set(OP_KEY)
    assert info["graph_error"].isna().all() and info["mem_error"].isna().all()
    for g in graphs.itertuples(index=False):
        parallel = None if g.parallel == "none" else g.parallel
        frame = workload_frame(g.model, g.batch, g.seq_len, g.mode, parallel, g.fused, g.dtype)
        got = rows.loc[rows["graph_id"] == g.graph_id, list(FRAME_COLUMNS)].reset_index(drop=True)
        assert_frame_equal(got, frame[list(FRAME_COLUMNS)].reset_index(drop=True))
        row = info.set_index("graph_id").loc[g.graph_id]
        assert row["num_layers"] == frame.attrs["num_layers"] and row["degree"] == frame.attrs["degree"]
        assert row["microbatches"] == frame.attrs["microbatches"]
        kind = row["parallel_kind"]
        assert (pd.isna(kind) and parallel is None) or kind == parallel[:2]
        if parallel is None:
            want = memory_footprint(g.model, g.batch, g.seq_len, g.mode, dtype=g.dtype).total_bytes
            assert row["mem_required_bytes"] == want
    by = rows.groupby("graph_id")["dtype"].unique()
    assert set(by[36]) == {"bf16"} and set(by[43]) == {"fp8", "bf16"}  # fp8: linears fp8, the rest bf16
    assert (rows.loc[rows["kind"] == "attn", "hkv"] > 0).all() and (rows["kind"] == "attn").any()


def test_memory_follows_the_dtype():
    fp32 = memory_required_bytes("gpt2_large", 4, 512, "inference")
    bf16 = memory_required_bytes("gpt2_large", 4, 512, "inference", dtype="bf16")
    assert fp32 == memory_required_bytes("gpt2_large", 4, 512, "inference", dtype="fp32")
    assert 0 < bf16 < fp32
    # amp keeps fp32 master weights and optimizer state: more than pure bf16 training
    assert memory_required_bytes("gpt2_large", 4, 512, "training", dtype="amp_bf16") > \
        memory_required_bytes("gpt2_large", 4, 512, "training", dtype="bf16")


def test_the_same_shape_in_another_dtype_is_another_op():
    graphs = pd.DataFrame([(0, "gpt2_large", 2, 512, "inference", "none", False, "tf32"),
                           (1, "gpt2_large", 2, 512, "inference", "none", False, "fp32")],
                          columns=["graph_id", *GRAPHS.columns])
    rows, info = build_graphs(graphs)
    dd = dedupe_ops(rows, info.set_index("graph_id")["degree"])
    # tf32 only changes where GEMMs run: same shapes and bytes, so the ops differ by dtype alone
    shapes = [c for c in OP_KEY if c != "dtype"]
    assert len(dd.distinct) == 2 * len(dd.distinct.drop_duplicates(shapes))
    assert set(dd.rows.groupby("op_id")["graph_id"].nunique()) == {1}


def test_graphs_without_a_dtype_column_are_fp32():
    graphs = GRAPHS.iloc[:1].drop(columns="dtype").assign(graph_id=[0])
    rows, _ = build_graphs(graphs)
    want, _ = build_graphs(GRAPHS.iloc[:1].assign(graph_id=[0]))
    assert_frame_equal(rows, want)
    assert (rows["dtype"] == "fp32").all()


def test_no_graphs_no_rows():
    rows, info = build_graphs(GRAPHS.iloc[:0].assign(graph_id=[]))
    assert rows.empty and info.empty and list(rows.columns) == ["graph_id", *FRAME_COLUMNS]
