"""Tiny fits shared by the predictor tests (a few thousand rows, a few rounds / epochs)."""

import pandas as pd
import pytest

from tilecast.predictors import fit_predictor, training_rows

TINY = {"xgboost": {"rounds": 15}, "mlp": {"epochs": 2, "hidden": 32}, "roofline": {}}


def _sample(rows, n, seed=0):
    test = rows[rows["Source"] == "test"]
    rest = rows[rows["Source"] != "test"]
    return pd.concat([test.sample(n=min(len(test), n // 2), random_state=seed),
                      rest.sample(n=min(len(rest), n // 2), random_state=seed)], ignore_index=True)


@pytest.fixture(scope="session")
def small_rows():
    cache = {}

    def get(family, n=2000):
        if (family, n) not in cache:
            # the NVIDIA training GPUs' rows: the tests that mix in AMD rows do so themselves
            cache[family, n] = _sample(training_rows(family, amd=False), n)
        return cache[family, n]

    return get


@pytest.fixture(scope="session")
def tiny_predictor(small_rows):
    cache = {}

    def get(name, family):
        if (name, family) not in cache:
            cache[name, family] = fit_predictor(name, family, small_rows(family), **TINY[name])
        return cache[name, family]

    return get
