"""The grid path (graphs built once, ops deduplicated across cells, bincount aggregation) gives exactly what
``tilecast.forecast.forecast`` gives cell by cell, for every schedule (single GPU, dp, tp, pp)."""

import numpy as np
import pandas as pd
import pytest

from tilecast.forecast import forecast
from tilecast.scoring.aggregate import summarise_cells
from tilecast.scoring.graphs import build_graphs, dedupe_ops
from tilecast.scoring.predictors import PredictorSource, latency_chunk
from tilecast.scoring.schema import LATENCY

GRAPHS = pd.DataFrame([
    ("gpt2_large", 4, 1024, "training", "none", False, "fp32"),
    ("gpt2_large", 8, 1024, "training", "dp4", False, "fp32"),
    ("gpt2_large", 8, 512, "training", "tp4", False, "fp32"),
    ("gpt2_large", 8, 512, "training", "pp4_4", False, "fp32"),
    ("bert_large", 8, 512, "inference", "none", True, "fp32"),
    ("bert_large", 16, 512, "inference", "none", False, "fp32"),
    ("gpt2_large", 3, 512, "training", "dp4", False, "fp32"),  # cannot split: an error row, no ops
    ("gpt2_large", 4, 1024, "training", "none", False, "bf16"),
    ("gpt2_large", 8, 512, "training", "tp4", False, "amp_bf16"),
    ("bert_large", 8, 512, "inference", "none", True, "fp16"),
    ("llama2_7b", 2, 512, "inference", "none", False, "tf32"),
], columns=["model", "batch", "seq_len", "mode", "parallel", "fused", "dtype"])
GPUS = ["l4", "a100_sxm4_40gb", "h100_sxm_80gb"]


@pytest.fixture(scope="module")
def grid():
    graphs = GRAPHS.assign(graph_id=np.arange(len(GRAPHS)) * 10 + 3)  # ids need not be positions
    rows, info = build_graphs(graphs)
    return graphs, rows, info


def test_graph_errors_are_kept_per_graph(grid):
    graphs, rows, info = grid
    assert len(info) == len(graphs)
    bad = info.set_index("graph_id").loc[63]
    assert "ParallelismError" in bad["graph_error"] and "batch=3" in bad["graph_error"]
    assert 63 not in set(rows["graph_id"])
    assert info["graph_error"].isna().sum() == len(graphs) - 1


def test_grid_path_matches_per_cell_forecasts(grid):
    graphs, rows, info = grid
    ok = info.loc[info["graph_error"].isna()].reset_index(drop=True)
    dd = dedupe_ops(rows, ok.set_index("graph_id")["degree"])
    assert len(dd.distinct) < len(dd.rows)  # shapes repeat across graphs
    op_ms = np.full((len(dd.distinct), len(GPUS)), np.nan)
    for degree, part in dd.distinct.groupby("degree"):
        ms, errors = latency_chunk(PredictorSource("roofline"), part, GPUS, int(degree))
        assert errors == {}
        op_ms[part.index.to_numpy()] = ms
    summary = summarise_cells(dd.rows, op_ms, ok, GPUS).set_index(["graph_id", "gpu"])
    assert (summary["nan_ops"] == 0).all()
    for g in graphs.merge(ok[["graph_id"]]).itertuples(index=False):
        for gpu in GPUS:
            fc = forecast(g.model, gpu, g.batch, g.seq_len, g.mode, None if g.parallel == "none" else g.parallel,
                          g.fused, dtype=g.dtype)
            got = summary.loc[(g.graph_id, gpu)]
            want = {"e2e_ms": fc.e2e_ms, "fw_ms": fc.fw_ms, "bw_ms": fc.bw_ms, "acc_ms": fc.acc_ms,
                    **{f"ms_{k}": v for k, v in fc.by_group_ms.items()}}
            for col in LATENCY:
                assert got[col] == pytest.approx(want[col], rel=1e-9, abs=1e-12), (g, gpu, col)


def test_a_failed_op_marks_only_the_cells_that_use_it(grid):
    graphs, rows, info = grid
    ok = info.loc[info["graph_error"].isna()].reset_index(drop=True)
    dd = dedupe_ops(rows, ok.set_index("graph_id")["degree"])
    op_ms = np.ones((len(dd.distinct), 2))
    only_in = dd.rows.groupby("op_id")["graph_id"].nunique()
    victim = int(only_in[only_in == 1].index[0])
    op_ms[victim, 1] = np.nan
    s = summarise_cells(dd.rows, op_ms, ok, ["l4", "h100_sxm_80gb"])
    owner = int(dd.rows.loc[dd.rows["op_id"] == victim, "graph_id"].iloc[0])
    bad = s.loc[s["nan_ops"] > 0, ["graph_id", "gpu"]].values.tolist()
    assert bad == [[owner, "h100_sxm_80gb"]]
