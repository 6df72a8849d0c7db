"""Serve report tables on a real serve table (the serving forecaster, roofline kernels): cost per 1M output
tokens at the best (tp, concurrency) meeting the targets, the recommendation per workload, KV capacity, the
targets' config, the serving Pareto plot."""

import numpy as np
import pandas as pd
import pytest

from tilecast.forecast.serve import ServeWorkload, forecast_serve
from tilecast.reports.serve import (
    SERVE_WORKLOAD,
    ServeConfigError,
    ServeTargets,
    serve_capacity,
    serve_cost,
    serve_failed,
    serve_recommendations,
    serve_workloads,
)
from tilecast.scoring.schema import SERVE_COLUMNS

T = ServeTargets()


def _usable(serve, t=T):
    """The cells a fleet owner may pick, by the plain definition: forecast, fits, meets both targets."""
    return [r for r in serve.to_dict("records")
            if pd.isna(r["error"]) and pd.notna(r["fits"]) and bool(r["fits"])
            and r["tpot_ms"] <= t.tpot_ms and r["ttft_ms"] <= t.ttft_ms]


def test_the_fixture_is_a_real_serve_table(serve_scores):
    assert tuple(serve_scores.columns) == SERVE_COLUMNS
    r = serve_scores.loc[(serve_scores["gpu"] == "h100_sxm_80gb") & (serve_scores["dtype"] == "bf16")
                         & (serve_scores["tp"] == 2) & (serve_scores["concurrency"] == 16)].iloc[0]
    f = forecast_serve(ServeWorkload("llama31_8b", "bf16", 2, 1024, 256, 16), "h100_sxm_80gb")
    assert r["tpot_ms"] == pytest.approx(f.tpot_ms) and r["max_concurrency"] == f.max_concurrency
    # the cases the tables must handle are all there: an fp8 GPU without fp8, a cell that does not fit, a GPU
    # whose every fitting cell misses the TPOT target
    assert serve_scores["error"].str.contains("fp8", na=False).any()
    assert (serve_scores["fits"] == False).any()  # noqa: E712
    l4_long = serve_scores.loc[(serve_scores["gpu"] == "l4") & (serve_scores["isl"] == 4096)
                               & serve_scores["fits"].fillna(False).astype(bool)]
    assert len(l4_long) and (l4_long["tpot_ms"] > T.tpot_ms).all()


def test_serve_cost_is_the_cheapest_usable_cell_per_gpu_cheapest_first(serve_scores):
    cost = serve_cost(serve_scores, T)
    assert not cost.duplicated([*SERVE_WORKLOAD, "gpu"]).any()
    usable = pd.DataFrame(_usable(serve_scores))
    for r in cost.to_dict("records"):
        cands = usable.loc[(usable["gpu"] == r["gpu"]) & (usable["dtype"] == r["dtype"]) & (usable["isl"] == r["isl"])
                           & (usable["osl"] == r["osl"])]
        if r["meets"]:
            best = cands.loc[cands["cost_per_1m_output_tokens_usd"].idxmin()]
            assert (r["tp"], r["concurrency"]) == (best["tp"], best["concurrency"])
            assert r["cost_per_1m_output_tokens_usd"] == best["cost_per_1m_output_tokens_usd"]
        else:
            assert cands.empty and np.isnan(r["cost_per_1m_output_tokens_usd"])
    for _, w in cost.groupby(list(SERVE_WORKLOAD)):
        meets = w["meets"].to_numpy(dtype=bool)
        assert not np.any(np.diff(meets.astype(int)) > 0)  # every GPU meeting the targets before any missing them
        c = w.loc[w["meets"], "cost_per_1m_output_tokens_usd"].to_numpy()
        assert np.all(np.diff(c) >= 0)
    l4 = cost.loc[(cost["gpu"] == "l4") & (cost["isl"] == 4096)].iloc[0]
    assert not l4["meets"] and l4["concurrency"] == 1  # the lowest-TPOT fitting cell, shown without a cost
    assert "a100_sxm4_80gb" not in set(cost.loc[cost["dtype"] == "fp8", "gpu"])  # no fp8 on an A100


def test_serve_recommendation_per_workload(serve_scores):
    rec = serve_recommendations(serve_scores, T)
    assert len(rec) == serve_scores[list(SERVE_WORKLOAD)].drop_duplicates().shape[0] == 3
    cost = serve_cost(serve_scores, T)
    for r in rec.to_dict("records"):
        first = cost.loc[(cost["dtype"] == r["dtype"]) & (cost["isl"] == r["isl"])].iloc[0]
        assert (r["gpu"], r["tp"], r["concurrency"]) == (first["gpu"], first["tp"], first["concurrency"])
        assert r["usd_per_1m_output_tokens"] == first["cost_per_1m_output_tokens_usd"]
        tight = min((T.tpot_ms - r["tpot_ms"]) / T.tpot_ms, (T.ttft_ms - r["ttft_ms"]) / T.ttft_ms)
        assert r["margin_pct"] == pytest.approx(100 * tight) and r["margin_pct"] >= 0
        usable = [u for u in _usable(serve_scores) if (u["dtype"], u["isl"]) == (r["dtype"], r["isl"])]
        assert r["meeting"] == len({u["gpu"] for u in usable})
    assert rec["confidence"].str.contains(" ms: ").all() and "since_previous" not in rec  # from tpot_lo/hi_ms


def test_a_target_no_gpu_meets_names_the_lowest_tpot(serve_scores):
    rec = serve_recommendations(serve_scores, ServeTargets(tpot_ms=1.0))
    assert (rec["meeting"] == 0).all() and rec["usd_per_1m_output_tokens"].isna().all()
    assert (rec["margin_pct"] < 0).all()
    fit = serve_scores.loc[serve_scores["fits"].fillna(False).astype(bool) & serve_scores["error"].isna()]
    for r in rec.to_dict("records"):
        w = fit.loc[(fit["dtype"] == r["dtype"]) & (fit["isl"] == r["isl"])]
        assert r["gpu"] == f"none meets the targets; lowest TPOT {w.loc[w['tpot_ms'].idxmin(), 'gpu']}"


