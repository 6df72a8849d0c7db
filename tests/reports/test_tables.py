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
)

SL = Slice(seq_len=512)


def test_latency_grid_is_model_by_batch_by_gpu(smoke_scores):
    grid = latency_grid(smoke_scores, "inference", SL)
    assert list(grid.columns[:3]) == ["model", "seq_len", "batch"]
    assert set(grid.columns[3:]) == {"a100_pcie_40gb", "l4", "h100_sxm_80gb"}
    assert len(grid) == 2 * 2  # models x batches (unfused, no parallelism)
    row = grid.loc[(grid["model"] == "gpt2_large") & (grid["batch"] == 8)].iloc[0]
    want = smoke_scores.loc[(smoke_scores["model"] == "gpt2_large") & (smoke_scores["batch"] == 8)
                            & (smoke_scores["gpu"] == "l4") & (smoke_scores["mode"] == "inference")
                            & ~smoke_scores["fused"], "e2e_ms"].iloc[0]
    assert row["l4"] == (f"{want:.1f}" if want < 1000 else f"{want:,.0f}")


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
    assert set(out["mode"]) == {"inference", "training"}
    for r in out.itertuples(index=False):
        cands = headline(ok.loc[ok["fits"].fillna(False).astype(bool)], SL)
        cands = cands.loc[(cands["model"] == r.model) & (cands["mode"] == r.mode) & (cands["batch"] == r.batch)]
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
    sub = fitting(headline(smoke_scores.loc[smoke_scores["mode"] == "inference"], SL))
    want = sub.loc[(sub["model"] == "bert_large") & (sub["gpu"] == "h100_sxm_80gb"), "cost_per_1m_tokens_usd"].min()
    assert cost.loc[cost["model"] == "bert_large", "h100_sxm_80gb"].iloc[0] == want


def test_failed_cells_grouped_by_error(smoke_scores):
    failed = failed_cells(smoke_scores)
    assert failed["cells"].sum() == smoke_scores["error"].notna().sum() == 3
    assert "does not split evenly" in failed["error"].iloc[0]
    assert failed_cells(smoke_scores.assign(error=None)).empty
    assert np.isfinite(pd.to_numeric(failed["cells"])).all()
