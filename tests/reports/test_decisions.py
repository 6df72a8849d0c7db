"""The decision-first report: the recommendation per workload (cheapest GPU and batch meeting the target, its
margin, confidence and change since the previous run), and a page that puts it first, then the plots, then
the full tables collapsed."""

import re

import numpy as np
import pytest

from tilecast.reports.build import PLANS_ID, RECOMMENDATIONS_ID, SERVE_RECOMMENDATIONS_ID, ReportSettings, build_report
from tilecast.reports.tables import NO_INTERVAL, Slice, fitting, headline, recommendations

SL = Slice(seq_len=512)
TARGETS = {"inference": 1000.0, "training": 10000.0}


def test_recommendation_is_the_cheapest_gpu_and_batch_meeting_the_target(smoke_scores):
    ok = fitting(headline(smoke_scores, SL))
    fastest = ok.loc[ok["mode"] == "inference"].groupby(["model", "dtype"])["e2e_ms"].min()
    target = float(fastest.min() + fastest.max()) / 2  # some workloads meet it, some do not
    rec = recommendations(smoke_scores, {"inference": target, "training": 1e12}, SL)
    assert not rec.duplicated(["model", "mode", "dtype"]).any()
    assert len(rec) == ok[["model", "mode", "dtype"]].drop_duplicates().shape[0]
    for r in rec.to_dict("records"):
        cells = ok.loc[(ok["model"] == r["model"]) & (ok["mode"] == r["mode"]) & (ok["dtype"] == r["dtype"])]
        t = target if r["mode"] == "inference" else 1e12
        meet = cells.loc[cells["e2e_ms"] <= t]
        assert r["meeting"] == meet["gpu"].nunique() and r["target_ms"] == t
        if len(meet):
            best = meet.loc[meet["cost_per_1m_tokens_usd"].idxmin()]
            assert (r["gpu"], r["batch"], r["step_ms"]) == (best["gpu"], best["batch"], best["e2e_ms"])
            assert r["usd_per_1m_tokens"] == best["cost_per_1m_tokens_usd"]
            assert r["usd_per_step"] == best["cost_per_step_usd"]
            assert r["margin_pct"] == pytest.approx(100 * (t - best["e2e_ms"]) / t) and r["margin_pct"] >= 0
        else:
            fastest = cells.loc[cells["e2e_ms"].idxmin()]
            assert r["gpu"] == f"none meets the target; fastest {fastest['gpu']}"
            assert r["margin_pct"] < 0 and np.isnan(r["usd_per_1m_tokens"])
    assert (rec["meeting"] == 0).any() and (rec["meeting"] > 0).any()
    assert rec["confidence"].str.contains(" ms: ").all()  # the scorer's 80% intervals
    no_interval = recommendations(smoke_scores.drop(columns=["pred_lo_ms", "pred_hi_ms"]), TARGETS, SL)
    assert (no_interval["confidence"] == NO_INTERVAL).all()  # a table scored before intervals existed


def test_interval_columns_feed_the_confidence_column(smoke_scores):
    s = smoke_scores.assign(pred_lo_ms=smoke_scores["e2e_ms"] * 0.5, pred_hi_ms=smoke_scores["e2e_ms"] * 2.0)
    rec = recommendations(s, TARGETS, SL)
    for r in rec.to_dict("records"):
        lo, hi = r["step_ms"] * 0.5, r["step_ms"] * 2.0
        verdict = ("meets even at the high end" if hi <= r["target_ms"] else
                   "misses even at the low end" if lo > r["target_ms"] else "interval spans the target")
        assert r["confidence"].endswith(verdict) and r["confidence"].startswith(f"{lo:.1f}-")
    assert rec["confidence"].str.endswith("spans the target").any()  # gpt2_large fp32 inference: 644 ms x 2
    s.loc[s.index[::2], "pred_hi_ms"] = np.nan  # an interval the predictor could not give: said so per row
    assert recommendations(s, TARGETS, SL)["confidence"].isin([NO_INTERVAL]).any()


def test_since_previous(smoke_scores):
    assert (recommendations(smoke_scores, TARGETS, SL, smoke_scores)["since_previous"] == "same").all()
    slower = smoke_scores.copy()
    slower.loc[slower["error"].isna(), "e2e_ms"] *= 1.10
    got = recommendations(slower, TARGETS, SL, smoke_scores)["since_previous"]
    assert (got == "step +10%").all()  # the same picks (cost per token is the scorer's, unchanged here)
    rec = recommendations(smoke_scores, TARGETS, SL)
    first = rec.iloc[0]
    prev = smoke_scores.loc[~((smoke_scores["gpu"] == first["gpu"]) & (smoke_scores["model"] == first["model"]))
                            & (smoke_scores["dtype"] == "fp32")]
    got = recommendations(smoke_scores, TARGETS, SL, prev).set_index(["model", "mode", "dtype"])["since_previous"]
    assert got[(first["model"], first["mode"], "fp32")].startswith("was ")
    assert (got.xs("bf16", level="dtype") == "new").all()


