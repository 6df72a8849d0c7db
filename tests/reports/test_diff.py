"""Comparing two runs: forecasts that moved by more than the threshold, new / removed / failing cells."""

import numpy as np
import pandas as pd
import pytest

from tilecast.reports.diff import compare_runs


def test_moved_new_removed_failed(smoke_scores):
    prev = smoke_scores.copy()
    cur = smoke_scores.copy()
    ok = cur.index[cur["error"].isna()]
    cur.loc[ok[0], "e2e_ms"] *= 1.06  # moved
    cur.loc[ok[1], "e2e_ms"] *= 0.96  # within 5%
    cur.loc[ok[2], ["error", "e2e_ms"]] = ["ValueError: boom", np.nan]  # newly failing
    removed = cur.loc[[ok[3]]]
    cur = cur.drop(index=ok[3])
    new = prev.loc[[ok[4]]].assign(batch=64)
    cur = pd.concat([cur, new], ignore_index=True)
    d = compare_runs(cur, prev, "2026-01-02", "2026-01-01", 0.05)
    assert len(d.moved) == 1 and d.moved["change_pct"].iloc[0] == pytest.approx(6.0)
    assert len(d.removed) == 1 and d.removed["batch"].iloc[0] == removed["batch"].iloc[0]
    assert len(d.new) == 1 and d.new["batch"].iloc[0] == 64
    assert len(d.failed) == 4 and d.newly_failed == 1
    s = d.summary()
    assert s["moved"] == 1 and s["previous"] == "2026-01-01" and s["threshold_pct"] == 5.0


def test_no_previous_run(smoke_scores):
    d = compare_runs(smoke_scores, None)
    assert d.previous is None and d.moved.empty and d.new.empty and len(d.failed) == 3


def test_a_run_scored_before_the_dtype_axis_compares_as_fp32(smoke_scores, tmp_path):
    from tilecast.scoring.schema import read_scores

    old = smoke_scores.loc[smoke_scores["dtype"] == "fp32"].drop(columns="dtype")
    old.to_parquet(tmp_path / "scores.parquet")
    back = read_scores(tmp_path / "scores.parquet")
    cols = list(back.columns)
    assert (back["dtype"] == "fp32").all() and cols.index("dtype") == cols.index("fused") + 1
    d = compare_runs(smoke_scores, old, "2026-01-02", "2026-01-01")
    assert d.moved.empty and d.removed.empty and d.compared == int(old["error"].isna().sum())
    assert len(d.new) == 6 and set(d.new["dtype"]) == {"bf16"}  # the bf16 cells are new, the fp32 ones match
