"""dtype through graphs, memory and forecasts: fused attention in half precision, fp32 unchanged."""

from __future__ import annotations

import pytest

from tilecast.forecast import forecast
from tilecast.graph import build_graph, memory_footprint
from tilecast.graph.parallel import build_parallel_graph
from tilecast.specs import UnsupportedDtypeError, WorkloadError


def _kinds(graph):
    return set(graph.to_frame()["kind"])


def test_fp32_keeps_the_eager_attention_chain():
    frame = build_graph("llama3_8b", 1, 256, "inference").to_frame()
    assert "attn" not in set(frame["kind"]) and "softmax" in set(frame["op"])
    assert set(frame["dtype"]) == {"fp32"}


@pytest.mark.parametrize("model", ["llama3_8b", "gpt2_large", "opt"])
def test_half_precision_runs_fused_attention(model):
    frame = build_graph(model, 2, 256, "inference", dtype="bf16").to_frame()
    att = frame.loc[frame["kind"] == "attn"]
    assert len(att) == 1 and "softmax" not in set(frame["op"])
    assert set(frame["dtype"]) == {"bf16"}
    assert int(att["m"].iloc[0]) == int(att["n"].iloc[0]) == 256 and int(att["b"].iloc[0]) == 2


def test_fp8_runs_linears_in_fp8_and_gqa_is_kept():
    frame = build_graph("llama3_8b", 1, 128, "inference", dtype="fp8").to_frame()
    assert set(frame.loc[frame["kind"] == "linear", "dtype"]) == {"fp8"}
    att = frame.loc[frame["kind"] == "attn"].iloc[0]
    assert (att["h"], att["hkv"], att["dtype"]) == (32, 8, "bf16")


def test_tensor_parallel_splits_attention_heads():
    frame = build_parallel_graph("llama3_8b", 1, 128, "inference", "tp4", dtype="bf16").to_frame()
    att = frame.loc[frame["kind"] == "attn"].iloc[0]
    assert (att["h"], att["hkv"]) == (8, 2)
    assert set(frame.loc[frame["kind"] == "allreduce", "dtype"]) == {"bf16"}


def test_fused_attention_training_has_a_backward():
    frame = build_graph("llama3_8b", 1, 128, "training", dtype="amp_bf16").to_frame()
    bw = frame.loc[(frame["phase"] == "bw") & (frame["kind"] == "bmm")]
    assert len(bw) and not frame.loc[frame["phase"] == "bw", "kind"].eq("attn").any()


def test_half_precision_memory():
    fp32 = memory_footprint("llama3_8b", 1, 1024, "inference")
    bf16 = memory_footprint("llama3_8b", 1, 1024, "inference", dtype="bf16")
    fp8 = memory_footprint("llama3_8b", 1, 1024, "inference", dtype="fp8")
    assert bf16.params_bytes * 2 == fp32.params_bytes
    assert fp8.params_bytes < bf16.params_bytes
    assert bf16.total_bytes <= fp32.total_bytes / 2  # half the bytes, and no S x S scores
    amp = memory_footprint("llama3_8b", 1, 256, "training", dtype="amp_bf16")
    half = memory_footprint("llama3_8b", 1, 256, "training", dtype="bf16")
    assert amp.params_bytes == fp32.params_bytes and amp.grads_bytes == fp32.params_bytes
    n = fp32.params_bytes // 4
    assert amp.optimizer_bytes == 8 * n and half.optimizer_bytes == 12 * n  # half: + fp32 master copy


def test_bad_dtypes_are_named():
    with pytest.raises(WorkloadError, match="unknown dtype 'fp64'.*amp_bf16"):
        build_graph("gpt2_large", 1, 128, dtype="fp64")
    with pytest.raises(WorkloadError, match="amp_bf16 is a training recipe"):
        build_graph("gpt2_large", 1, 128, "inference", dtype="amp_bf16")
    with pytest.raises(UnsupportedDtypeError, match="a100_sxm4_80gb.*fp8"):
        forecast("llama3_8b", "a100_sxm4_80gb", 1, 128, dtype="fp8")
    with pytest.raises(UnsupportedDtypeError, match="tesla_v100_pcie_32gb.*bf16"):
        forecast("llama3_8b", "tesla_v100_pcie_32gb", 1, 128, dtype="bf16")


def test_bf16_on_tensor_cores_is_an_order_of_magnitude_faster_than_fp32():
    fp32 = forecast("llama3_8b", "h100_sxm_80gb", 1, 1024)
    bf16 = forecast("llama3_8b", "h100_sxm_80gb", 1, 1024, dtype="bf16")
    assert bf16.e2e_ms < fp32.e2e_ms / 5
    assert bf16.by_group_ms["tc_gemm"] > 0 and bf16.by_group_ms["attn_prefill"] > 0
    assert bf16.by_group_ms["linear"] == 0 and bf16.to_dict()["dtype"] == "bf16"
