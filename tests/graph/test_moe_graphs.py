"""Mixture-of-experts graphs: parameters against the published sizes, one GPU's share of a layout, the ops and
collectives engines run, KV bytes per token against the MLA / GQA formulas, training, and the shipped tables."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.forecast.ops import op_kernel_rows
from tilecast.forecast.workload import graph_frame
from tilecast.graph.build import recorded
from tilecast.graph.kv_cache import kv_bytes_per_request, kv_bytes_per_token
from tilecast.graph.memory import memory_footprint
from tilecast.graph.parallel import build_parallel_graph
from tilecast.paths import ROOT
from tilecast.specs import Workload, WorkloadError, get_model
from tilecast.specs.layout import Layout, LayoutError

#: key -> parameters as published (model cards; text decoders, multi-token-prediction heads excluded)
PUBLISHED_TOTAL = {"deepseek_v3": 671e9, "qwen3_235b_a22b": 235e9, "qwen3_30b_a3b": 30.5e9,
                   "gpt_oss_120b": 116.8e9, "gpt_oss_20b": 20.9e9, "mixtral_8x22b": 141e9, "mixtral_8x7b": 46.7e9,
                   "llama4_maverick": 400e9, "glm5": 744e9, "qwen35_397b_a17b": 397e9, "kimi_k2": 1.03e12}
#: key -> (active parameters as published, whether the publisher leaves the input embedding out)
PUBLISHED_ACTIVE = {"deepseek_v3": (37e9, False), "qwen3_235b_a22b": (22e9, False), "qwen3_30b_a3b": (3.3e9, False),
                    "gpt_oss_120b": (5.13e9, True), "gpt_oss_20b": (3.61e9, True), "mixtral_8x22b": (39e9, False),
                    "mixtral_8x7b": (12.9e9, False), "llama4_scout": (17e9, False),
                    "llama4_maverick": (17e9, False), "qwen35_397b_a17b": (17e9, False), "kimi_k2": (32e9, False)}
MOE_TABLE = ROOT / "data" / "aiconfigurator_moe" / "moe.parquet"
MLA_TABLE = ROOT / "data" / "aiconfigurator_moe" / "generation_mla.parquet"


def _tape(key: str, layout: Layout | None = None):
    return recorded(Workload(get_model(key), 1, 16, dtype="bf16", parallel=layout))


def _experts(tape) -> int:
    return sum(n.params[0] for n in tape.nodes if n.kind == "moe")


@pytest.mark.parametrize("key", sorted(PUBLISHED_TOTAL))
def test_total_parameters_match_the_published_size(key):
    assert _tape(key).num_params == pytest.approx(PUBLISHED_TOTAL[key], rel=0.015)


@pytest.mark.parametrize("key", sorted(PUBLISHED_ACTIVE))
def test_active_parameters_match_the_published_count(key):
    m, tape = get_model(key), _tape(key)
    active = tape.num_params - _experts(tape) * (1 - m.moe.topk / m.moe.experts)
    published, no_embedding = PUBLISHED_ACTIVE[key]
    if no_embedding:
        active -= m.vocab_size * m.hidden_size
    assert active == pytest.approx(published, rel=0.05)


def test_deepseek_expert_parameters_are_exact():
    m = get_model("deepseek_v3")
    assert _experts(_tape("deepseek_v3")) == 58 * 256 * 3 * 7168 * 2048
    assert m.moe.shared_inter == 2048


@pytest.mark.parametrize(("layout", "expert_share"), [(Layout(8), 8), (Layout(1, 8, 8), 8), (Layout(8, 1, 4), 8),
                                                      (Layout(4, 4, 16), 16)])
def test_one_gpu_holds_its_share_of_the_experts(layout, expert_share):
    one, mine = _tape("deepseek_v3"), _tape("deepseek_v3", layout)
    assert _experts(mine) * expert_share == _experts(one)
    params = {}
    for n in one.nodes:
        if n.params and n.kind != "moe":
            params.setdefault(n.name, sum(n.params))
    local = {}
    for n in mine.nodes:
        if n.params and n.kind != "moe":
            local.setdefault(n.name, sum(n.params))
    assert local.keys() == params.keys()
    for name, full in params.items():  # every other weight replicated (or vocab-split) or split over tp
        assert local[name] in (full, full // layout.tp, -(-get_model("deepseek_v3").vocab_size // layout.tp)
                               * get_model("deepseek_v3").hidden_size), name
    if layout.tp == 1:  # attention data parallel: every GPU holds all of attention and the dense layers
        assert local == params


def test_quantised_weights_per_gpu():
    wl = Workload(get_model("deepseek_r1"), 1, 16, dtype="fp4", parallel=Layout(8))
    fp4 = memory_footprint(wl, dtype="fp4").params_bytes
    bf16 = memory_footprint(wl, dtype="bf16").params_bytes
    assert 0.25 < fp4 / bf16 < 0.32  # NVFP4 experts and linears (0.5625 bytes), bf16 embeddings and norms
    gpt = Workload(get_model("gpt_oss_120b"), 1, 16, dtype="bf16")
    mxfp4 = memory_footprint(gpt, dtype="bf16").params_bytes  # the release's mxfp4 experts stay mxfp4
    assert mxfp4 == pytest.approx(_experts(_tape("gpt_oss_120b")) * (0.5 + 1 / 32)
                                  + (_tape("gpt_oss_120b").num_params - _experts(_tape("gpt_oss_120b"))) * 2, rel=1e-9)


# ---- ops of one step -------------------------------------------------------------------------------------

def _frame(key, layout, batch=16, seq=1, kv=1024, dtype="fp8", mode="inference"):
    return graph_frame(build_parallel_graph(key, batch, seq, mode, layout, dtype=dtype, kv_len=kv,
                                            serving=mode == "inference"))


def test_deepseek_decode_step_ops():
    f = _frame("deepseek_v3", Layout(8), batch=32)
    moe = f[f.kind == "moe"].iloc[0]
    assert (moe["m"], moe["n"], moe["k"], moe["count"], moe["dtype"]) == (32, 7168, 2048, 58, "fp8")
    assert "moe_tp=8" in moe["attrs"] and "moe_ep=1" in moe["attrs"] and "ckpt=fp8_block" in moe["attrs"]
    mla = f[f.kind == "mla"].iloc[0]
    assert (mla["op"], mla["b"], mla["m"], mla["n"], mla["h"], mla["count"]) == ("mla_decode", 32, 1, 1025, 16, 61)
    absorb = f[(f.kind == "bmm")].set_index("name")
    assert absorb.loc["attn.q_absorb", ["b", "m", "n", "k"]].tolist() == [16, 32, 128, 512]
    assert absorb.loc["attn.v_absorb", ["b", "m", "n", "k"]].tolist() == [16, 32, 512, 128]
    names = set(f["name"].str.split(", ").explode())
    assert {"mlp.shared_expert.gate_up_proj", "mlp.gate_up_proj", "attn.q_b_proj"} <= names  # shared, dense layers
    assert not (f.kind == "a2a").any()
    groups = set(f.loc[f.kind == "allreduce", "attrs"])
    assert groups == {"group=8"}


def test_attention_data_parallel_with_expert_parallel_dispatches_and_combines():
    f = _frame("deepseek_v3", Layout(1, 8, 8), batch=64)
    a2a = f[f.kind == "a2a"].set_index("op")
    assert set(a2a.index) == {"a2a_dispatch", "a2a_combine"}
    assert (a2a["m"] == 8).all() and (a2a["count"] == 58).all() and a2a["attrs"].str.contains("mode=ll").all()
    assert not (f.kind == "allreduce").any()  # tp 1: no tensor-parallel all-reduce
    assert f.loc[f.kind == "moe", "m"].iloc[0] == 64  # the experts see every token of the instance
    assert f.loc[f.kind == "mla", "b"].iloc[0] == 8  # attention: this GPU's 8 sequences, all 128 heads
    prompt = _frame("deepseek_v3", Layout(1, 8, 8), batch=1, seq=512, kv=0)
    assert prompt.loc[prompt.kind == "a2a", "attrs"].str.contains("mode=normal").all()
    assert set(prompt.loc[prompt.kind == "mla", "op"]) == {"mla_prefill"}


def test_attention_dp_with_tensor_parallel_experts_gathers_every_token():
    f = _frame("gpt_oss_120b", Layout(1, 4, 1), batch=16)
    gather = f[f["name"] == "mlp.experts.gather_scatter"].iloc[0]
    assert gather["kind"] == "allreduce" and gather["h"] == 16 * 2880 and gather["attrs"] == "group=4"


def test_sliding_window_layers_read_at_most_the_window():
    f = _frame("gpt_oss_120b", Layout(1), batch=4, kv=4096)
    attn = f[f.kind == "attn"].sort_values("n")
    assert attn[["n", "count"]].values.tolist() == [[128, 18], [4097, 18]]
    prompt = _frame("gpt_oss_120b", Layout(1), batch=1, seq=2048, kv=0)
    windowed = prompt[(prompt.kind == "attn") & (prompt["attrs"] == "window=128")]
    assert windowed["count"].sum() == 18
    full = prompt[(prompt.kind == "attn") & (prompt["attrs"] == "")]
    assert windowed["flops"].iloc[0] < full["flops"].iloc[0] / 7  # ~2048 x 128 pairs against ~2048^2 / 2


def test_hybrid_linear_attention_layers():
    decode = _frame("qwen35_397b_a17b", Layout(4), batch=8)
    gdn = decode[decode.kind == "gdn"].iloc[0]
    assert (gdn["op"], gdn["count"], gdn["h"], gdn["hkv"], gdn["k"]) == ("gdn_decode", 45, 16, 4, 128)
    assert decode.loc[decode.kind == "attn", "count"].sum() == 15
    assert decode.loc[decode.kind == "moe", "count"].iloc[0] == 60


def test_dsa_caps_decode_attention_at_the_indexers_top_k():
    f = _frame("deepseek_v32", Layout(8), batch=4, kv=8192)
    assert f.loc[f.kind == "mla", "n"].iloc[0] == 2048
    scores = f[f["name"] == "attn.indexer.scores"].iloc[0]
    assert (scores["b"], scores["m"], scores["n"], scores["k"]) == (4, 64, 128, 8193)


@pytest.mark.parametrize(("key", "layout", "dtype"), [
    ("deepseek_r1", Layout(8), "fp4"), ("deepseek_r1", Layout(1, 8, 8), "fp8"), ("gpt_oss_120b", Layout(2), "fp4"),
    ("qwen35_397b_a17b", Layout(4, 1, 2), "fp8"), ("kimi_k25", Layout(4, 4, 16), "fp4"), ("glm5", Layout(8), "fp8"),
    ("minimax_m25", Layout(4), "fp8"), ("qwen3_235b_a22b", Layout(8), "bf16"), ("llama4_maverick", Layout(8), "bf16"),
    ("mixtral_8x22b", Layout(8), "bf16")])
def test_moe_and_mla_shapes_are_measured_in_the_shipped_tables(key, layout, dtype):
    """The fused MoE rows of a served layout hit the moe table's (hidden, inter, topk, experts, moe_tp, moe_ep) and
    its expert format; MLA decode rows its heads per GPU."""
    if not MOE_TABLE.exists():
        pytest.skip("data/aiconfigurator_moe is not in this checkout")
    table = pd.read_parquet(MOE_TABLE, columns=["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                                                "moe_ep_size", "moe_dtype"])
    rows = op_kernel_rows(_frame(key, layout, dtype=dtype))
    moe = rows[rows.OPName == "moe"].iloc[0]
    hit = table[(table.hidden_size == moe.hidden) & (table.inter_size == moe.inter) & (table.topk == moe.topk)
                & (table.num_experts == moe.experts) & (table.moe_tp_size == moe.moe_tp)
                & (table.moe_ep_size == moe.moe_ep)]
    assert len(hit), f"{key} {layout.tag}: no moe row of this shape"
    spelled = {"bfloat16": "bf16", "nvfp4": "fp4"}
    formats = {spelled.get(d, d) for d in table.loc[(table.hidden_size == moe.hidden)
                                                    & (table.num_experts == moe.experts), "moe_dtype"]}
    assert moe["dtype"] in formats
    if get_model(key).mla is not None:
        mla = pd.read_parquet(MLA_TABLE, columns=["num_heads"])
        assert rows.loc[rows.OPName == "mla_decode", "H"].iloc[0] in set(mla["num_heads"])


# ---- KV cache ---------------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(tokens=st.integers(1, 200_000), tp=st.sampled_from([1, 2, 4, 8]))
def test_kv_bytes_follow_the_mla_and_gqa_formulas(tokens, tp):
    ds, qwen = get_model("deepseek_v3"), get_model("qwen3_235b_a22b")
    mla = kv_bytes_per_request(ds, "bf16", Layout(tp), tokens)
    assert mla == 61 * (512 + 64) * 2 * tokens  # one latent per token, the same on every tp rank
    gqa = kv_bytes_per_request(qwen, "fp8", Layout(tp), tokens)
    assert gqa == 2 * 94 * max(1, 4 // tp) * 128 * 2 * tokens
    assert mla < 0.02 * 61 * 128 * (192 + 128) * 2 * tokens  # under 2% of full multi-head keys and values


@settings(max_examples=40, deadline=None)
@given(short=st.integers(1, 100_000), extra=st.integers(0, 100_000))
def test_sliding_layers_are_bounded_by_the_window(short, extra):
    m = get_model("gpt_oss_120b")
    a, b = (kv_bytes_per_request(m, "bf16", Layout(), t) for t in (short, short + extra))
    assert a <= b
    per_layer_token = 2 * 8 * 64 * 2
    assert b - a == pytest.approx(per_layer_token * 18 * extra + per_layer_token * 18 *
                                  (min(short + extra, 128) - min(short, 128)))


@settings(max_examples=30, deadline=None)
@given(tokens=st.integers(1, 100_000), dp=st.sampled_from([1, 2, 4, 8]))
def test_per_token_cache_times_tokens_is_the_instance_share(tokens, dp):
    m = get_model("qwen35_397b_a17b")  # linear-attention states: a fixed part per request
    layout = Layout(1, dp, dp)
    per_token = kv_bytes_per_token(m, "bf16", layout, tokens)
    assert per_token * tokens * dp == pytest.approx(kv_bytes_per_request(m, "bf16", layout, tokens))


# ---- training -------------------------------------------------------------------------------------------

def test_training_runs_the_experts_twice_and_the_all_to_all_both_ways():
    g = build_parallel_graph("qwen3_30b_a3b", 16, 256, "training", Layout(1, 8, 8), dtype="bf16")
    f = graph_frame(g)
    fw, bw = f[f.phase == "fw"], f[f.phase == "bw"]
    assert bw.loc[bw.kind == "moe", "count"].sum() == 2 * fw.loc[fw.kind == "moe", "count"].sum()
    assert set(bw.loc[bw.kind == "a2a", "op"]) == {"a2a_dispatch", "a2a_combine"}
    assert bw.loc[bw.kind == "a2a", "attrs"].str.contains("mode=normal").all()
    names = set(fw["name"].str.split(", ").explode())
    assert {"mlp.router.probs", "mlp.router.aux_loss.mul"} <= names
    grads = f[(f.kind == "allreduce") & (f.phase == "bw")]
    assert not grads["name"].str.contains("mlp.experts").any() and len(grads)  # experts sharded: no all-reduce
    assert g.meta["parallel"] == "dp8" and g.meta["degree"] == 8


def test_moe_training_memory_counts_the_expert_activations():
    key = "qwen3_30b_a3b"
    small = memory_footprint(Workload(get_model(key), 1, 256, "training", dtype="bf16"), dtype="bf16")
    big = memory_footprint(Workload(get_model(key), 4, 256, "training", dtype="bf16"), dtype="bf16")
    assert big.activations_bytes > 3.5 * small.activations_bytes
    assert small.optimizer_bytes == 12 * _tape(key).num_params  # AdamW moments + fp32 master copy


# ---- bad input ------------------------------------------------------------------------------------------

def test_fp32_moe_is_refused_by_name():
    with pytest.raises(WorkloadError, match="mixture-of-experts decoders.*dtype=fp32"):
        build_parallel_graph("mixtral_8x7b", 1, 16, dtype="fp32")


@pytest.mark.parametrize(("parallel", "match"), [("tp1dp6ep6", "ep=6 does not divide the 256 experts"),
                                                 ("pp4_1", "pipeline parallelism"), ("tp3", "tp=3")])
def test_layouts_that_cannot_run_are_refused(parallel, match):
    with pytest.raises(WorkloadError, match=match):
        build_parallel_graph("deepseek_v3", 12, 16, "inference", parallel, dtype="bf16")


def test_a_layout_error_is_a_workload_error():
    assert issubclass(LayoutError, WorkloadError)




@pytest.mark.parametrize("dtype", ["fp8", "fp4"])
def test_the_router_stays_in_half_precision_in_a_quantised_workload(dtype):
    from tilecast.specs.layout import Layout

    frame = graph_frame(build_parallel_graph(get_model("deepseek_r1"), 8, 1, "inference", Layout(8), dtype=dtype,
                                             kv_len=1024, serving=True))
    by_name = frame.groupby("name")["dtype"].first()
    assert by_name["mlp.router"] == "bf16"  # every quantised release excludes the gate
    assert by_name["mlp.shared_expert.gate_up_proj"] == dtype  # the rest of the linears in the workload's dtype
