"""The leave-one-GPU-out (LOGO) criterion in training and promotion: ``jobs/train.py logo=true`` logs it on the
version's run; promotion refuses a challenger whose LOGO mean or worst GPU is worse than the champion's beyond
tolerance, or that has none (unless ``require_logo=false``), and skips the gate when the champion has none.
Real MLflow on a throwaway sqlite store."""

from __future__ import annotations

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from tests.registry.helpers import compose_job, job_main, trained
from tilecast.predictors import training_rows
from tilecast.predictors.design import predictor_defaults
from tilecast.predictors.logo import run_logo
from tilecast.tiles.ops import FP32_FAMILIES
from tilecast.training import promotion
from tilecast.training.promotion import LogoFigure, PromotionPolicy, PromotionRefused, SuiteScore, alias_versions

FAM = "softmax"


def score(versions: dict[str, str], logo: dict[str, LogoFigure]) -> SuiteScore:
    return SuiteScore(versions, dict.fromkeys(versions, 10.0), 10.0, 0, pd.DataFrame(), logo)


def gate(new: LogoFigure | None, old: LogoFigure | None, **policy) -> tuple[bool, str]:
    current, candidate = score({FAM: "1"}, {FAM: old} if old else {}), score({FAM: "2"}, {FAM: new} if new else {})
    ok, reasons = promotion.decide(current, candidate, [FAM], PromotionPolicy(**policy))
    return ok, "; ".join(reasons)


# ------------------------------------------------------------------------------------------ the gate


@pytest.mark.parametrize("mean, worst, ok", [
    (20.0, 30.0, True),    # the same
    (21.0, 30.0, True),    # mean worse by exactly the tolerance
    (21.5, 30.0, False),   # mean worse by more
    (20.0, 33.0, True),    # worst GPU worse by exactly its tolerance
    (20.0, 33.5, False),   # worst GPU worse by more
    (15.0, 25.0, True),    # better
])
def test_logo_tolerances(mean, worst, ok):
    got, text = gate(LogoFigure(mean, worst, "tesla_p4"), LogoFigure(20.0, 30.0, "tesla_t4"))
    assert got is ok
    assert f"{FAM}: leave-one-GPU-out MAPE mean {mean:.2f}% vs champion 20.00%, worst {worst:.2f}% (tesla_p4)" in text
    assert ("worse by more than" in text) is (not ok)


def test_logo_over_other_gpus_is_said():
    ok, text = gate(LogoFigure(20.0, 30.0, "a", ("a", "b")), LogoFigure(20.0, 30.0, "a", ("a", "b", "c")))
    assert ok and "over other left-out GPUs: a,b vs a,b,c" in text


def test_versions_with_other_left_out_gpus_are_compared_over_the_ones_they_share():
    # the challenger also left out a new GPU (its rows were added to training) on which it does badly: judged
    # over the GPUs both left out it is better, and the line says over which
    new = LogoFigure(30.0, 60.0, "mi100", ("a", "b", "mi100"), {"a": 10.0, "b": 20.0, "mi100": 60.0})
    old = LogoFigure(20.0, 25.0, "b", ("a", "b"), {"a": 15.0, "b": 25.0})
    ok, text = gate(new, old)
    assert ok and "mean 15.00% vs champion 20.00%, worst 20.00% (b) vs 25.00% (b)" in text
    assert "over the left-out GPUs both have: a,b" in text
    worse = LogoFigure(30.0, 60.0, "mi100", ("a", "b", "mi100"), {"a": 17.0, "b": 30.0, "mi100": 60.0})
    assert not gate(worse, old)[0]


def test_a_challenger_without_logo_is_refused_unless_not_required():
    ok, text = gate(None, LogoFigure(20.0, 30.0))
    assert not ok and f"`python jobs/train.py families=[{FAM}] logo=true`" in text and "require_logo=false" in text
    ok, text = gate(None, LogoFigure(20.0, 30.0), require_logo=False)
    assert ok and "LOGO gate skipped (require_logo=false)" in text


def test_a_champion_without_logo_skips_the_gate_and_first_promotion_needs_none():
    ok, text = gate(LogoFigure(90.0, 99.0), None)
    assert ok and "champion (v1) has no leave-one-GPU-out figure" in text and "skipped" in text
    ok, reasons = promotion.decide(None, score({FAM: "1"}, {}), [FAM], PromotionPolicy())
    assert ok and "first promotion" in reasons[0]


def test_an_unchanged_family_is_not_gated():
    ok, text = promotion.decide(score({FAM: "1"}, {}), score({FAM: "1"}, {}), [FAM], PromotionPolicy())
    assert ok and "leave-one-GPU-out" not in "; ".join(text)


def test_policy_refuses_negative_logo_tolerances():
    for name in ("logo_tolerance_pct", "logo_worst_tolerance_pct"):
        with pytest.raises(ValueError, match=name):
            PromotionPolicy(**{name: -1.0})


# -------------------------------------------------------------------------------- with a real registry


def _run_of(version: str):
    client = MlflowClient()
    return client.get_run(client.get_model_version(f"tilecast-{FAM}", version).run_id)


def _last_promote_run():
    return mlflow.search_runs(experiment_names=["tilecast-promote"], order_by=["attributes.start_time DESC"],
                              max_results=1, output_format="list")[0]


