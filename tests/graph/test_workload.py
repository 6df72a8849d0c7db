"""Workload: a frozen, validated value object whose errors name the bad value."""

import dataclasses

import pytest

from tilecast.specs import Workload, WorkloadError, get_model


def test_workload_resolves_catalog_keys_and_is_frozen():
    wl = Workload("gpt2_large", 4, 1024, "training")
    assert wl.model == get_model("gpt2_large") and wl.tokens == 4096 and wl.training
    with pytest.raises(dataclasses.FrozenInstanceError):
        wl.batch = 8
    assert hash(wl) == hash(Workload(get_model("gpt2_large"), 4, 1024, "training"))
    assert wl.describe() == "gpt2_large batch=4 seq_len=1024 training"


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"batch": 0}, "batch must be a positive integer, got 0"),
    ({"batch": -3}, "got -3"),
    ({"seq_len": 0}, "seq_len must be a positive integer, got 0"),
    ({"seq_len": 2048}, "seq_len=2048 exceeds gpt2_large's 1024 positions"),
    ({"mode": "train"}, "'train'"),
    ({"batch": 2.0}, "got 2.0"),
])
def test_bad_numbers_name_the_value(kwargs, needle):
    args = {"model": "gpt2_large", "batch": 1, "seq_len": 128, **kwargs}
    with pytest.raises(WorkloadError) as exc:
        Workload(**args)
    assert needle in str(exc.value)


def test_heads_not_dividing_hidden_size_is_named():
    spec = dataclasses.replace(get_model("gpt2_large"), num_heads=7, num_kv_heads=7)
    with pytest.raises(WorkloadError, match="num_heads=7 does not divide hidden_size=1280"):
        Workload(spec, 1, 16)


def test_unknown_model_lists_known_keys():
    with pytest.raises(KeyError) as exc:
        Workload("gpt2_lrge", 1, 16)
    assert "gpt2_large" in str(exc.value)
