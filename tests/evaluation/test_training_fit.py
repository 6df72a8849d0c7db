"""Grid fits of one number on measured runs and their cross-validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.evaluation.training_fit import cross_validate, grid_fit


def test_the_fit_keeps_the_value_with_the_smallest_mean_ape_and_each_fold_is_forecast_without_itself():
    values = [1.0, 2.0, 3.0]
    # fold a is best at 1, fold b at 3; b has more runs, so all runs together pick 3
    ape = np.array([[1.0, 5.0, 9.0], [9.0, 5.0, 1.0], [9.0, 5.0, 1.0]])
    assert grid_fit(ape, values) == (3.0, 2)
    cv = cross_validate(ape, values, ["a", "b", "b"])
    assert cv.picks == {"a": 3.0, "b": 1.0}
    np.testing.assert_array_equal(cv.ape, [9.0, 9.0, 9.0])
    assert cv.mape == 9.0


def test_bad_shapes_and_a_single_fold_are_refused():
    with pytest.raises(ValueError, match="grid values"):
        grid_fit(np.ones((3, 2)), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="fold labels"):
        cross_validate(np.ones((3, 2)), [1.0, 2.0], ["a", "b"])
    with pytest.raises(ValueError, match="two folds"):
        cross_validate(np.ones((3, 2)), [1.0, 2.0], ["a", "a", "a"])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(1, 6), st.integers(2, 4), st.integers(0, 10_000))
def test_held_out_error_is_never_below_the_in_sample_optimum(n, k, n_folds, seed):
    rng = np.random.default_rng(seed)
    ape = rng.uniform(0, 50, size=(n, k))
    folds = [i % n_folds for i in range(n)]
    if len(set(folds)) < 2:
        return
    cv = cross_validate(ape, list(range(k)), folds)
    for key in set(folds):
        held = np.array(folds) == key
        assert cv.ape[held].mean() >= ape[held].mean(axis=0).min() - 1e-9
