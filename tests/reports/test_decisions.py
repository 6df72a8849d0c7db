"""The decision-first report: the recommendation per workload (cheapest GPU and batch meeting the target, its
margin, confidence and change since the previous run), and a page that puts it first, then the plots, then
the full tables collapsed."""

import re

import numpy as np
import pytest

from tilecast.reports.build import RECOMMENDATIONS_ID, SERVE_RECOMMENDATIONS_ID, ReportSettings, build_report
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


def test_the_page_opens_with_the_decisions(built_report):
    md = (built_report / "report.md").read_text()
    _order(md, "Run **2026-01-02**", "Since **2026-01-01**: 45 of 45 cells moved by more than 5%",
           "## Recommendations: the cheapest GPU per workload", "| model | mode | dtype | seq_len | gpu | batch |",
           "## Serving: the cheapest GPU per serve workload", "## Fleet totals", "## Plots", "](plots/",
           "## Full tables", "## Run", "## Latency per model x GPU x batch", "## Cheapest GPU per workload and batch",
           "## Cost per 1M tokens", "## Serving: cost per 1M output tokens per GPU",
           "## Serving: largest concurrency that fits", "## Changes since 2026-01-01", "## Failed cells")
    assert "step +10%" in md and "| llama31_8b | bf16 | 1024 | 256 |" in md
    html = (built_report / "report.html").read_text()
    first_details = html.index("<details")
    top = html[:first_details]
    # above the collapsed sections: the two recommendation tables and the fleet plan, then the images; nothing else
    assert re.findall(r"<table id='([^']+)'>", top) == [RECOMMENDATIONS_ID, SERVE_RECOMMENDATIONS_ID, "fleet-plan"]
    assert top.count("<table") == 3 and top.index("<img") > top.index(f"id='{SERVE_RECOMMENDATIONS_ID}'")
    assert len(top.split("<img")[0]) < 40_000  # the decisions are a few KB, not megabytes of tables
    rest = html[first_details:]
    assert rest.count("<details") == rest.count("</details>") >= 9 and " open>" not in rest
    assert "<img" not in rest and html.count("data:image/png;base64,") == 5  # the serving Pareto plot too
    assert (built_report / "plots" / "serving_pareto.png").exists()
    for name in ("recommendations", "serve_recommendations", "serve_cost", "serve_capacity", "serve_failed"):
        assert (built_report / "tables" / f"{name}.csv").exists()


def test_a_run_without_serve_cells_has_no_serve_section(tmp_path, smoke_scores):
    md, html = build_report(tmp_path, smoke_scores, {"date": "2026-01-01"}, ReportSettings(slice=SL))
    text = md.read_text()
    assert "Serving" not in text and "serve" not in text.lower().replace("observe", "")
    assert "No previous run" not in text  # no comparison asked for: none mentioned
    assert "since_previous" not in text and f"id='{RECOMMENDATIONS_ID}'" in html.read_text()
    assert not (tmp_path / "plots" / "serving_pareto.png").exists()
