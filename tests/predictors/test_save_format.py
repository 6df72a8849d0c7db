"""Save format versions: written by every predictor kind and tile chooser, checked on load; the unversioned
first layout still loads, older or newer layouts fail with a ModelFormatError naming found and supported."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tilecast.paths import ROOT
from tilecast.predictors import PREDICTORS, ModelFormatError, evaluation_rows
from tilecast.predictors.format import FORMAT_KEY
from tilecast.predictors.tile_choice import load_chooser

KINDS = [("roofline", "softmax"), ("xgboost", "linear"), ("mlp", "linear")]


def _edit(path, change):
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize("name, family", KINDS)
def test_every_kind_writes_a_format_version(tiny_predictor, tmp_path, name, family):
    tiny_predictor(name, family).save(tmp_path)
    assert json.loads((tmp_path / "meta.json").read_text())[FORMAT_KEY] == 1
    if name != "roofline":
        assert json.loads((tmp_path / "tile_chooser" / "chooser.json").read_text())[FORMAT_KEY] == 1


@pytest.mark.parametrize("name, family", KINDS)
def test_the_unversioned_first_layout_still_loads(tiny_predictor, tmp_path, name, family):
    p = tiny_predictor(name, family)
    p.save(tmp_path)
    for meta in tmp_path.rglob("*.json"):
        if meta.name in ("meta.json", "chooser.json"):
            _edit(meta, lambda m: m.pop(FORMAT_KEY))
    rows = evaluation_rows(family).head(50)
    np.testing.assert_allclose(PREDICTORS[name].load(tmp_path).predict_ms(rows), p.predict_ms(rows), rtol=1e-6)


@pytest.mark.parametrize("name, family", KINDS)
def test_newer_format_is_refused_naming_found_and_supported(tiny_predictor, tmp_path, name, family):
    tiny_predictor(name, family).save(tmp_path)
    _edit(tmp_path / "meta.json", lambda m: m.update({FORMAT_KEY: 99}))
    with pytest.raises(ModelFormatError, match="has format version 99; this tilecast reads format version 1") as exc:
        PREDICTORS[name].load(tmp_path)
    assert (exc.value.found, exc.value.supported) == (99, (1,)) and f"{name} predictor" in str(exc.value)


def test_old_chooser_layout_without_models_is_refused(tiny_predictor, tmp_path):
    """The layout that used to crash with a raw ``KeyError: 'models'``."""
    tiny_predictor("xgboost", "linear").save(tmp_path)
    chooser = tmp_path / "tile_chooser" / "chooser.json"
    _edit(chooser, lambda m: [m.pop(FORMAT_KEY), m.pop("models")])
    with pytest.raises(ModelFormatError, match=r"tile chooser .* has no format version \(an unversioned layout "
                                               r"without 'models'\); this tilecast reads format version 1"):
        PREDICTORS["xgboost"].load(tmp_path)
    with pytest.raises(ModelFormatError):
        load_chooser(chooser.parent)


def test_missing_meta_and_wrong_kind_are_format_errors(tiny_predictor, tmp_path):
    with pytest.raises(ModelFormatError, match="meta.json is missing"):
        PREDICTORS["roofline"].load(tmp_path)
    tiny_predictor("roofline", "softmax").save(tmp_path)
    with pytest.raises(ModelFormatError, match="it holds a 'roofline' predictor"):
        PREDICTORS["xgboost"].load(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(ModelFormatError, match="unreadable"):
        PREDICTORS["roofline"].load(tmp_path)


def test_mlp_is_listed_but_torch_is_imported_only_when_used():
    code = ("import sys, tilecast.registry; from tilecast.predictors import PREDICTORS; "
            "assert 'mlp' in PREDICTORS and sorted(PREDICTORS) == ['mlp', 'roofline', 'xgboost']; "
            "assert 'torch' not in sys.modules, 'torch imported by tilecast.registry'; "
            "from tilecast.predictors import MLPPredictor; assert PREDICTORS['mlp'] is MLPPredictor; "
            "assert 'torch' in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
