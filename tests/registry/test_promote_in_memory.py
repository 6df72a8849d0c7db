"""Issue 27 items 15 and 19: the promotion suite is plain code over in-memory predictors; the nightly's bootstrap
hands promotion the predictors it has just trained (``promote(trained=...)``) instead of loading them back from the
store, and a stale entry (another version) is never used. Roofline versions on a throwaway store: seconds."""

from __future__ import annotations

from tilecast.evaluation.suite import build_frames
from tilecast.predictors import fit_predictor
from tilecast.tiles.ops import FP32_FAMILIES
from tilecast.training.promotion import (
    PromotionPolicy,
    alias_versions,
    promote,
    score_suite,
    suite_predictors,
    unseen_kernel_rows,
)
from tilecast.training.train import TrainSpec, train


def test_promotion_scores_the_predictors_it_is_handed(module_store, few_labels):
    results = train(TrainSpec(predictor="roofline", families=FP32_FAMILIES, max_rows=300, experiment="test-train",
                              logo=False))
    versions = {r.family: r.version for r in results}
    rows, frames = unseen_kernel_rows(FP32_FAMILIES, PromotionPolicy()), build_frames(few_labels.labels)

    stored = score_suite(versions, few_labels.labels, rows, frames)  # loaded from the store
    same = score_suite(versions, few_labels.labels, rows, frames, {r.family: r.predictor for r in results})
    assert same.kernel_mape_pct == stored.kernel_mape_pct and same.e2e_mean_ape_pct == stored.e2e_mean_ape_pct

    slow = fit_predictor("roofline", "softmax", None, floor_ms=50.0)  # every softmax kernel >= 50 ms: far off
    handed = suite_predictors(versions, {"softmax": slow})
    assert handed["softmax"] is slow and handed["bmm"] is not slow
    other = score_suite(versions, few_labels.labels, rows, frames, handed)
    assert other.kernel_mape_pct["softmax"] > stored.kernel_mape_pct["softmax"] + 50  # the handed one was scored

    stale = {"softmax": ("999", slow)}  # not the version at @challenger: ignored, the stored one is scored
    result = promote(FP32_FAMILIES, labels=few_labels, register=False, trained=stale)
    assert result.first and result.candidate.kernel_mape_pct == stored.kernel_mape_pct
    assert alias_versions("champion", FP32_FAMILIES) == versions
