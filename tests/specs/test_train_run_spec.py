"""TrainRun: the layout is a value; every bad setting is a named error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.specs import SpecError
from tilecast.specs.train_run import (
    BatchSplitError,
    LayoutError,
    LoraError,
    Network,
    TrainRun,
    TrainRunError,
    UnknownShardingError,
    parse_network,
)


def run(**kw) -> TrainRun:
    base = dict(model="mpt_7b", seq_len=2048, micro_batch=6, n_gpus=64, global_batch=384, sharding="zero3")
    return TrainRun(**{**base, **kw})


def test_names_normalise_and_derive():
    r = run(sharding="FULL_SHARD", activation_checkpointing=False)
    assert (r.sharding, r.activation_checkpointing, r.dp, r.grad_accum, r.nodes) == ("zero3", "none", 64, 1, 8)
    assert run(sharding="shard_grad_op", activation_checkpointing=True).activation_checkpointing == "full"
    assert run(sharding="fsdp_full").sharding == "zero3" and run(sharding="ddp").sharding == "none"
    r = run(tp=2, pp=2, cp=2, global_batch=48)
    assert (r.dp, r.grad_accum, r.shard_group) == (8, 1, 16)
    assert run(n_gpus=8, global_batch=96).tokens_per_step == 96 * 2048


@pytest.mark.parametrize(("kw", "error", "text"), [
    (dict(n_gpus=10, tp=4, global_batch=None, grad_accum=1), LayoutError, "not divisible by tp x pp x cp"),
    (dict(n_gpus=12, global_batch=None, grad_accum=1), LayoutError, "whole nodes"),
    (dict(n_gpus=8, sharding="hybrid", gpus_per_node=16, global_batch=None, grad_accum=1), LayoutError, "hybrid"),
    (dict(global_batch=100), BatchSplitError, "not divisible by micro_batch x dp"),
    (dict(global_batch=None), BatchSplitError, "grad_accum or global_batch"),
    (dict(grad_accum=2), BatchSplitError, "disagrees"),
    (dict(sharding="zero9"), UnknownShardingError, "unknown sharding 'zero9'"),
    (dict(lora_rank=-1), LoraError, "lora_rank"),
    (dict(lora_rank=8, lora_base_dtype="int3"), LoraError, "lora_base_dtype"),
    (dict(tp=3, n_gpus=48, global_batch=96), LayoutError, "tp=3 does not divide"),
    (dict(pp=64, global_batch=6, micro_batch=6, n_gpus=64), LayoutError, "pipeline stages"),
    (dict(cp=3, n_gpus=48, global_batch=96), LayoutError, "2 x cp"),
    (dict(seq_len=4096), TrainRunError, "exceeds mpt_7b's 2048 positions"),
    (dict(dtype="fp32"), TrainRunError, "unknown dtype"),
    (dict(optimizer="adam9"), TrainRunError, "unknown optimizer"),
    (dict(network="roce"), TrainRunError, "network='roce'"),
])
def test_bad_settings_are_named_errors(kw, error, text):
    with pytest.raises(error, match=text) as info:
        run(**kw)
    assert isinstance(info.value, SpecError)  # a job's exit 2


def test_network_forms():
    assert parse_network("roce:200") == Network("roce", 200.0)
    assert parse_network({"fabric": "infiniband", "gbps_per_gpu": 400}).gbs == 50.0
    assert parse_network(None) is None and run(network="infiniband:400").network.tag == "infiniband:400"
    with pytest.raises(TrainRunError, match="fabric"):
        Network("carrier_pigeon", 1.0)
    with pytest.raises(TrainRunError, match="positive"):
        Network("roce", 0)


def test_with_keeps_the_global_batch_and_revalidates():
    r = run(n_gpus=8, global_batch=96)
    assert r.with_(micro_batch=3, global_batch=r.global_batch).grad_accum == 4
    assert r.with_(sharding="zero1").sharding == "zero1"
    with pytest.raises(UnknownShardingError):
        r.with_(sharding="nope")


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]), cp=st.sampled_from([1, 2]),
       dp=st.integers(1, 16), micro=st.integers(1, 8), ga=st.integers(1, 8))
def test_batch_split_is_exact(tp, pp, cp, dp, micro, ga):
    n = tp * pp * cp * dp
    if n > 8 and n % 8:
        with pytest.raises(LayoutError):
            TrainRun("mpt_7b", 2048, micro, n, grad_accum=ga, tp=tp, pp=pp, cp=cp)
        return
    r = TrainRun("mpt_7b", 2048, micro, n, grad_accum=ga, tp=tp, pp=pp, cp=cp)
    assert r.dp == dp and r.global_batch == micro * ga * dp
    assert TrainRun("mpt_7b", 2048, micro, n, global_batch=r.global_batch, tp=tp, pp=pp, cp=cp).grad_accum == ga
