"""Calibration: MAPE-optimal per-family scale, shape residual, bounded corrections, serialisation."""

import json

import numpy as np
import pandas as pd
import pytest

from tilecast.predictors import evaluation_rows, fit_predictor
from tilecast.predictors.calibration import Calibration, fit_calibration, loo_mape_pct, weighted_median
from tilecast.specs import get_gpu
from tilecast.tiles.roofline import roofline_ms


def test_weighted_median():
    assert weighted_median(np.array([1.0, 2.0, 10.0]), np.ones(3)) == 2.0
    assert weighted_median(np.array([1.0, 2.0, 10.0]), np.array([1.0, 1.0, 5.0])) == 10.0


@pytest.fixture()
def measured():
    gpu = get_gpu("l4")
    rows = evaluation_rows("linear", devices=["l4"]).head(20).copy()
    return gpu, rows


@pytest.mark.parametrize("method", ["scale", "slope", "krr"])
def test_recovers_a_constant_factor(measured, method):
    gpu, rows = measured
    roof = fit_predictor("roofline", "linear", rows)
    rows["Latency"] = 3.0 * roofline_ms(rows, gpu)
    cal = fit_calibration(roof, rows, gpu, method=method)
    assert cal.scale == pytest.approx(3.0) and cal.slope == pytest.approx(0.0, abs=1e-9)
    assert np.allclose(cal.alpha, 0.0, atol=1e-9)
    np.testing.assert_allclose(cal.apply(roof.predict_ms(rows, gpu), rows), rows["Latency"])


def test_correction_never_goes_below_roofline(measured):
    gpu, rows = measured
    roof = fit_predictor("roofline", "linear", rows)
    rows["Latency"] = 0.5 * roofline_ms(rows, gpu)  # impossible measurements: faster than the roofline
    cal = fit_calibration(roof, rows, gpu, method="scale")
    assert cal.scale == pytest.approx(0.5)
    assert (cal.apply(roof.predict_ms(rows, gpu), rows) >= roofline_ms(rows, gpu) * (1 - 1e-12)).all()


def test_reduces_error_of_a_learned_predictor(tiny_predictor, measured):
    gpu, rows = measured
    p = tiny_predictor("xgboost", "linear")
    cal = fit_calibration(p, rows, gpu)
    before = p.predict_ms(rows, gpu)
    after = cal.apply(before, rows)
    y = rows["Latency"].to_numpy()
    assert np.mean(np.abs(after - y) / y) <= np.mean(np.abs(before - y) / y)
    assert Calibration.from_dict(cal.to_dict()) == cal and cal.rows == len(rows)


def test_unknown_method_is_named(measured):
    gpu, rows = measured
    with pytest.raises(ValueError, match="unknown calibration method 'median'"):
        fit_calibration(fit_predictor("roofline", "linear", rows), rows, gpu, method="median")
    with pytest.raises(ValueError, match="unknown calibration base 'mean'; known: predictor, roofline, auto"):
        fit_calibration(fit_predictor("roofline", "linear", rows), rows, gpu, base="mean")


class Jittered:
    """A predictor whose forecast is the roofline times a fixed random factor per row (0.5x to 2x)."""

    family, floor_ms = "linear", 0.0

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def predict_ms(self, rows, gpu):
        factors = np.array([np.random.default_rng([self.seed, m, n, k]).uniform(-1, 1)
                            for m, n, k in rows[["M", "N", "K"]].astype(int).to_numpy()])
        return roofline_ms(rows, gpu) * 2.0 ** factors


def test_auto_base_takes_the_roofline_when_the_predictor_errs_row_by_row():
    """The GPU runs every GEMM at 1/1.6 of its roofline; a predictor whose error jumps from row to row cannot
    be corrected by a smooth function of the shape, the roofline can: ``auto`` picks it by leave-one-out
    error on the measured rows alone, and held-out rows come out right."""
    gpu = get_gpu("l4")
    rows = evaluation_rows("linear", devices=["l4"]).drop_duplicates(["M", "N", "K"]).head(60).copy()
    rows["Latency"] = 1.6 * roofline_ms(rows, gpu)
    fit, held = rows.head(20), rows.iloc[20:]
    p = Jittered(seed=1)
    cal = fit_calibration(p, fit, gpu)
    assert cal.base == "roofline" and cal.scale == pytest.approx(1.6)
    np.testing.assert_allclose(cal.apply(p.predict_ms(held, gpu), held), held["Latency"], rtol=1e-9)
    forced = fit_calibration(p, fit, gpu, base="predictor")
    y = held["Latency"].to_numpy()
    assert np.mean(np.abs(forced.apply(p.predict_ms(held, gpu), held) / y - 1)) > 0.2
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal


