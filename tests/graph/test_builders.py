"""Builders: every catalog family in both modes; FLOPs linear in batch; training ~3x inference."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.graph import build_graph
from tilecast.graph.ops import GEMM_KINDS
from tilecast.specs import Workload, WorkloadError, all_models, get_model

MODELS = sorted(all_models())
DENSE_DECODERS = ["gpt2_large", "gpt3_xl", "opt_13", "llama3_8b", "mistral_7b"]


def _seq(key: str) -> int:
    return min(get_model(key).max_positions or 512, 256)


@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_every_catalog_model_builds(key, mode):
    g = build_graph(key, 2, _seq(key), mode, dtype="bf16" if get_model(key).family == "moe" else "fp32")
    phases = {o.phase for o in g.ops}
    assert phases == ({"fw"} if mode == "inference" else {"fw", "bw", "acc"})
    assert g.total_flops("fw", GEMM_KINDS) > 0
    assert {o.section for o in g.ops} == {"prologue", "layer", "epilogue"}
    assert g.num_layers == get_model(key).num_layers + get_model(key).num_decoder_layers
    assert g.meta["model"] == key and g.meta["mode"] == mode


def test_gpt2_large_layer_inventory():
    """One GPT-2 layer: 4 Linears, 2 BMMs, LN x2, the gelu_new chain, as HF runs it."""
    g = build_graph("gpt2_large", 4, 1024)
    linears = {o.dims: o.count for o in g.select(kind="linear", section="layer").ops}
    assert linears == {(4096, 1280, 3840): 36, (4096, 1280, 1280): 36, (4096, 1280, 5120): 36,
                       (4096, 5120, 1280): 36}
    bmms = {o.dims: o.count for o in g.select(kind="bmm").ops}
    assert bmms == {(80, 1024, 64, 1024): 36, (80, 1024, 1024, 64): 36}
    lm_head = g.select(kind="linear", section="epilogue").ops
    assert [o.dims for o in lm_head] == [(4096, 1280, 50257)]


def test_switch_experts_run_capacity_padded_buffers():
    spec = get_model("switchxl4")
    g = build_graph(spec, 2, 512)
    experts = {o.dims: o.count for o in g.select(kind="linear").ops if o.m == 2 * spec.expert_capacity}
    n_sparse = 24  # every second block of 24 encoder + 24 decoder blocks
    assert experts == {(128, 1024, 16384): n_sparse * 4, (128, 16384, 1024): n_sparse * 4}


def test_bert_heads_depend_on_mode():
    inf = {o.name for o in build_graph("bert_large", 8, 512).select(section="epilogue").ops}
    train = {o.name for o in build_graph("bert_large", 8, 512, "training").select(section="epilogue", phase="fw").ops}
    assert "classifier" in inf and "cls.predictions.decoder" not in inf
    assert {"cls.predictions.decoder", "cls.seq_relationship"} <= train and "classifier" not in train


def test_llama_gqa_projections_and_repeat():
    spec = get_model("llama3_8b")
    g = build_graph(spec, 1, 128)
    dims = {o.dims for o in g.select(kind="linear", section="layer").ops}
    kv = spec.num_kv_heads * spec.head_dim
    assert (128, 4096, 4096) in dims and (128, 4096, kv) in dims and (128, 4096, 14336) in dims


@pytest.mark.parametrize("key", ["gpt2_large", "bert_large"])
def test_fused_graph_keeps_gemms_and_merges_vector_ops(key):
    plain, fused = build_graph(key, 2, 512), build_graph(key, 2, 512, fused=True)
    assert plain.total_flops(kind=GEMM_KINDS) == fused.total_flops(kind=GEMM_KINDS)
    assert fused.count(kind="vec") < plain.count(kind="vec")
    assert fused.total_bytes(kind="vec") < plain.total_bytes(kind="vec")
    assert fused.total_bytes(kind="mem") == plain.total_bytes(kind="mem")


def test_workload_and_bad_input_errors():
    wl = Workload("opt_13", 2, 128, "training")
    assert build_graph(wl).meta["batch"] == 2
    with pytest.raises(WorkloadError, match="batch must be a positive integer, got 0"):
        build_graph("opt_13", 0, 128)
    with pytest.raises(WorkloadError, match="seq_len=4096 exceeds opt_13's 2048 positions"):
        build_graph("opt_13", 1, 4096)
    with pytest.raises(WorkloadError, match="num_heads=5 does not divide hidden_size=768"):
        build_graph(dataclasses.replace(get_model("bert"), num_heads=5, num_kv_heads=1), 1, 8)


@settings(max_examples=20, deadline=None)
@given(key=st.sampled_from(MODELS), batch=st.integers(2, 48), seq=st.sampled_from([16, 64, 128]),
       mode=st.sampled_from(["inference", "training"]))
def test_flops_grow_linearly_in_batch(key, batch, seq, mode):
    dtype = "bf16" if get_model(key).family == "moe" else "fp32"
    one, many = build_graph(key, 1, seq, mode, dtype=dtype), build_graph(key, batch, seq, mode, dtype=dtype)
    for phase in ("fw", "bw"):
        assert many.total_flops(phase, GEMM_KINDS) == pytest.approx(batch * one.total_flops(phase, GEMM_KINDS),
                                                                    rel=1e-12)
        # a few mask / position-bias vector ops depend on seq_len only
        assert many.total_flops(phase) == pytest.approx(batch * one.total_flops(phase), rel=2e-3)
    assert many.total_flops("acc") == one.total_flops("acc")  # one add per parameter, whatever the batch


@settings(max_examples=15, deadline=None)
@given(key=st.sampled_from(DENSE_DECODERS), batch=st.integers(1, 16), seq=st.sampled_from([64, 256, 1024]))
def test_training_is_about_three_times_inference_for_dense_models(key, batch, seq):
    ratio = build_graph(key, batch, seq, "training").total_flops() / build_graph(key, batch, seq).total_flops()
    assert 2.95 <= ratio <= 3.1
