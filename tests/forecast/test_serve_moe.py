"""Serving mixture-of-experts models with today's harness: layouts, quantised variants, memory per GPU."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tilecast.evaluation.serving import evaluate_serving
from tilecast.forecast.serve import ServeWorkload, forecast_serve, serve_memory, serve_memory_terms
from tilecast.graph.kv_cache import kv_bytes_per_request
from tilecast.specs import WorkloadError, get_gpu, get_model
from tilecast.specs.layout import Layout, LayoutError
from tilecast.specs.model import CheckpointDtypeError


def test_a_variant_serves_in_its_dtype_and_refuses_another():
    assert ServeWorkload("nvidia/DeepSeek-R1-NVFP4", tp=8).dtype == "fp4"
    assert ServeWorkload("deepseek-ai/DeepSeek-R1", tp=8).dtype == "bf16"
    with pytest.raises(CheckpointDtypeError, match="nvidia/DeepSeek-R1-NVFP4.*fp4.*fp8"):
        ServeWorkload("nvidia/DeepSeek-R1-NVFP4", "fp8", tp=8)


@pytest.mark.parametrize(("layout", "match"), [(Layout(1, 6, 6), "ep=6 does not divide the 256 experts"),
                                               (Layout(3), "tp=3 does not divide the 128 attention heads")])
def test_layouts_are_checked_against_the_model(layout, match):
    with pytest.raises(LayoutError, match=match):
        ServeWorkload("deepseek_r1", "fp8", layout=layout)


def test_a_dense_model_serves_tensor_parallel_only():
    assert ServeWorkload("llama31_70b", "fp8", layout=Layout(4)).parallel == "tp4"
    with pytest.raises(WorkloadError, match="tensor parallel only"):
        ServeWorkload("llama31_70b", "fp8", layout=Layout(1, 4))


def test_tp_and_layout_must_agree():
    with pytest.raises(WorkloadError, match="disagrees"):
        ServeWorkload("deepseek_r1", "fp8", tp=4, layout=Layout(8))


def test_forecast_over_an_expert_parallel_layout():
    sw = ServeWorkload("deepseek_r1", "fp8", isl=1024, osl=256, concurrency=64, layout=Layout(1, 8, 8))
    fc = forecast_serve(sw, "b200_sxm")
    assert fc.n_gpus == 8 and fc.layout == "tp1dp8ep8" and fc.tp == 1
    assert fc.tpot_ms > fc.decode_step_ms > 0 and fc.ttft_ms > fc.prefill_ms > 0
    assert fc.tokens_per_s_per_gpu == pytest.approx(64 * 256 / (fc.request_latency_ms / 1e3) / 8)
    assert fc.breakdown_ms.get("moe", 0) > 0 and fc.breakdown_ms.get("comm", 0) > 0
    d = fc.to_dict()
    assert (d["n_gpus"], d["layout"]) == (8, "tp1dp8ep8")
    assert "x8 (tp1dp8ep8)" in fc.describe()


def test_memory_per_gpu_holds_its_experts_and_its_requests_cache():
    gpu = get_gpu("b200_sxm")
    tp8 = serve_memory(ServeWorkload("deepseek_r1", "fp4", isl=1024, osl=1024, concurrency=64, layout=Layout(8)), gpu)
    dp8 = serve_memory(ServeWorkload("deepseek_r1", "fp4", isl=1024, osl=1024, concurrency=64,
                                     layout=Layout(1, 8, 8)), gpu)
    assert dp8.weights_bytes > tp8.weights_bytes  # attention replicated on every data-parallel GPU
    per_request = kv_bytes_per_request(get_model("deepseek_r1"), "fp4", Layout(8), 2048)
    assert tp8.kv_cache_bytes == pytest.approx(64 * per_request)  # the latent on every tp rank
    assert dp8.kv_cache_bytes == pytest.approx(64 / 8 * per_request)  # 8 requests per data-parallel GPU
    top = tp8.max_concurrency(2048)
    assert tp8.weights_bytes + tp8.workspace_bytes + top * per_request <= tp8.capacity_bytes
    assert tp8.weights_bytes + tp8.workspace_bytes + (top + 1) * per_request > tp8.capacity_bytes


def test_a_model_that_does_not_fit_says_what_it_needs():
    fc = forecast_serve(ServeWorkload("deepseek_r1", "bf16", isl=1024, osl=1024, concurrency=8, layout=Layout(2)),
                        "b200_sxm")
    assert not fc.memory.fits and fc.max_concurrency == 0
    assert fc.to_dict()["mem_required_gib"] > fc.to_dict()["mem_capacity_gib"]


def test_serving_rows_read_their_layouts():
    base = {"model_path": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "precision": "fp8", "mode": "agg",
            "isl": 1024, "osl": 128, "batch_size": 16.0, "pp_size": 1.0}
    rows = pd.DataFrame([
        {**base, "tp_size": 8.0, "attention_dp_size": 1.0, "moe_tp_size": 8.0, "moe_ep_size": 1.0},
        {**base, "tp_size": 1.0, "attention_dp_size": 8.0, "moe_tp_size": 1.0, "moe_ep_size": 8.0},
        {**base, "tp_size": 36.0, "attention_dp_size": 1.0, "moe_tp_size": 36.0, "moe_ep_size": 1.0,
         "system": "gb200"},
        {**base, "tp_size": 8.0, "attention_dp_size": 1.0, "moe_tp_size": 2.0, "moe_ep_size": 2.0},
        {**base, "tp_size": 36.0, "attention_dp_size": 1.0, "moe_tp_size": 36.0, "moe_ep_size": 1.0}])
    out = evaluate_serving(rows)
    assert out["error"][0] == out["error"][1] == out["error"][2] == ""  # tp36: wide EP over one NVL72's 36 GPUs
    assert "nodes=5" in out["error"][4]  # 36 GPUs of 8-GPU nodes: not an even split (the gb200 row still answered)
    assert out["pred_tpot_ms"][0] != out["pred_tpot_ms"][1]  # two layouts, two forecasts
    assert "2 x 2 = 4 GPUs" in out["error"][3]


def test_memory_terms_vectorise_over_tp_for_a_grid():
    spec = get_model("qwen3_30b_a3b")
    tp, osl, conc = np.array([1, 2, 1, 4]), np.array([128, 256, 512, 128]), np.array([1, 8, 4, 2])
    grid = serve_memory_terms(spec, "bf16", 1024, tp, osl, conc)
    for i in range(4):
        one = serve_memory_terms(spec, "bf16", 1024, int(tp[i]), osl[i], conc[i])
        assert [float(t[i]) for t in grid] == pytest.approx([float(x) for x in one])
