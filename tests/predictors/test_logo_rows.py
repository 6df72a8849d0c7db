"""Leave-one-GPU-out pools (issue 14, item 1): every public GPU of the data, unseen ones included, never by
accident in training_rows."""

import pytest

from tilecast.predictors import TRAINING_GPUS, UNSEEN_GPUS, training_rows
from tilecast.predictors.rows import amd_rows, logo_gpus, logo_rows
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
