"""``build_graphs`` writes the op rows ``forecast.workload_frame`` gives, graph by graph (values and dtypes)."""

import numpy as np
import pandas as pd
from pandas.testing import assert_frame_equal

from tilecast.forecast import workload_frame
from tilecast.scoring.graphs import FRAME_COLUMNS, build_graphs

GRAPHS = pd.DataFrame([
    ("gpt2_large", 2, 512, "inference", "none", True),
    ("gpt3_xl", 8, 512, "training", "tp4", False),
    ("switchxl4", 1, 512, "inference", "none", False),
    ("llama2_7b", 8, 512, "training", "pp4_1", False),
    ("opt_13", 8, 512, "training", "dp4", False),
], columns=["model", "batch", "seq_len", "mode", "parallel", "fused"])


def test_op_rows_and_info_match_the_workload_frames():
    graphs = GRAPHS.assign(graph_id=np.arange(len(GRAPHS)) * 7 + 1)
    rows, info = build_graphs(graphs)
    assert list(rows.columns) == ["graph_id", *FRAME_COLUMNS]
    assert info["graph_error"].isna().all() and info["mem_error"].isna().all()
    for g in graphs.itertuples(index=False):
        parallel = None if g.parallel == "none" else g.parallel
        frame = workload_frame(g.model, g.batch, g.seq_len, g.mode, parallel, g.fused)
        got = rows.loc[rows["graph_id"] == g.graph_id, list(FRAME_COLUMNS)].reset_index(drop=True)
        assert_frame_equal(got, frame[list(FRAME_COLUMNS)].reset_index(drop=True))
        row = info.set_index("graph_id").loc[g.graph_id]
        assert row["num_layers"] == frame.attrs["num_layers"] and row["degree"] == frame.attrs["degree"]
        assert row["microbatches"] == frame.attrs["microbatches"]
        kind = row["parallel_kind"]
        assert (pd.isna(kind) and parallel is None) or kind == parallel[:2]


def test_no_graphs_no_rows():
    rows, info = build_graphs(GRAPHS.iloc[:0].assign(graph_id=[]))
    assert rows.empty and info.empty and list(rows.columns) == ["graph_id", *FRAME_COLUMNS]
