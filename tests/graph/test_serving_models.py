"""Serving models (Llama-3.1-8B / 70B, Qwen3-32B): parameter counts, fused bf16 graphs, Qwen3's per-head q/k norm."""

from __future__ import annotations

import pytest

from tilecast.graph import build_graph, memory_footprint
from tilecast.specs import ModelSpec, Workload, WorkloadError, get_model

#: key -> parameters as published (model cards / Hugging Face safetensors metadata)
PUBLISHED_PARAMS = {"llama31_8b": 8.03e9, "llama31_70b": 70.6e9, "qwen3_32b": 32.8e9}
SERVING = sorted(PUBLISHED_PARAMS)


def _params_from_config(m: ModelSpec) -> int:
    """Parameters of a llama-family config, counted independently of the graph builder."""
    H, q, kv, F = m.hidden_size, m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim, m.intermediate_size
    per_layer = H * q + 2 * H * kv + q * H + 3 * H * F + 2 * H + (2 * m.head_dim if m.qk_norm else 0)
    tables = m.vocab_size * H * (1 if m.tie_word_embeddings else 2)
    return m.num_layers * per_layer + tables + H


def _linear_params(m: ModelSpec) -> int:
    H, q, kv, F = m.hidden_size, m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim, m.intermediate_size
    return m.num_layers * (2 * H * q + 2 * H * kv + 3 * H * F) + H * m.vocab_size


@pytest.mark.parametrize("key", SERVING)
def test_parameter_count_matches_the_published_one(key):
    n = memory_footprint(key, 1, 128, "inference", dtype="bf16").params_bytes / 2
    assert n == _params_from_config(get_model(key))
    assert abs(n / PUBLISHED_PARAMS[key] - 1) < 0.02


def test_parameter_counts_exact():
    counts = {k: memory_footprint(k, 1, 64, dtype="bf16").params_bytes // 2 for k in SERVING}
    assert counts == {"llama31_8b": 8_030_261_248, "llama31_70b": 70_553_706_496, "qwen3_32b": 32_762_123_264}


@pytest.mark.parametrize("key", SERVING)
def test_bf16_graph_runs_fused_attention(key):
    m, batch, seq = get_model(key), 2, 128
    g = build_graph(key, batch, seq, dtype="bf16")
    frame = g.to_frame()
    att = frame.loc[frame["kind"] == "attn"]
    assert len(att) == 1 and "softmax" not in set(frame["op"]) and set(frame["dtype"]) == {"bf16"}
    row = att.iloc[0]
    assert (row["b"], row["m"], row["n"], row["k"], row["h"], row["hkv"], row["count"]) == (
        batch, seq, seq, m.head_dim, m.num_heads, m.num_kv_heads, m.num_layers)
    assert g.total_flops("fw", "linear") == 2 * batch * seq * _linear_params(m)
    assert g.total_flops() > g.total_flops("fw", "linear")


def test_qwen3_graph_builds_as_documented():
    assert build_graph("qwen3_32b", 1, 128, dtype="bf16").total_flops() > 0


def test_qwen3_projections_span_heads_times_head_dim():
    m = get_model("qwen3_32b")
    g = build_graph("qwen3_32b", 1, 64, dtype="bf16")
    by_name = {o.name: (o.m, o.n, o.k, o.count) for o in g.select(kind="linear", section="layer").ops}
    assert by_name["attn.q_proj"] == (64, 5120, 8192, m.num_layers)
    assert by_name["attn.k_proj, attn.v_proj"] == (64, 5120, 1024, 2 * m.num_layers)
    assert by_name["attn.o_proj"] == (64, 8192, 5120, m.num_layers)


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_qk_norm_is_a_per_head_rms_norm(dtype):
    tokens, m = 2 * 64, get_model("qwen3_32b")
    ops = build_graph("qwen3_32b", 2, 64, dtype=dtype).select(section="layer").ops
    norms = {(o.name.split(".")[1], o.op): (o.b, o.h, o.count) for o in ops
             if o.name.startswith(("attn.q_norm.", "attn.k_norm."))}
    assert norms[("q_norm", "powu")] == (tokens * m.num_heads, m.head_dim, m.num_layers)
    assert norms[("k_norm", "powu")] == (tokens * m.num_kv_heads, m.head_dim, m.num_layers)
    assert norms[("q_norm", "addu")] == (tokens * m.num_heads, 1, m.num_layers)
    for key in ("llama31_8b", "llama31_70b"):
        assert not any("q_norm" in o.name or "k_norm" in o.name for o in build_graph(key, 1, 32, dtype=dtype).ops)


def test_qk_norm_adds_two_head_dim_weights_per_layer():
    import dataclasses

    q = get_model("qwen3_32b")
    plain = dataclasses.replace(q, qk_norm=False)
    with_norm = memory_footprint(q, 1, 32, dtype="bf16").params_bytes // 2
    without = memory_footprint(plain, 1, 32, dtype="bf16").params_bytes // 2
    assert with_norm - without == 2 * q.head_dim * q.num_layers


def test_qwen3_trains_and_scales_its_layers():
    g = build_graph("qwen3_32b", 1, 32, "training", dtype="bf16")
    assert {o.phase for o in g.ops} == {"fw", "bw", "acc"}
    for dtype in ("bf16", "fp32"):
        fast = build_graph("qwen3_32b", 1, 32, dtype=dtype)
        full = build_graph("qwen3_32b", 1, 32, dtype=dtype, scale_layers=False)
        assert fast.ops == full.ops


def test_context_length_is_the_configs():
    assert Workload("qwen3_32b", 1, 40960).seq_len == 40960
    with pytest.raises(WorkloadError, match="40960"):
        Workload("qwen3_32b", 1, 40961)
    assert Workload("meta-llama/Llama-3.1-70B", 1, 131072).model.key == "llama31_70b"