def _order(text, *needles):
    at = [text.index(n) for n in needles]
    assert at == sorted(at), list(zip(needles, at, strict=True))


def test_the_page_opens_with_the_plans(built_report):
    md = (built_report / "report.md").read_text()
    _order(md, "Run **2026-01-02**", "48 cells (45 forecast, 0 not supported on their GPU, 3 failed)",
           "Since **2026-01-01**: 45 of 45 cells moved by more than 5%", "## Plans: what to rent for each question",
           "| question | plan | cost | margin_pct | interval | since_previous |", "## Fleet totals",
           "Each workload priced at the dtype it names (bf16",
           "## Plots", "](plots/plans.png)", "an interactive chart in `report.html`; its data: `tables/chart.json`",
           "## Full tables", "## Cheapest GPU per workload (", "### bert (",
           "| model | mode | dtype | seq_len | gpu | batch |", "### gpt2 (",
           "## Serving: the cheapest GPU per serve workload",
           "## Run", "## Latency per model x GPU x batch", "## Cheapest GPU per workload and batch",
           "## Cost per 1M tokens", "## Serving: cost per 1M output tokens per GPU",
           "## Serving: largest concurrency that fits", "## Training runs at scale", "## Changes since 2026-01-01",
           "## Not supported", "## Failed cells")
    assert "step +10%" in md and "| llama31_8b | bf16 | 1024 | 256 |" in md
    html = (built_report / "report.html").read_text()
    first_details = html.index("<details")
    top = html[:first_details]
    # above the collapsed sections: the plans and the fleet plan, then the plans' figure and the chart; nothing else
    assert re.findall(r"<table id='([^']+)'>", top) == [PLANS_ID, "fleet-plan"]
    assert top.count("<table") == 2 and top.index("<img") > top.index("id='fleet-plan'")
    assert len(top.split("<img")[0]) < 40_000  # the decisions are a few KB, not megabytes of tables
    assert top.count("<script") == 2 and "id='explorer-data'" in top  # the chart: its data once, its script
    rest = html[first_details:]
    assert rest.count("<details") == rest.count("</details>") >= 12 and " open>" not in rest
    assert f"id='{RECOMMENDATIONS_ID}'" in rest and f"id='{SERVE_RECOMMENDATIONS_ID}'" in rest
    assert "<img" not in rest and "<script" not in rest and html.count("data:image/png;base64,") == 1
    assert sorted(p.name for p in (built_report / "plots").glob("*.png")) == ["plans.png"]
    for name in ("plans", "recommendations", "serve_recommendations", "serve_cost", "serve_capacity", "chart"):
        assert list((built_report / "tables").glob(f"{name}.*"))


def test_the_plans_rows(built_report, serve_scores):
    import pandas as pd

    plans = pd.read_csv(built_report / "tables" / "plans.csv")
    assert len(plans) == 4 and plans["question"].iloc[0].startswith("llama31_8b, 1,024 in / 256 out, 600 requests")
    first = plans.iloc[0]
    assert " x " in first["plan"] and "/ month" in first["cost"] and first["margin_pct"] >= 0
    assert first["since_previous"] == "same"  # the previous run's tables are tonight's here
    assert plans.iloc[1]["plan"].startswith("none meets it; closest ")  # TTFT 1 ms: impossible
    assert "not in the run's serve grid" in plans.iloc[2]["plan"]
    assert "to train" in plans.iloc[3]["cost"] and "days" in plans.iloc[3]["interval"]
    assert not plans["cost"].fillna("").str.contains("e-0").any()  # money as money, never 6.66e-04


def test_a_run_without_serve_cells_has_no_serve_section(tmp_path, smoke_scores):
    md, html = build_report(tmp_path, smoke_scores, {"date": "2026-01-01"}, ReportSettings(slice=SL))
    text = md.read_text()
    assert "Serving" not in text and "serve" not in text.lower().replace("observe", "")
    assert "No previous run" not in text  # no comparison asked for: none mentioned
    assert "since_previous" not in text and f"id='{RECOMMENDATIONS_ID}'" in html.read_text()
    assert not (tmp_path / "plots").exists() or not list((tmp_path / "plots").glob("*.png"))
