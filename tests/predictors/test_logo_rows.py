"""Leave-one-GPU-out pools (issue 14, item 1): every public GPU of the data, unseen ones included, never by
accident in training_rows; the fp32 training rows hold NeuSight's two public AMD GPUs (issue 14, item 3)."""

import pytest

from tilecast.predictors import TRAINING_GPUS, UNSEEN_GPUS, training_rows
from tilecast.predictors.rows import AMD_TRAINING_GPUS, FP32_TRAINING_GPUS, amd_rows, device_names, logo_gpus, logo_rows
from tilecast.specs import get_gpu


def test_the_pool_is_read_from_the_data_and_holds_the_unseen_gpus() -> None:
    pool = logo_gpus()
    assert set(TRAINING_GPUS) | set(UNSEEN_GPUS) == set(pool) and len(pool) == len(set(pool))


def test_logo_rows_hold_every_pool_gpu_and_training_rows_still_refuse_the_unseen() -> None:
    rows = logo_rows("layernorm")
    assert {get_gpu(d).key for d in rows["Device"].unique()} == set(logo_gpus())
    assert set(rows["Source"]) == {"train", "test"}
    with pytest.raises(ValueError, match="refusing to train on unseen GPU rows"):
        training_rows("layernorm", ("tesla_t4", "l4"))
    with pytest.raises(ValueError, match="tensor_rows"):
        logo_rows("tc_gemm")


def test_amd_rows_are_neusights_two_amd_gpus() -> None:
    rows = amd_rows("softmax")
    assert set(rows["Device"]) == {"AMD Instinct MI100", "AMD Instinct MI210"} and (rows["Latency"] > 0).all()
    assert {get_gpu(d).vendor for d in rows["Device"]} == {"amd"}


@pytest.mark.parametrize("family", ["bmm", "layernorm"])  # model-shaped AMD rows / random-shape AMD rows
def test_fp32_training_rows_hold_mi100_and_mi210_never_mi250_nor_an_unseen_gpu(family: str) -> None:
    rows = training_rows(family)
    devices = set(rows["Device"].astype(str))
    assert devices == set(device_names(FP32_TRAINING_GPUS))
    assert {"AMD Instinct MI100", "AMD Instinct MI210"} <= devices and set(AMD_TRAINING_GPUS) == {"mi100", "mi210"}
    assert not devices & set(device_names((*UNSEEN_GPUS, "mi250", "mi250x", "mi300x")))
    amd = rows.loc[rows["Device"].str.startswith("AMD")]
    assert len(amd) == len(amd_rows(family)) and amd["Source"].isin(["train", "test"]).all()
    assert (rows["Latency"] > 0).all() and rows[["OPName", "Device", "Latency", "Source"]].notna().all().all()
    assert set(training_rows(family, amd=False)["Device"]) == set(device_names(TRAINING_GPUS))
    with pytest.raises(ValueError, match="refusing to train on unseen GPU rows"):
        training_rows(family, ("tesla_t4", "a100_pcie_80gb"))


def test_precision_families_take_no_amd_rows() -> None:
    assert {get_gpu(d).vendor for d in training_rows("vec_half")["Device"]} == {"nvidia"}
