"""Tile choosers: reference nearest neighbour vs learned, persistence, split-K."""

import numpy as np
import pytest

from tilecast.predictors import evaluation_rows
from tilecast.predictors.tile_choice import fit_chooser, load_chooser
from tilecast.specs import get_gpu


@pytest.fixture(scope="module")
def linear_rows(small_rows):
    return small_rows("linear", 4000)


@pytest.mark.parametrize("name", ["fixed", "nearest", "learned"])
def test_choose_save_load(linear_rows, tmp_path, name):
    c = fit_chooser(name, linear_rows, **({"rounds": 5} if name == "learned" else {}))
    rows = evaluation_rows("linear").head(100)
    got = c.choose(rows)
    assert list(got.columns) == ["tile_k", "tile_m", "split", "sliced"] and got.notna().all().all()
    assert (got["split"] >= 1).all() and (got["tile_k"] >= 16).all()
    c.save(tmp_path / name)
    again = load_chooser(tmp_path / name).choose(rows)
    np.testing.assert_array_equal(again.to_numpy(), got.to_numpy())


def test_reference_ignores_split_k_and_learned_predicts_it(linear_rows):
    rows = evaluation_rows("linear", devices=["a100_pcie_80gb"])
    assert (fit_chooser("nearest", linear_rows).choose(rows)["split"] == 1).all()
    learned = fit_chooser("learned", linear_rows, rounds=10).choose(rows, get_gpu("a100_pcie_80gb"))
    assert (learned["split"] > 1).any()


def test_unknown_chooser_is_named(linear_rows):
    with pytest.raises(ValueError, match="unknown tile chooser 'oracle'"):
        fit_chooser("oracle", linear_rows)
