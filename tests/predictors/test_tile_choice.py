"""Tile choosers: reference nearest neighbour vs learned, persistence, split-K, per-vendor libraries."""

import json

import numpy as np
import pandas as pd
import pytest

from tilecast.predictors import evaluation_rows
from tilecast.predictors.tile_choice import fit_chooser, load_chooser
from tilecast.specs import get_gpu
from tilecast.tiles.choice import DEFAULT_GENERATION, row_gpu_columns
from tilecast.tiles.gemm import profiled_tiles


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


def amd_rows_of(device):
    from tilecast.predictors.rows import amd_rows

    rows = amd_rows("linear")
    return rows[rows["Device"] == device].reset_index(drop=True)


@pytest.fixture(scope="module")
def mixed_chooser(linear_rows):
    """A learned chooser fit on NVIDIA rows plus the MI210's (Tensile tiles and GSU split-K)."""
    return fit_chooser("learned", pd.concat([linear_rows, amd_rows_of("AMD Instinct MI210")], ignore_index=True),
                       rounds=5)


def test_an_amd_gpu_uses_an_amd_library_and_an_nvidia_gpu_never_does(mixed_chooser, linear_rows, tmp_path):
    lib = {k: mixed_chooser.library_for(*row_gpu_columns(linear_rows.head(1), get_gpu(k)).iloc[0])
           for k in ("mi100", "mi250", "mi300x", "l4", "h100_sxm_80gb")}
    assert {k: v.device for k, v in lib.items() if k.startswith("mi")} == dict.fromkeys(
        ("mi100", "mi250", "mi300x"), "AMD Instinct MI210")
    assert lib["l4"].vendor == lib["h100_sxm_80gb"].vendor == "nvidia"
    rows = amd_rows_of("AMD Instinct MI210").head(200)
    got = mixed_chooser.choose(rows, get_gpu("mi210"))  # same vendor, generation and CUs: profiled tiles copied
    np.testing.assert_array_equal(got.to_numpy(), profiled_tiles(rows)[list(got.columns)].to_numpy())
    mixed_chooser.save(tmp_path / "c")
    again = load_chooser(tmp_path / "c")
    assert [m.vendor for m in again.models] == [m.vendor for m in mixed_chooser.models]
    np.testing.assert_array_equal(again.choose(rows, get_gpu("mi250")).to_numpy(),
                                  mixed_chooser.choose(rows, get_gpu("mi250")).to_numpy())


def test_without_amd_training_an_amd_gpu_takes_the_default_generation_library(linear_rows, tmp_path):
    nvidia = fit_chooser("learned", linear_rows, rounds=5)
    lib = nvidia.library_for(*row_gpu_columns(linear_rows.head(1), get_gpu("mi250")).iloc[0])
    assert lib.vendor == "nvidia" and lib.generation == DEFAULT_GENERATION  # the A100's, as before vendors
    nvidia.save(tmp_path / "old")
    meta = tmp_path / "old" / "chooser.json"
    old = json.loads(meta.read_text())
    for m in old["models"]:
        m.pop("vendor")  # a chooser saved before vendors were recorded reads as NVIDIA libraries
    meta.write_text(json.dumps(old))
    assert {m.vendor for m in load_chooser(tmp_path / "old").models} == {"nvidia"}
