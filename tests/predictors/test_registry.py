"""The registry, parameters, persistence and the training / evaluation rows."""

import numpy as np
import pytest

from tilecast.predictors import PREDICTORS, UNSEEN_GPUS, KernelPredictor, evaluation_rows, fit_predictor, training_rows
from tilecast.predictors.rows import device_names


def test_registry_names():
    assert set(PREDICTORS) == {"roofline", "xgboost", "mlp"}


def test_unknown_names_are_listed():
    with pytest.raises(ValueError, match="known: mlp, roofline, xgboost"):
        fit_predictor("forest", "bmm", None)
    with pytest.raises(ValueError, match="unknown kernel family 'conv'"):
        fit_predictor("xgboost", "conv", None)


def test_unknown_parameter_is_named(small_rows):
    with pytest.raises(ValueError, match="unknown xgboost parameter 'depth'"):
        fit_predictor("xgboost", "softmax", small_rows("softmax"), depth=3)


@pytest.mark.parametrize("name", ["roofline", "xgboost", "mlp"])
@pytest.mark.parametrize("family", ["linear", "layernorm"])
def test_save_load_round_trip(tiny_predictor, tmp_path, name, family):
    p = tiny_predictor(name, family)
    assert isinstance(p, KernelPredictor) and p.name == name and p.family == family
    p.save(tmp_path / "m")
    q = PREDICTORS[name].load(tmp_path / "m")
    rows = evaluation_rows(family).head(200)
    np.testing.assert_allclose(q.predict_ms(rows), p.predict_ms(rows), rtol=1e-6)
    assert q.params == p.params


def test_training_rows_never_hold_unseen_gpus():
    unseen = set(device_names(UNSEEN_GPUS))
    rows = training_rows("softmax")
    assert not set(rows["Device"]) & unseen
    assert set(rows["Source"]) == {"train", "test"} and len(set(rows["Device"])) == 7  # 5 NVIDIA + MI100, MI210
    assert len(set(training_rows("softmax", amd=False)["Device"])) == 5
    with pytest.raises(ValueError, match="refusing to train on unseen GPU rows"):
        training_rows("softmax", gpus=["tesla_t4", "l4"])


def test_evaluation_rows_of_requested_devices_and_family():
    rows = evaluation_rows("elementwise", devices=["l4"])
    assert set(rows["Device"]) == {"NVIDIA L4"}
    assert "softmax" not in set(rows["OPName"]) and len(rows) > 100
