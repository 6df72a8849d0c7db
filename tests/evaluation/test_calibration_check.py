"""The check of a kernel calibration against the GPU's other model runs (``check_against_runs``)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.evaluation.calibration import check_against_runs, disagreement_lines
from tilecast.metrics import ape_pct


def table(rows):
    """An evaluation table: (gpu, model, label_ms, pred_ms, pred_cal_ms) per label, calibrated where it can be."""
    t = pd.DataFrame(rows, columns=["gpu", "model", "label_ms", "pred_ms", "pred_cal_ms"])
    return t.assign(ape_pct=ape_pct(t["pred_ms"], t["label_ms"]), ape_cal_pct=ape_pct(t["pred_cal_ms"], t["label_ms"]),
                    calibrated=True)


def test_a_calibration_that_helps_the_other_models_is_kept():
    t = table([("t4", "bert", 100, 150, 105), ("t4", "gpt2", 200, 300, 190), ("t4", "opt", 50, 80, 52)])
    out, per_gpu = check_against_runs(t, 0.5)
    assert out["calibrated"].all() and (out["pred_cal_ms"] == t["pred_cal_ms"]).all()
    assert per_gpu.to_dict("records") == [{"gpu": "t4", "labels": 3, "spec_only_pct": pytest.approx(160 / 3),
                                           "kernel_calibrated_pct": pytest.approx(14 / 3), "kept": 3,
                                           "disagrees": False}]
    assert disagreement_lines(per_gpu) == []


def test_kernels_that_disagree_with_the_model_runs_fall_back_to_spec_only_and_are_named():
    # p4: the kernel calibration makes every model run worse (spec-only 10% off, calibrated 40%)
    t = table([("p4", "bert", 100, 110, 60), ("p4", "gpt2", 200, 220, 120), ("v100", "bert", 100, 140, 101),
               ("v100", "gpt2", 100, 70, 98)])
    out, per_gpu = check_against_runs(t, 0.5)
    p4 = out[out["gpu"] == "p4"]
    assert not p4["calibrated"].any() and (p4["pred_cal_ms"] == p4["pred_ms"]).all()
    assert (p4["ape_cal_pct"] == p4["ape_pct"]).all()
    assert p4["calibration_note"].str.contains("other model runs").all()
    assert out[out["gpu"] == "v100"]["calibrated"].all()
    lines = disagreement_lines(per_gpu)
    assert len(lines) == 1 and lines[0].startswith("p4: its kernel measurements disagree with its model runs")


def test_a_gpu_with_one_model_measured_is_unchecked_and_says_so():
    out, _ = check_against_runs(table([("l4", "bert", 100, 150, 300), ("l4", "bert", 200, 300, 600)]), 0.5)
    assert out["calibrated"].all()
    assert out["calibration_note"].str.startswith("calibration unchecked: no other model measured on l4").all()


def test_uncalibrated_and_failed_rows_are_left_alone():
    t = table([("a", "bert", 100, 150, 150), ("a", "gpt2", 100, np.nan, np.nan), ("a", "opt", 100, 120, 90)])
    t.loc[0, "calibrated"] = False
    out, _ = check_against_runs(t, 0.5)
    assert out.loc[1, "calibration_note"] == "" and out.loc[0, "calibration_note"] == ""
    assert not out.loc[0, "calibrated"]


@pytest.mark.parametrize("margin", [-1.0, float("nan"), float("inf")])
def test_a_bad_margin_is_refused(margin):
    with pytest.raises(ValueError, match="margin"):
        check_against_runs(table([("a", "bert", 1, 1, 1)]), margin)


labels = st.floats(1.0, 1e4, allow_nan=False)
ratios = st.floats(0.2, 5.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["bert", "gpt2", "opt"]), labels, ratios, ratios), min_size=2,
                     max_size=8), i=st.integers(0, 7), new_label=labels, margin=st.floats(0, 5))
def test_a_labels_own_measurement_never_decides_whether_it_is_calibrated(rows, i, new_label, margin):
    """Leave one model out: changing one label's measurement leaves its own decision as it was."""
    i %= len(rows)
    t = table([("g", m, lab, lab * r, lab * c) for m, lab, r, c in rows])
    moved = t.copy()
    moved.loc[i, "label_ms"] = new_label
    moved = table([("g", m, lab, p, c) for m, lab, p, c in
                   moved[["model", "label_ms", "pred_ms", "pred_cal_ms"]].itertuples(index=False)])
    a, _ = check_against_runs(t, margin)
    b, _ = check_against_runs(moved, margin)
    assert a.loc[i, "calibrated"] == b.loc[i, "calibrated"]
    kept = a["calibrated"].to_numpy()
    assert np.allclose(a["pred_cal_ms"][~kept], a["pred_ms"][~kept])


def test_the_margin_is_one_default_across_the_jobs():
    from omegaconf import OmegaConf

    from tilecast.cli import conf_defaults
    from tilecast.evaluation.calibration import RUN_MARGIN_PCT
    from tilecast.paths import CONF_DIR
    from tilecast.pipelines.evaluate import EvaluationSettings
    from tilecast.registry.calibrate import CalibrationGate

    assert conf_defaults("evaluate")["calibration_margin_pct"] == RUN_MARGIN_PCT  # the schema: EvaluationSettings
    assert OmegaConf.load(CONF_DIR / "calibrate.yaml").gate.model_run_margin_pct == RUN_MARGIN_PCT
    assert EvaluationSettings().calibration_margin_pct == CalibrationGate().model_run_margin_pct == RUN_MARGIN_PCT
