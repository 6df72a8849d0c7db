"""Bad training requests are refused by name before the store is touched (issue 17, item 14)."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from tilecast.paths import ROOT
from tilecast.predictors import fit_predictor
from tilecast.training.train import TrainSpec


@pytest.mark.parametrize(("kw", "match"), [
    ({"families": ()}, "must be a non-empty list"),
    ({"families": "softmax"}, "must be a non-empty list"),
    ({"families": ("softmaxx",)}, "unknown family 'softmaxx'"),
    ({"max_rows": 1}, "max_rows=1 must be an integer >= 20"),
])
def test_bad_specs(kw, match):
    with pytest.raises(ValueError, match=match):
        TrainSpec(predictor="xgboost", **{"families": ("softmax",), **kw})


@pytest.mark.parametrize(("params", "match"), [
    ({"rounds": -5}, "rounds=-5 must be a positive integer"),
    ({"rounds": 2.5}, "rounds=2.5 must be a positive integer"),
    ({"eta": 0}, "eta=0 must be a positive number"),
    ({"max_depth": "deep"}, "max_depth='deep' must be a positive integer"),
])
def test_bad_hyper_parameters(params, match):
    rows = pd.DataFrame({"OPName": ["softmax"] * 4, "B": [8, 16, 32, 64], "H": [128] * 4, "Latency": [0.01] * 4,
                         "Device": ["Tesla T4"] * 4})
    with pytest.raises(ValueError, match=match):
        fit_predictor("xgboost", "softmax", rows, **params)


def test_the_job_takes_a_bare_family_name(tmp_path):
    """``families=softmax`` means the one family (it used to be read letter by letter: unknown family 's')."""
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "train.py"), "families=softmaxx",
                           f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and "unknown family 'softmaxx'" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()  # refused before the store was touched


def test_evaluate_refuses_when_every_label_is_skipped_and_unknown_unseen_gpus(tmp_path):
    (tmp_path / "labels" / "NVIDIA_L4").mkdir(parents=True)
    (tmp_path / "labels" / "NVIDIA_L4" / "x.json").write_text("{}")
    base = [sys.executable, str(ROOT / "jobs" / "evaluate.py"), "forecaster=roofline",
            f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"]
    proc = subprocess.run([*base, f"labels_dir={tmp_path / 'labels'}"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 2 and "no label could be read" in proc.stderr  # it used to exit 0
    proc = subprocess.run([*base, "unseen_gpus=[l4,nope]"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and "unknown GPU 'nope'" in proc.stderr