def test_tpot_interval_feeds_the_confidence_column(serve_scores):
    s = serve_scores.assign(tpot_lo_ms=serve_scores["tpot_ms"] * 0.8, tpot_hi_ms=serve_scores["tpot_ms"] * 3.0)
    rec = serve_recommendations(s, T).set_index(["dtype", "isl"])
    for (dtype, isl), r in rec.iterrows():
        hi = r["tpot_ms"] * 3.0
        want = "meets even at the high end" if hi <= T.tpot_ms else "interval spans the target"
        assert r["confidence"].endswith(want), (dtype, isl, r["confidence"])
    assert rec["confidence"].str.contains("interval spans").any()  # bf16 1024/256 on the H100: 18.6 ms x 3 > 50 ms


def test_since_previous_run(serve_scores):
    same = serve_recommendations(serve_scores, T, serve_scores)
    assert (same["since_previous"] == "same").all()
    pick = same.iloc[0]
    # last night the pick's GPU was not scored for that workload, and one workload did not exist
    gone = ((serve_scores["gpu"] == pick["gpu"]) & (serve_scores["dtype"] == pick["dtype"])
            & (serve_scores["isl"] == pick["isl"]))
    prev = serve_scores.loc[~gone & (serve_scores["dtype"] != "fp8")]
    slower = serve_scores.assign(tpot_ms=serve_scores["tpot_ms"] * 0.9)  # tonight 10% faster than that
    got = serve_recommendations(serve_scores, T, prev).set_index(["dtype", "isl"])["since_previous"]
    assert got[("fp8", 1024)] == "new"
    assert got[(pick["dtype"], pick["isl"])].startswith("was ") and "concurrency=" in got[(pick["dtype"], pick["isl"])]
    faster = serve_recommendations(serve_scores, T, slower.assign(tpot_ms=serve_scores["tpot_ms"] / 0.8))
    assert (faster["since_previous"].isin(["TPOT -20%"]) | faster["since_previous"].str.startswith("was ")).all()
    assert (faster["since_previous"] == "TPOT -20%").any()


def test_capacity_is_the_forecasters_kv_bound(serve_scores):
    cap = serve_capacity(serve_scores)
    assert not cap.duplicated([*SERVE_WORKLOAD, "gpu", "tp"]).any()
    row = cap.loc[(cap["gpu"] == "l4") & (cap["dtype"] == "bf16") & (cap["isl"] == 1024) & (cap["tp"] == 1)].iloc[0]
    f = forecast_serve(ServeWorkload("llama31_8b", "bf16", 1, 1024, 256, 1), "l4")
    assert row["max_concurrency"] == f.max_concurrency
    assert row["largest_scored_fitting"] == 16  # 128 requests of 1280 tokens do not fit on an L4
    assert "fp8" not in set(cap.loc[cap["gpu"] == "a100_sxm4_80gb", "dtype"])
    assert serve_failed(serve_scores).empty  # fp8 on an A100 (3 cells) is not supported, not failed
    broken = serve_scores.copy()
    broken.loc[broken.index[0], "error"] = "forecast failed: a kernel"
    failed = serve_failed(broken)
    assert failed["cells"].tolist() == [1] and failed["error"].tolist() == ["forecast failed: a kernel"]
    assert failed["example"].iloc[0].startswith("llama31_8b l4 bf16 tp1 isl1024 osl256 c")


def test_serve_targets_from_config():
    assert ServeTargets.from_config(None) == ServeTargets.from_config({"tpot_target_ms": None}) == ServeTargets()
    t = ServeTargets.from_config({"tpot_target_ms": 30, "ttft_target_ms": 500,
                                  "pareto": [{"model": "llama31_8b", "dtype": "fp8", "isl": 1024, "osl": 256}]})
    assert (t.tpot_ms, t.ttft_ms, t.pareto) == (30.0, 500.0, (("llama31_8b", "fp8", 1024, 256),))
    with pytest.raises(ServeConfigError, match=r"serve\.tpot_target_ms has invalid value -1"):
        ServeTargets.from_config({"tpot_target_ms": -1})
    with pytest.raises(ServeConfigError, match=r"serve: unknown key\(s\) tpot_ms"):
        ServeTargets.from_config({"tpot_ms": 30})
    with pytest.raises(ServeConfigError, match=r"serve\.pareto\[0\] has invalid value"):
        ServeTargets.from_config({"pareto": [{"model": "llama31_8b"}]})


def test_pareto_panels_default_to_one_per_model_and_dtype(serve_scores):
    # one model: the shorter of its two lengths
    assert serve_workloads(serve_scores, T) == [("llama31_8b", "bf16", 1024, 256), ("llama31_8b", "fp8", 1024, 256)]
    # a second model scored only at 4096 / 1024: the lengths most models share win
    two = pd.concat([serve_scores, serve_scores.loc[serve_scores["isl"] == 4096].assign(model="llama3_8b")])
    assert serve_workloads(two, T) == [("llama31_8b", "bf16", 4096, 1024), ("llama31_8b", "fp8", 1024, 256),
                                       ("llama3_8b", "bf16", 4096, 1024)]
    chosen = ServeTargets(pareto=(("llama31_8b", "fp8", 1024, 256), ("llama31_8b", "fp16", 1, 1)))
    assert serve_workloads(serve_scores, chosen) == [("llama31_8b", "fp8", 1024, 256)]  # what the run has
