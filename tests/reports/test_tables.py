"""Report tables on a real score table: latency grid, cheapest GPU under a target, cost per 1M tokens, failures."""

import numpy as np
import pandas as pd

from tilecast.reports.tables import (
    Slice,
    cheapest_gpu,
    cost_per_1m_tokens,
    failed_cells,
    fitting,
    headline,
    latency_grid,
    unsupported_cells,
)
from tilecast.scoring.engine import unsupported_text

SL = Slice(seq_len=512)


def test_latency_grid_is_model_by_dtype_by_batch_by_gpu(smoke_scores):
    grid = latency_grid(smoke_scores, "inference", SL)
    assert list(grid.columns[:4]) == ["model", "dtype", "seq_len", "batch"]
    assert set(grid.columns[4:]) == {"a100_pcie_40gb", "l4", "h100_sxm_80gb"}
    assert len(grid) == 2 * 2 + 1  # models x batches in fp32 (unfused, no parallelism), gpt2_large b8 in bf16
    for dtype in ("fp32", "bf16"):
        row = grid.loc[(grid["model"] == "gpt2_large") & (grid["batch"] == 8) & (grid["dtype"] == dtype)]
        want = smoke_scores.loc[(smoke_scores["model"] == "gpt2_large") & (smoke_scores["batch"] == 8)
                                & (smoke_scores["gpu"] == "l4") & (smoke_scores["mode"] == "inference")
                                & ~smoke_scores["fused"] & (smoke_scores["dtype"] == dtype), "e2e_ms"]
        assert len(row) == len(want) == 1
        assert row["l4"].iloc[0] == (f"{want.iloc[0]:.1f}" if want.iloc[0] < 1000 else f"{want.iloc[0]:,.0f}")


def test_an_unsupported_cell_is_not_a_failed_one(smoke_scores):
    s = smoke_scores.copy()
    unsupported = (s["dtype"] == "bf16") & (s["gpu"] == "l4")
    s.loc[unsupported, "error"] = unsupported_text("l4", "bf16", "no bf16 peak")
    s.loc[(s["dtype"] == "bf16") & (s["gpu"] == "h100_sxm_80gb"), "error"] = "forecast failed: a kernel"
    grid = latency_grid(s, "inference", SL)
    assert (grid.loc[grid["dtype"] == "bf16", "l4"] == "not supported").all()
    assert (grid.loc[grid["dtype"] == "bf16", "h100_sxm_80gb"] == "error").all()
    assert not (grid.loc[grid["dtype"] == "fp32"].isin(["error", "not supported"])).any().any()
    failed = failed_cells(s)
    assert not failed["error"].str.contains("not supported").any()  # not a failure
    kernel = failed.loc[failed["error"] == "forecast failed: a kernel", "example"]
    assert len(kernel) and kernel.str.contains(" h100_sxm_80gb bf16 ").all()
    want = [{"gpu": "l4", "dtype": "bf16", "cells": int(unsupported.sum())}]
    assert unsupported_cells(s).to_dict("records") == want
    assert unsupported_cells(smoke_scores).empty


def test_out_of_memory_cells_are_marked(smoke_scores):
    s = smoke_scores.copy()
    s["fits"] = True
    s.loc[(s["gpu"] == "l4") & (s["model"] == "bert_large"), "fits"] = False
    grid = latency_grid(s, "training", SL)
    assert (grid.loc[grid["model"] == "bert_large", "l4"] == "OOM").all()
    assert not (grid.drop(columns="l4") == "OOM").any().any()
    assert (grid.loc[grid["model"] == "gpt2_large", "l4"] != "OOM").all()


def test_cheapest_gpu_meets_the_target_at_the_lowest_cost(smoke_scores):
    ok = smoke_scores.loc[smoke_scores["error"].isna()]
    target = float(ok.loc[ok["mode"] == "inference", "e2e_ms"].median())
    out = cheapest_gpu(smoke_scores, {"inference": target, "training": 1e12}, SL)
    assert set(out["mode"]) == {"inference", "training"} and set(out["dtype"]) == {"fp32", "bf16"}
    assert not out.duplicated(["model", "dtype", "mode", "batch"]).any()  # one row per workload and dtype
    for r in out.itertuples(index=False):
        cands = headline(ok.loc[ok["fits"].fillna(False).astype(bool)], SL)
        cands = cands.loc[(cands["model"] == r.model) & (cands["mode"] == r.mode) & (cands["batch"] == r.batch)
                          & (cands["dtype"] == r.dtype)]
        meeting = cands.loc[cands["e2e_ms"] <= r.target_ms]
        assert r.meeting == len(meeting)
        if len(meeting):
            assert r.gpu == meeting.loc[meeting["cost_per_1m_tokens_usd"].idxmin(), "gpu"]
        else:
            assert r.gpu == "none meets the target"
        assert r.fastest_gpu == cands.loc[cands["e2e_ms"].idxmin(), "gpu"]
    assert (out["gpu"] == "none meets the target").any() and (out["meeting"] > 0).any()


def test_cost_table_takes_the_best_fitting_batch(smoke_scores):
    cost = cost_per_1m_tokens(smoke_scores, "inference", SL)
    assert list(cost.columns[:3]) == ["model", "dtype", "seq_len"]
    sub = fitting(headline(smoke_scores.loc[smoke_scores["mode"] == "inference"], SL))
    want = sub.loc[(sub["model"] == "bert_large") & (sub["gpu"] == "h100_sxm_80gb"), "cost_per_1m_tokens_usd"].min()
    assert cost.loc[cost["model"] == "bert_large", "h100_sxm_80gb"].iloc[0] == want
    gpt2 = cost.loc[cost["model"] == "gpt2_large"].set_index("dtype")["h100_sxm_80gb"]
    assert gpt2["bf16"] < gpt2["fp32"]  # faster on tensor cores, so cheaper per token


def test_failed_cells_grouped_by_error(smoke_scores):
    failed = failed_cells(smoke_scores)
    assert failed["cells"].sum() == smoke_scores["error"].notna().sum() == 3
    assert "does not split evenly" in failed["error"].iloc[0]
    assert failed_cells(smoke_scores.assign(error=None)).empty
    assert np.isfinite(pd.to_numeric(failed["cells"])).all()
