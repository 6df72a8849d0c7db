"""Config matrices: validation before any work, expansion, exclusions, the shipped smoke and nightly grids."""

import pytest

from tilecast.scoring.matrix import CELL_KEYS, GRAPH_KEYS, MatrixError, expand, load_matrix, n_gpus_of
from tilecast.specs import UnknownSpecError, all_gpus, all_models
from tilecast.tiles.dtypes import WORKLOAD_DTYPES

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
    ({"dtypes": ["bfloat17"]}, "dtypes.*'bfloat17'.*fp32, tf32, bf16, fp16, fp8, fp4, amp_bf16"),
    ({"dtypes": []}, "dtypes.*empty"),
    ({"exclude": [{"dtype": "int4"}]}, "exclude.dtype.*'int4'"),
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
    at_scale = {k for k in all_models() if k.startswith("mpt_")} | {"llama31_405b"}  # scored in train_runs only
    dense = {k for k, m in all_models().items() if m.family != "moe"}  # MoE decoders: per layout, not this grid
    assert set(nightly["model"]) == dense - at_scale and set(nightly["gpu"]) == set(all_gpus())
    assert nightly_m.train_runs is not None and set(nightly_m.train_runs.models) == {"llama31_8b", "llama31_70b"}
    assert nightly_m.train_runs.n_gpus == (8, 64, 256, 1024) and nightly_m.train_runs.sharding == ("zero3",)
    assert set(nightly["mode"]) == {"inference", "training"} and nightly["fused"].any()
    assert set(nightly["parallel"]) > {"none"}
    assert set(nightly["dtype"]) == {"fp32", "bf16"}  # fp8 is opt-in
    assert not nightly.loc[nightly["dtype"] == "bf16", "fused"].any()  # torch.compile fusion: fp32 labels only
    assert set(smoke["dtype"]) == {"fp32", "bf16"}


def test_dtype_is_an_axis_fp32_by_default():
    plain = expand(load_matrix(BASE))
    assert load_matrix(BASE).dtypes == ("fp32",) and (plain["dtype"] == "fp32").all()
    assert CELL_KEYS[-1] == "dtype" and "dtype" in GRAPH_KEYS and "gpu" not in GRAPH_KEYS
    m = load_matrix({**BASE, "dtypes": ["fp32", "bf16", "fp8", "bf16"]})
    assert m.dtypes == ("fp32", "bf16", "fp8")
    assert m.size_before_exclusions == 3 * load_matrix(BASE).size_before_exclusions
    cells = expand(m)
    assert len(cells) == 3 * len(plain)
    for dtype in m.dtypes:  # every dtype sees exactly the fp32 grid
        part = cells.loc[cells["dtype"] == dtype].drop(columns="dtype").reset_index(drop=True)
        assert part.equals(plain.drop(columns="dtype"))
    assert load_matrix({**BASE, "dtypes": "bf16"}).dtypes == ("bf16",)
    assert load_matrix({**BASE, "dtypes": None}).dtypes == ("fp32",)


def test_dtype_in_exclusions_and_amp_bf16_only_trains():
    cells = expand(load_matrix({**BASE, "dtypes": ["fp32", "bf16", "amp_bf16"],
                                "exclude": [{"dtype": "bf16", "mode": "training"}, {"dtype": ["fp32"], "batch": 4}]}))
    assert not ((cells["dtype"] == "bf16") & (cells["mode"] == "training")).any()
    assert not ((cells["dtype"] == "fp32") & (cells["batch"] == 4)).any()
    amp = cells.loc[cells["dtype"] == "amp_bf16"]
    # amp_bf16 is a training recipe: its inference cells are dropped like a too-long sequence
    assert len(amp) and set(amp["mode"]) == {"training"}
    with pytest.raises(MatrixError, match="every cell is excluded"):
        expand(load_matrix({**BASE, "modes": ["inference"], "dtypes": ["amp_bf16"]}))


def test_every_workload_dtype_is_accepted():
    assert load_matrix({**BASE, "dtypes": list(WORKLOAD_DTYPES)}).dtypes == WORKLOAD_DTYPES