def test_auto_base_keeps_a_predictor_that_is_right_up_to_a_factor():
    gpu = get_gpu("l4")
    rows = evaluation_rows("linear", devices=["l4"]).drop_duplicates(["M", "N", "K"]).head(20).copy()
    p = Jittered(seed=2)
    rows["Latency"] = 1.3 * p.predict_ms(rows, gpu)
    cal = fit_calibration(p, rows, gpu)
    assert cal.base == "predictor" and cal.scale == pytest.approx(1.3)
    few = fit_calibration(p, rows.head(4), gpu)  # too few rows to choose: the predictor
    assert few.base == "predictor"


def test_shape_residual_learns_what_one_factor_cannot():
    """Layer norms whose long rows run 2x slower than the prediction: one factor is wrong for half the rows,
    the shape residual gets both halves nearly right on rows it did not see."""
    gpu = get_gpu("l4")
    rows = evaluation_rows("layernorm", devices=["l4"]).reset_index(drop=True)
    roof = fit_predictor("roofline", "layernorm", rows)
    pred = roof.predict_ms(rows, gpu)
    rows["Latency"] = pred * np.where(rows["H"].to_numpy() >= 4096, 3.0, 1.5)
    fit, held = rows.iloc[::3], rows.drop(index=rows.index[::3])
    y = held["Latency"].to_numpy()

    def mape(method):
        cal = fit_calibration(roof, fit, gpu, method=method)
        return np.mean(np.abs(cal.apply(roof.predict_ms(held, gpu), held) / y - 1))

    assert mape("scale") > 0.15
    assert mape("krr") < 0.5 * mape("scale")


def test_krr_round_trips_through_json(measured):
    gpu, rows = measured
    roof = fit_predictor("roofline", "linear", rows)
    rows["Latency"] = roofline_ms(rows, gpu) * (1.0 + rows["K"].rank().to_numpy() / len(rows))
    cal = fit_calibration(roof, rows, gpu, method="krr")
    assert cal.method == "krr" and len(cal.alpha) == len(rows) and cal.dims == ("M", "N", "K")
    back = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert back == cal
    pred = roof.predict_ms(rows, gpu)
    np.testing.assert_allclose(back.apply(pred, rows), cal.apply(pred, rows))


def test_reads_calibrations_stored_before_the_shape_residual():
    old = {"family": "linear", "gpu_key": "l4", "scale": 1.3, "slope": 0.1, "ref_ms": 2.0, "floor_ms": 0.01,
           "rows": 20, "method": "auto"}
    cal = Calibration.from_dict(old)
    assert cal.base == "predictor"
    assert cal.alpha == () and np.allclose(cal.residual(evaluation_rows("linear", devices=["l4"]).head(3)), 0.0)


def test_too_few_rows_for_the_shape_residual_fall_back_to_scale(measured):
    gpu, rows = measured
    roof = fit_predictor("roofline", "linear", rows)
    rows["Latency"] = 2.0 * roofline_ms(rows, gpu)
    cal = fit_calibration(roof, rows.head(3), gpu)
    assert cal.alpha == () and cal.scale == pytest.approx(2.0)


def test_leave_one_out_error_holds_out_every_row_of_a_shape():
    """Leave-one-out MAPE of the correction (the calibration gate of issue 17): a predictor right up to a factor
    is corrected on rows it did not see; twenty measurements of one shape are held out together, so they cannot
    vouch for each other."""
    gpu = get_gpu("l4")
    rows = evaluation_rows("linear", devices=["l4"]).drop_duplicates(["M", "N", "K"]).head(12).reset_index(drop=True)
    p = Jittered(seed=3)
    rows["Latency"] = 3.0 * p.predict_ms(rows, gpu)  # above the roofline (>= 0.5x it times 3)
    before = float(np.mean(np.abs(p.predict_ms(rows, gpu) / rows["Latency"] - 1)) * 100)
    assert loo_mape_pct(p, rows, gpu) < 1e-6 < before

    twins = pd.concat([rows.iloc[[0]]] * 10 + [rows.iloc[1:6]], ignore_index=True)
    twins["Latency"] = p.predict_ms(twins, gpu) * np.where(np.arange(len(twins)) < 10, 3.0, 1.0)
    shapes = twins[["M", "N", "K"]].astype(str).agg("x".join, axis=1).to_numpy()
    # the shape residual (krr) is what lets a twin be vouched for by the other nine when held out alone
    by_row = loo_mape_pct(p, twins, gpu, method="krr")
    by_shape = loo_mape_pct(p, twins, gpu, groups=shapes, method="krr")
    assert by_shape > 40.0 > 20.0 > by_row  # by row, each twin is predicted from the other nine
    with pytest.raises(ValueError, match="at least 2 groups"):
        loo_mape_pct(p, twins.head(10), gpu, groups=shapes[:10])


def test_non_finite_parameters_are_named():
    assert Calibration("linear", "l4", scale=1.2, alpha=(0.1, -0.2), centres=((1.0,), (2.0,))).non_finite() == []
    bad = Calibration("linear", "l4", scale=float("nan"), alpha=(0.1, float("inf")))
    assert bad.non_finite() == ["scale=nan", "alpha[1]=inf"]
    assert Calibration("linear", "l4", scale=0.0).non_finite() == ["scale=0 (must be > 0)"]
