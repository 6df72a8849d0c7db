"""Config matrices: validation before any work, expansion, exclusions, the shipped smoke and nightly grids."""

import pytest

from tilecast.scoring.matrix import CELL_KEYS, MatrixError, expand, load_matrix, n_gpus_of
from tilecast.specs import UnknownSpecError, all_gpus, all_models

BASE = dict(name="t", models=["gpt2_large"], gpus=["l4", "a100_pcie_40gb"], batch_sizes=[1, 4], seq_lens=[512, 2048],
            modes=["inference", "training"])


def test_expansion_is_the_cross_product_minus_exclusions_and_too_long_sequences():
    m = load_matrix({**BASE, "fused": [False, True], "exclude": [{"mode": "training", "fused": True}]})
    cells = expand(m)
    # gpt2_large has 1024 positions: seq 2048 is dropped; training + fused excluded
    assert len(cells) == 2 * 2 * 1 * (2 + 1)
    assert list(cells.columns) == [*CELL_KEYS, "n_gpus"]
    assert not ((cells["mode"] == "training") & cells["fused"]).any()
    assert set(cells["seq_len"]) == {512}
    assert not cells.duplicated(list(CELL_KEYS)).any()
    kept = expand(load_matrix({**BASE, "respect_max_positions": False}))
    assert set(kept["seq_len"]) == {512, 2048}


def test_names_are_normalised_and_all_means_the_catalog():
    m = load_matrix({**BASE, "gpus": ["NVIDIA L4", "NVIDIA_A100-PCIE-40GB", "l4"], "models": "all"})
    assert m.gpus == ("l4", "a100_pcie_40gb")
    assert m.models == tuple(all_models())
    assert load_matrix({**BASE, "gpus": "all"}).gpus == tuple(all_gpus())


def test_parallel_layouts_use_the_labels_spelling_and_count_gpus():
    m = load_matrix({**BASE, "parallel": [None, "dp4", "pp4", "tp2"]})
    assert m.parallel == ("none", "dp4", "pp4_1", "tp2")
    assert [n_gpus_of(p) for p in m.parallel] == [1, 4, 4, 2]
    cells = expand(m)
    assert dict(zip(cells["parallel"], cells["n_gpus"], strict=True)) == {"none": 1, "dp4": 4, "pp4_1": 4, "tp2": 2}


def test_unknown_gpu_and_model_are_reported_together_with_known_names():
    with pytest.raises(UnknownSpecError) as exc:
        load_matrix({**BASE, "gpus": ["l4", "h100_sxm_80gbb", "rtx9090"]})
    msg = str(exc.value)
    assert "'h100_sxm_80gbb'" in msg and "'rtx9090'" in msg and "h100_sxm_80gb" in msg and "field 'gpus'" in msg
    with pytest.raises(UnknownSpecError, match=r"unknown model 'gpt5'.*closest known"):
        load_matrix({**BASE, "models": ["gpt5"]})
    with pytest.raises(UnknownSpecError, match="exclude.gpu"):
        load_matrix({**BASE, "exclude": [{"gpu": "nope"}]})


@pytest.mark.parametrize("change, match", [
    ({"batch_sizes": [0]}, "batch_sizes.*0"),
    ({"batch_sizes": [2.5]}, "batch_sizes"),
    ({"modes": ["serving"]}, "modes.*serving"),
    ({"parallel": ["xp4"]}, "parallel.*xp4"),
    ({"fused": ["yes"]}, "fused"),
    ({"exclude": [{"colour": "red"}]}, "unknown key 'colour'"),
    ({"exclude": ["training"]}, r"exclude\[0\]"),
    ({"seq_lens": []}, "seq_lens.*empty"),
    ({"gpus_list": ["l4"]}, "unknown field 'gpus_list'"),
])
def test_bad_values_name_the_field(change, match):
    with pytest.raises(MatrixError, match=match):
        load_matrix({**BASE, **change})


def test_missing_field_and_all_excluded():
    cfg = dict(BASE)
    del cfg["modes"]
    with pytest.raises(MatrixError, match="missing field 'modes'"):
        load_matrix(cfg)
    with pytest.raises(MatrixError, match="every cell is excluded"):
        expand(load_matrix({**BASE, "exclude": [{"model": "gpt2_large"}]}))


def test_shipped_smoke_and_nightly_matrices(compose_cfg):
    smoke = expand(load_matrix(compose_cfg("score", ["matrix=smoke"])["matrix"]))
    assert 0 < len(smoke) <= 50
    nightly_m = load_matrix(compose_cfg("score", ["matrix=nightly"])["matrix"])
    nightly = expand(nightly_m)
    assert len(nightly) >= 10_000
    assert set(nightly["model"]) == set(all_models()) and set(nightly["gpu"]) == set(all_gpus())
    assert set(nightly["mode"]) == {"inference", "training"} and nightly["fused"].any()
    assert set(nightly["parallel"]) > {"none"}
