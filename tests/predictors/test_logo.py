"""Leave-one-GPU-out of a family's training rows (tilecast.predictors.logo): one fold per GPU with rows to score,
fit with training's fit function and parameters on the other GPUs only, figures per left-out GPU."""

from __future__ import annotations

import numpy as np
import pytest

import tilecast.predictors.logo as logo
from tilecast.predictors import training_rows
from tilecast.specs import get_gpu

QUICK = {"rounds": 5}


@pytest.fixture
def fits(monkeypatch):
    """Every fit LOGO makes: (predictor, family, rows, params), the real fit still done."""
    calls = []
    real = logo.fit_predictor

    def spy(name, family, rows, **params):
        calls.append((name, family, rows.copy(), params))
        return real(name, family, rows, **params)

    monkeypatch.setattr(logo, "fit_predictor", spy)
    return calls


def test_fp32_folds_score_model_shaped_rows_and_never_fit_the_left_out_gpu(small_rows, fits):
    rows = small_rows("softmax", 600)
    result = logo.run_logo("softmax", "xgboost", QUICK, rows)
    gpus = {get_gpu(d).key for d in rows.loc[rows["Source"] == "test", "Device"].unique()}
    assert set(result.mape_pct) == gpus and len(gpus) == 5
    assert len(fits) == len(gpus)
    for (name, family, fitted, params), gpu in zip(fits, result.mape_pct, strict=True):
        assert (name, family, params) == ("xgboost", "softmax", QUICK)  # training's fit, the same params
        left_out = get_gpu(gpu).device_name
        assert left_out not in set(fitted["Device"])  # no row of the left-out GPU
        assert len(fitted) == int((rows["Device"] != left_out).sum())  # every row of the others
        assert result.rows[gpu] == int(((rows["Device"] == left_out) & (rows["Source"] == "test")).sum())
    assert all(np.isfinite(v) and v > 0 for v in result.mape_pct.values())
    assert result.mean_pct == pytest.approx(np.mean(list(result.mape_pct.values())))
    assert result.worst_pct == max(result.mape_pct.values()) == result.mape_pct[result.worst_gpu]
    m = result.metrics()
    assert m["logo_mape_pct"] == result.mean_pct and m["logo_worst_mape_pct"] == result.worst_pct
    assert {f"logo_mape_pct.{g}" for g in gpus} <= set(m)


def test_precision_folds_score_every_row_of_the_left_out_gpu(fits):
    rows = training_rows("vec_half").sample(n=300, random_state=0)
    result = logo.run_logo("vec_half", "xgboost", QUICK, rows)
    assert set(result.mape_pct) == {"a100_sxm4_80gb", "a40"}
    assert sum(result.rows.values()) == len(rows)
    assert [set(f[2]["Device"]) for f in fits] == [{"NVIDIA A40"}, {"NVIDIA A100-SXM4-80GB"}]


def test_no_folds_without_two_gpus(small_rows, fits):
    rows = small_rows("softmax", 600)
    assert logo.run_logo("softmax", "roofline", {}, rows.loc[rows["Device"] == "Tesla T4"]) is None
    only_one_scored = rows.loc[(rows["Source"] == "train") | (rows["Device"] == "Tesla T4")]
    result = logo.run_logo("softmax", "roofline", {}, only_one_scored)  # the others still train it
    assert list(result.mape_pct) == ["tesla_t4"] and len(fits) == 1