def test_train_job_logs_logo_on_the_versions_run(module_store):
    """``jobs/train.py logo=true``: the version's run has the mean, the worst and one figure per GPU, the very
    figures of :func:`run_logo` on the rows the version was trained from (same predictor and parameters)."""
    job_main("train")(compose_job("train", [f"families=[{FAM}]", "max_rows=300", "predictor.params.rounds=5",
                                            "logo=true", f"mlflow.tracking_uri={module_store}"]))
    version = alias_versions("challenger", [FAM])[FAM]
    run = _run_of(version)
    rows = training_rows(FAM).sample(n=300, random_state=0).sort_index()
    want = run_logo(FAM, "xgboost", {**predictor_defaults("xgboost"), "rounds": 5}, rows)
    got = run.data.metrics
    assert {k: got[k] for k in want.metrics() if k != "logo_s"} == pytest.approx(
        {k: v for k, v in want.metrics().items() if k != "logo_s"})
    assert len([k for k in got if k.startswith("logo_mape_pct.")]) == len(want.mape_pct) >= 2
    assert run.data.tags["tilecast.logo_worst_gpu"] == want.worst_gpu
    assert promotion.logo_figure(FAM, version) == LogoFigure(want.mean_pct, want.worst_pct, want.worst_gpu,
                                                             tuple(want.mape_pct), pytest.approx(want.mape_pct))
    # without logo=true (the default) there is none
    trained([FAM])
    assert "logo_mape_pct" not in _run_of(alias_versions("challenger", [FAM])[FAM]).data.metrics


def test_promotion_gates_on_logo(module_store, few_labels):
    first = trained(FP32_FAMILIES)  # no LOGO figure anywhere
    assert promotion.promote(FP32_FAMILIES, labels=few_labels, register=False).first  # the first needs none

    # a challenger without LOGO is refused, saying how to get one; require_logo=false lets it through
    no_logo = trained([FAM])
    with pytest.raises(PromotionRefused, match=rf"python jobs/train.py families=\[{FAM}\] logo=true"):
        promotion.promote([FAM], labels=few_labels, register=False)
    assert alias_versions("champion", [FAM]) == {FAM: first[FAM]}
    assert _last_promote_run().data.tags["tilecast.decision"] == "refused"
    result = promotion.promote([FAM], PromotionPolicy(require_logo=False), labels=few_labels, register=False)
    assert "LOGO gate skipped (require_logo=false)" in result.reason
    assert alias_versions("champion", [FAM]) == {FAM: no_logo[FAM]}

    # a challenger with LOGO against a champion without: the gate is skipped, and the reason says so
    with_logo = trained([FAM], logo=True)
    result = promotion.promote([FAM], labels=few_labels, register=False)
    assert f"champion (v{no_logo[FAM]}) has no leave-one-GPU-out figure" in result.reason
    run = mlflow.get_run(result.run_id)
    assert f"challenger.logo_mape_pct.{FAM}" in run.data.metrics and "LOGO gate skipped" in run.data.tags[
        "tilecast.reason"]
    assert f"champion.logo_mape_pct.{FAM}" not in run.data.metrics
    assert alias_versions("champion", [FAM]) == {FAM: with_logo[FAM]}

    # much worse leave-one-GPU-out (every kernel >= 50 ms): refused by that gate alone, champion kept
    trained([FAM], params={"floor_ms": 50.0}, logo=True)
    loose = PromotionPolicy(kernel_tolerance_pct=1e6, e2e_tolerance_pct=1e6)
    with pytest.raises(PromotionRefused, match=rf"{FAM}: leave-one-GPU-out MAPE mean .*\(mean worse by more than 1 "
                                               r"points; worst GPU worse by more than 3 points\)"):
        promotion.promote([FAM], loose, labels=few_labels, register=False)
    assert alias_versions("champion", [FAM]) == {FAM: with_logo[FAM]}
    run = _last_promote_run()
    assert run.data.metrics[f"challenger.logo_mape_pct.{FAM}"] > run.data.metrics[f"champion.logo_mape_pct.{FAM}"] + 1
    assert f"challenger.logo_worst_mape_pct.{FAM}" in run.data.metrics
    assert "leave-one-GPU-out" in run.data.tags["tilecast.reason"]

    # the same model again: within tolerance, promoted, and the move records the LOGO figures
    again = trained([FAM], logo=True)
    result = promotion.promote([FAM], labels=few_labels, register=False)
    assert result.promoted and f"{FAM}: leave-one-GPU-out MAPE mean" in result.reason
    assert alias_versions("champion", [FAM]) == {FAM: again[FAM]}
    assert {f"challenger.logo_mape_pct.{FAM}", f"champion.logo_worst_mape_pct.{FAM}"} <= set(result.moves[0].metrics)


def test_promote_job_passes_the_logo_settings(module_store, monkeypatch):
    seen = {}

    def fake(families, policy, *args, **kwargs):
        seen["policy"] = policy
        raise PromotionRefused("stop here")

    monkeypatch.setattr(promotion, "promote", fake)
    with pytest.raises(SystemExit):
        job_main("promote")(compose_job("promote", [f"mlflow.tracking_uri={module_store}", "logo_tolerance_pct=2.5",
                                                    "logo_worst_tolerance_pct=4.0", "require_logo=false"]))
    assert seen["policy"] == PromotionPolicy(logo_tolerance_pct=2.5, logo_worst_tolerance_pct=4.0, require_logo=False)
    assert PromotionPolicy().require_logo and compose_job("promote", []).require_logo
