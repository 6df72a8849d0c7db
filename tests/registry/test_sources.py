"""Issue 27 item 15: "registry champion or roofline predictor at an alias" is resolved in one place
(:func:`tilecast.predictors.sources.resolve_predictors`); the served model's and the evaluation's predictors are that
resolution (a throwaway store with roofline versions: seconds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.registry.helpers import trained
from tilecast.errors import UserError
from tilecast.predictors.sources import FORECASTERS, check_forecaster, resolve_predictors
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FP32_FAMILIES


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    from tilecast.predictors import training_rows

    return training_rows("softmax").head(20)


def test_an_unknown_forecaster_is_named_with_the_known_ones():
    assert check_forecaster("roofline") == "roofline"
    with pytest.raises(UserError, match="unknown forecaster 'magic'; known: registry, roofline"):
        resolve_predictors("magic")
    from tilecast.registry.forecaster import SOURCES
    from tilecast.scoring.predictors import KINDS

    assert SOURCES == KINDS == FORECASTERS  # the served model and the scorer name the same forecasters


def test_the_roofline_needs_no_registry(rows):
    r = resolve_predictors("roofline", families=["softmax", "bmm"])
    assert (r.forecaster, list(r.predictors), r.versions, r.notes) == ("roofline", ["softmax", "bmm"], {}, [])
    assert np.all(r.predict("softmax", rows, get_gpu("l4")) > 0)


def test_the_registry_side_and_its_users_agree(module_store, rows):
    versions = trained(FP32_FAMILIES)  # @challenger only: champion falls back to it
    r = resolve_predictors("registry", "champion", ["softmax"], calibrate=False)
    assert r.versions == {"softmax": versions["softmax"]} and list(r.predictors) == ["softmax"]
    direct = r.predictors["softmax"].predict_ms(rows, get_gpu("l4"))
    np.testing.assert_allclose(r.predict("softmax", rows, get_gpu("l4")), direct)

    from tilecast.pipelines.evaluate import load_predictors
    from tilecast.registry.forecaster import predictor_source

    predictors, evaluated, _ = load_predictors("registry", "champion")
    assert evaluated == versions and set(predictors) == set(FP32_FAMILIES)
    predict, served = predictor_source("roofline")
    assert served == {} and np.all(predict("softmax", rows, get_gpu("l4")) > 0)
