"""Promotion gates, refusal, first promotion, history and rollback (training/promotion.py) on a real sqlite store."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from mlflow import MlflowClient

from tests.registry.helpers import trained
from tilecast.paths import ROOT
from tilecast.registry.aliases import alias_history
from tilecast.registry.forecaster import BUNDLE_TAG, FORECASTER_NAME, bundle_of
from tilecast.registry.tracking import ENV_VAR
from tilecast.tiles.ops import FAMILIES
from tilecast.training.promotion import (
    PromotionPolicy,
    PromotionRefused,
    SuiteScore,
    alias_versions,
    decide,
    promote,
    rollback,
)


def score(e2e: float, kernel: dict[str, float], versions: dict[str, str] | None = None, failed: int = 0):
    return SuiteScore(versions or {f: "1" for f in kernel}, kernel, e2e, failed, pd.DataFrame())


# ------------------------------------------------------------------------------------------ the gates


def test_first_promotion_needs_no_comparison():
    ok, reasons = decide(None, score(50.0, {"bmm": 90.0}), ["bmm"], PromotionPolicy())
    assert ok and "first promotion" in reasons[0]


@pytest.mark.parametrize("e2e, kernel, ok", [
    (10.0, 20.0, True),     # better end to end, same kernel error
    (12.0, 20.0, True),     # a tie end to end
    (12.01, 20.0, False),   # worse end to end
    (10.0, 21.0, True),     # kernel worse by exactly the tolerance
    (10.0, 21.5, False),    # kernel worse by more than the tolerance
])
def test_gates(e2e, kernel, ok):
    current = score(12.0, {"bmm": 20.0, "linear": 30.0}, {"bmm": "1", "linear": "1"})
    candidate = score(e2e, {"bmm": kernel, "linear": 10.0}, {"bmm": "2", "linear": "2"})
    got, reasons = decide(current, candidate, ["bmm", "linear"],  # no LOGO figures here: test_logo_gate.py
                          PromotionPolicy(kernel_tolerance_pct=1.0, require_logo=False))
    assert got is ok
    text = "; ".join(reasons)
    assert "end-to-end mean APE" in text
    if not ok and kernel > 21:
        assert "bmm: unseen-GPU kernel MAPE 21.50% vs champion 20.00%" in text


def test_more_failed_labels_refuse():
    ok, reasons = decide(score(10.0, {"bmm": 1.0}), score(5.0, {"bmm": 1.0}, {"bmm": "2"}, failed=2), ["bmm"],
                         PromotionPolicy())
    assert not ok and "fails 2" in reasons[0]


def test_policy_validation():
    with pytest.raises(ValueError, match="kernel_tolerance_pct"):
        PromotionPolicy(kernel_tolerance_pct=-1)
    with pytest.raises(KeyError, match="l4"):
        PromotionPolicy(unseen_gpus=("l44",))


# -------------------------------------------------------------------------------- with a real registry


def test_promotion_lifecycle(module_store, few_labels, monkeypatch, tmp_path):
    client = MlflowClient()
    first = trained(FAMILIES)
    assert alias_versions("champion", FAMILIES) == dict.fromkeys(FAMILIES)

    result = promote(FAMILIES, labels=few_labels)  # no champion yet: first promotion
    assert result.promoted and result.first
    assert alias_versions("champion", FAMILIES) == first
    move = alias_history("tilecast-linear", "champion")[-1]
    assert (move.from_version, move.to_version) == (None, first["linear"])
    assert "challenger.e2e_mean_ape_pct" in move.metrics and move.time_utc
    forecaster = client.get_registered_model(FORECASTER_NAME)
    fv = forecaster.aliases["champion"]
    assert client.get_model_version(FORECASTER_NAME, fv).tags[BUNDLE_TAG] == bundle_of(first)

    # a much worse linear predictor: refused, champion untouched, the reason names the family
    bad = trained(["linear"], "roofline", {"floor_ms": 50.0})  # every kernel >= 50 ms: far worse
    with pytest.raises(PromotionRefused, match="linear: unseen-GPU kernel MAPE"):
        promote(["linear"], PromotionPolicy(kernel_tolerance_pct=0.0), labels=few_labels)
    assert alias_versions("champion", FAMILIES) == first
    assert len(alias_history("tilecast-linear", "champion")) == 1

    # the job says so and exits non-zero (on the same few labels, as label files)
    monkeypatch.setenv(ENV_VAR, module_store)
    for r in few_labels.labels.itertuples(index=False):
        (tmp_path / r.device.replace(" ", "_")).mkdir(exist_ok=True)
        (tmp_path / r.device.replace(" ", "_") / f"{r.tag}.json").write_text(json.dumps({"e2e_latency": r.label_ms}))
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "promote.py"), "families=[linear]",
                           "kernel_tolerance_pct=0", f"labels_dir={tmp_path}"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "refused" in proc.stderr and "linear" in proc.stderr
    assert alias_versions("champion", FAMILIES) == first

    # with loose enough gates (and no LOGO figure asked for: test_logo_gate.py) it passes: history records
    # from/to and the metrics
    loose = PromotionPolicy(kernel_tolerance_pct=1e6, e2e_tolerance_pct=1e6, require_logo=False)
    result = promote(["linear"], loose, labels=few_labels, register=False)
    assert result.promoted and not result.first
    assert alias_versions("champion", ["linear"]) == {"linear": bad["linear"]}
    # no forecaster bundles the new champions and none was registered: @champion must not serve the old set
    assert "champion" not in client.get_registered_model(FORECASTER_NAME).aliases
    move = alias_history("tilecast-linear", "champion")[-1]
    assert (move.from_version, move.to_version) == (first["linear"], bad["linear"])
    assert {"challenger.kernel_mape_pct.linear", "champion.kernel_mape_pct.linear"} <= set(move.metrics)

    # rollback restores the previous champion and the forecaster of that set
    moves = rollback(["linear"])
    assert [(m.from_version, m.to_version) for m in moves] == [(bad["linear"], first["linear"])]
    assert alias_versions("champion", FAMILIES) == first
    assert client.get_registered_model(FORECASTER_NAME).aliases["champion"] == fv  # the same bundle, reused
    assert len(alias_history("tilecast-linear", "champion")) == 3

    with pytest.raises(PromotionRefused, match="first champion"):
        rollback(["bmm"])
