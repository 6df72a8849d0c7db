"""Calibration: MAPE-optimal per-family scale, bounded corrections, serialisation."""

import numpy as np
import pytest

from tilecast.predictors import evaluation_rows, fit_predictor
from tilecast.predictors.calibration import Calibration, fit_calibration, weighted_median
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


@pytest.mark.parametrize("method", ["scale", "auto"])
def test_recovers_a_constant_factor(measured, method):
    gpu, rows = measured
    roof = fit_predictor("roofline", "linear", rows)
    rows["Latency"] = 3.0 * roofline_ms(rows, gpu)
    cal = fit_calibration(roof, rows, gpu, method=method)
    assert cal.scale == pytest.approx(3.0) and cal.slope == pytest.approx(0.0, abs=1e-9)
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
