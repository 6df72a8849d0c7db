"""The serving plan on a real serve table (the serving forecaster's own rows, roofline kernels): fleets sized by
Little's law at the high end of the interval, the cheapest feasible one chosen, statuses and reasons."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reports.serve_data import serve_frame
from tilecast.planning.layouts import ServeSearch, serve_layouts
from tilecast.planning.questions import HOURS_PER_MONTH, ServeQuestion
from tilecast.planning.serve_plan import candidates, serve_plan, size_fleets

GPUS = ("l4", "a100_sxm4_80gb", "h100_sxm_80gb")


@pytest.fixture(scope="module")
def table():
    return serve_frame()


def _plan(table, **kw):
    q = ServeQuestion.of("llama31_8b", 1024, 256, **{"ttft_ms": 2000, "tpot_ms": 50, "rate": 10.0, "gpus": GPUS,
                                                      "dtypes": ("bf16", "fp8"), **kw})
    search = ServeSearch(tp=(1, 2), pp=(1, 2), concurrency=(1, 16, 128))
    layouts = serve_layouts(q.gpus, q.dtypes, search)
    return q, layouts, serve_plan(q, layouts, table)


def test_the_plan_is_the_cheapest_fleet_meeting_the_targets_at_the_high_end(table):
    q, layouts, plan = _plan(table)
    rows = candidates(layouts, table, q)
    ok = rows.loc[rows["feasible"]]
    assert plan.feasible and len(ok)
    chosen = plan.chosen
    assert chosen["usd_per_month"] == ok["usd_per_month"].min()
    assert chosen["ttft_hi_ms"] <= q.ttft_ms and chosen["tpot_hi_ms"] <= q.tpot_ms and chosen["fits"]
    # replicas: enough to carry the rate at the high end, one fewer would not (Little's law)
    lat_hi_s = (chosen["ttft_hi_ms"] + (q.osl - 1) * chosen["tpot_hi_ms"]) / 1e3
    per_replica = chosen["concurrency"] / lat_hi_s
    assert chosen["replicas"] * per_replica >= q.rate_rps > (chosen["replicas"] - 1) * per_replica
    assert chosen["n_gpus"] == chosen["replicas"] * chosen["tp"]
    assert chosen["usd_per_month"] == pytest.approx(chosen["n_gpus"] * chosen["usd_per_gpu_hour"] * HOURS_PER_MONTH)
    # the forecast columns are the serve table's own
    src = table.loc[(table["gpu"] == chosen["gpu"]) & (table["dtype"] == chosen["dtype"])
                    & (table["tp"] == chosen["tp"]) & (table["concurrency"] == chosen["concurrency"])
                    & (table["isl"] == 1024)].iloc[0]
    assert (chosen["ttft_ms"], chosen["tpot_ms"], chosen["tpot_hi_ms"]) == (src["ttft_ms"], src["tpot_ms"],
                                                                            src["tpot_hi_ms"])
    kept = plan.candidates
    assert kept["chosen"].sum() == 1 and kept["chosen"].iloc[0]
    assert list(kept.columns[:15]) == ["gpu", "engine", "n_gpus", "dtype", "layout", "concurrency", "replicas",
                                       "ttft_ms", "tpot_ms", "ttft_hi_ms", "tpot_hi_ms", "tokens_per_s_per_gpu",
                                       "usd_per_month", "feasible", "why"]
    assert kept["why"].notna().all() and (kept["why"].str.len() > 10).all()
    assert (kept["engine"] == "vllm").all()  # the serve table's engine (the default)


def test_statuses_and_reasons(table):
    q, layouts, plan = _plan(table)
    kept = plan.candidates.set_index(["gpu", "dtype", "layout"])
    assert kept.loc[("a100_sxm4_80gb", "fp8", "tp1"), "status"] == "not supported"  # not "failed"
    assert kept.loc[("a100_sxm4_80gb", "fp8", "tp1"), "why"].startswith("not supported: dtype fp8 is not supported")
    assert kept.loc[("l4", "bf16", "tp1 pp2"), "status"] == "not modelled"
    assert "pipeline-parallel serving" in kept.loc[("l4", "bf16", "tp1 pp2"), "why"]
    losers = plan.candidates.loc[(plan.candidates["status"] == "meets") & ~plan.candidates["chosen"]]
    assert losers["why"].str.contains("/ month more than the plan|same cost").all()
    assert plan.search["by_status"]["not supported"] > 0 and "failed" not in plan.search["by_status"]


def test_only_at_the_point_forecast_is_said(table):
    # a TPOT target between the plan's point forecast and its high end: feasible only at the point
    _, _, plan = _plan(table)
    c = plan.chosen
    target = (c["tpot_ms"] + c["tpot_hi_ms"]) / 2
    q, layouts, tight = _plan(table, tpot_ms=target)
    rows = candidates(layouts, table, q)
    point_only = rows.loc[rows["status"] == "meets only at the point forecast"]
    assert len(point_only) and (point_only["tpot_ms"] <= target).all()
    assert ((point_only["tpot_hi_ms"] > target) | (point_only["ttft_hi_ms"] > q.ttft_ms)).all()
    assert not tight.candidates.loc[tight.candidates["feasible"], "meets_at_high_end"].eq(False).any()


def test_an_impossible_service_level_gives_the_closest_and_how_far(table):
    _, _, plan = _plan(table, ttft_ms=0.5, tpot_ms=0.1)
    assert not plan.feasible and plan.chosen is None
    closest = plan.closest(3)
    assert len(closest) == 3 and (closest["miss_pct"] > 0).all() and closest["miss_pct"].is_monotonic_increasing
    assert closest["why"].str.contains("at the high end >").all()
    assert plan.to_dict()["closest"] and plan.to_dict()["plan"] is None


def test_max_gpus(table):
    _, _, plan = _plan(table, rate=200.0, max_gpus=4)
    statuses = set(plan.candidates["status"])
    assert "too many GPUs" in statuses
    assert (plan.candidates.loc[plan.candidates["feasible"], "n_gpus"] <= 4).all()


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(0.01, 1e4), conc=st.integers(1, 512), ttft=st.floats(1, 5e3), tpot=st.floats(0.5, 200),
       spread=st.floats(1.0, 3.0), gpr=st.sampled_from([1, 2, 4, 8]))
def test_fleet_sizing_carries_the_rate(rate, conc, ttft, tpot, spread, gpr):
    q = ServeQuestion("llama31_8b", 1024, 512, 1000, 40, rate, gpus=("l4",), dtypes=("bf16",))
    row = pd.DataFrame([{"gpu": "l4", "dtype": "bf16", "tp": gpr, "concurrency": conc, "ttft_ms": ttft,
                         "tpot_ms": tpot, "ttft_hi_ms": ttft * spread, "tpot_hi_ms": tpot * spread, "fits": True,
                         "usd_per_gpu_hour": 2.0, "gpus_per_replica": gpr, "error": None}])
    out = size_fleets(row, q).iloc[0]
    lat_hi = (ttft * spread + 511 * tpot * spread) / 1e3
    assert out["replicas"] >= 1 and out["replicas"] * conc / lat_hi >= rate * (1 - 1e-12)
    assert (out["replicas"] - 1) * conc / lat_hi < rate * (1 + 1e-12)
    assert out["n_gpus"] == out["replicas"] * gpr
    assert out["usd_per_month"] == pytest.approx(out["n_gpus"] * 2.0 * HOURS_PER_MONTH)
    assert 0 < out["fleet_utilisation_pct"] <= 100 + 1e-9
    meets_hi = ttft * spread <= 1000 and tpot * spread <= 40
    meets = ttft <= 1000 and tpot <= 40
    assert out["status"] == ("meets" if meets_hi else "meets only at the point forecast" if meets
                             else "misses the target")
    assert np.isclose(out["margin_pct"], 100 * min(1 - ttft * spread / 1000, 1 - tpot * spread / 40))
