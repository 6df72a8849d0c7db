"""Serving forecasts: the serve workload, engine kernels, KV-cache memory, the engine steady state, measured rows."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.evaluation.serving import evaluate_serving
from tilecast.forecast.serve import ServeWorkload, forecast_serve, serve_memory
from tilecast.graph.parallel import build_parallel_graph
from tilecast.paths import ROOT
from tilecast.specs import UnsupportedDtypeError, WorkloadError, get_gpu, get_model


def test_engine_kernels_per_layer():
    frame = build_parallel_graph("llama31_8b", 8, 1, "inference", dtype="bf16", kv_len=1000, serving=True).to_frame()
    layer = frame.loc[frame["section"] == "layer"]
    assert sorted(layer.loc[layer["kind"] == "linear", "name"]) == \
        ["attn.o_proj", "attn.qkv_proj", "mlp.down_proj", "mlp.gate_up_proj"]
    att = layer.loc[layer["kind"] == "attn"].iloc[0]
    assert (att["op"], att["b"], att["m"], att["n"], att["h"], att["hkv"]) == ("attn_decode", 8, 1, 1001, 32, 8)
    assert set(layer.loc[layer["kind"] == "vec", "op"]) == {"rmsnorm", "rope", "mul"}
    head = frame.loc[frame["name"] == "lm_head"].iloc[0]
    assert head["m"] == 8  # last-token logits only


def test_kv_cache_is_gqa_aware_and_split_by_tp():
    spec = get_model("llama31_70b")
    b200 = get_gpu("b200")
    one = serve_memory(ServeWorkload(spec, "bf16", 1, 1024, 1024, 8), b200)
    assert one.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2  # layers x KV heads x head dim x bf16, K and V
    assert one.kv_cache_bytes == one.kv_bytes_per_token * 8 * 2048
    four = serve_memory(ServeWorkload(spec, "bf16", 4, 1024, 1024, 8), b200)
    assert four.kv_bytes_per_token * 4 == one.kv_bytes_per_token
    assert four.weights_bytes * 4 == pytest.approx(one.weights_bytes)
    fp8 = serve_memory(ServeWorkload(spec, "fp8", 1, 1024, 1024, 8), b200)
    assert fp8.weights_bytes < 0.6 * one.weights_bytes


def test_a_workload_that_does_not_fit_says_so():
    fc = forecast_serve(ServeWorkload("llama31_70b", "bf16", 1, 1024, 1024, 8), "l40s")
    assert not fc.memory.fits and fc.to_dict()["fits"] is False
    assert fc.to_dict()["mem_required_gib"] > fc.to_dict()["mem_capacity_gib"]
    assert fc.max_concurrency == 0 and "DOES NOT FIT" in fc.describe()


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([1, 4, 32, 128]), st.sampled_from([128, 1024]))
def test_the_steady_state_identities(concurrency, osl):
    fc = forecast_serve(ServeWorkload("llama31_8b", "bf16", 1, 512, osl, concurrency), "b200")
    assert fc.tpot_ms >= fc.decode_step_ms > 0 and fc.ttft_ms >= fc.prefill_ms > 0
    # every other request's prefill step lands among a request's decode steps once
    mixed = min(osl - 1, concurrency - 1)
    assert fc.tpot_ms == pytest.approx((mixed * fc.prefill_ms + (osl - 1 - mixed) * fc.decode_step_ms) / (osl - 1))
    assert fc.tokens_per_s_per_user == pytest.approx(1e3 / fc.tpot_ms)
    assert fc.tokens_per_s_per_gpu == pytest.approx(concurrency * osl / fc.request_latency_ms * 1e3)


def test_more_concurrency_more_throughput_per_gpu_less_per_user():
    fcs = [forecast_serve(ServeWorkload("llama31_8b", "fp8", 1, 1024, 1024, c), "b200") for c in (1, 8, 64)]
    assert [f.tokens_per_s_per_gpu for f in fcs] == sorted(f.tokens_per_s_per_gpu for f in fcs)
    assert [f.tokens_per_s_per_user for f in fcs] == sorted((f.tokens_per_s_per_user for f in fcs), reverse=True)


@pytest.mark.parametrize(("kw", "match"), [
    ({"isl": 100000, "osl": 40000}, "exceeds llama31_8b's 131072 positions"),
    ({"tp": 3}, "tp=3 does not divide"),
    ({"concurrency": 0}, "concurrency must be a positive integer"),
    ({"pp": 2}, "pipeline-parallel serving is not modelled"),
    ({"dtype": "fp32"}, "serve dtype must be one of"),
])
def test_bad_serve_workloads_are_named(kw, match):
    args = {"model": "llama31_8b", "dtype": "bf16", "tp": 1, "isl": 1024, "osl": 1024, "concurrency": 4, **kw}
    with pytest.raises(WorkloadError, match=match):
        ServeWorkload(**args)


def test_fp8_on_a_gpu_without_fp8_is_refused():
    with pytest.raises(UnsupportedDtypeError, match="a100_sxm4_80gb.*fp8"):
        forecast_serve(ServeWorkload("llama31_8b", "fp8", 1, 1024, 1024, 4), "a100_sxm4_80gb")


def test_fp4_on_a_gpu_without_fp4_is_refused_naming_both():
    with pytest.raises(UnsupportedDtypeError, match="h100_sxm_80gb.*fp4"):
        forecast_serve(ServeWorkload("llama31_8b", "fp4", 1, 1024, 1024, 4), "h100_sxm_80gb")


def test_measured_rows_are_answered_or_say_why():
    rows = pd.DataFrame({
        "model_path": ["meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B", "deepseek-ai/DeepSeek-R1",
                       "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B"],
        "system": ["b200_sxm", "b200_sxm", "b200_sxm", "nope_sxm", "b200_sxm", "b200_sxm"],
        "precision": ["fp8", "fp8", "fp8", "fp8", "fp4", "fp8"], "mode": ["agg"] * 5 + ["disagg"],
        "isl": [1024] * 6, "osl": [1024] * 6, "batch_size": [8.0] * 6, "tp_size": [4.0] * 6,
        "pp_size": [1.0] * 6, "silicon_ttft_ms": [100.0] * 6, "silicon_tpot_ms": [8.0] * 6})
    rows = pd.concat([rows, rows.iloc[[0, 0, 0, 0, 0]].assign(
        precision=[None, "fp8", "fp8", "fp8", "fp8"], batch_size=[8.0, 0.0, 8.0, 8.0, 8.0],
        backend=[None, None, "tgi", "trtllm", "sglang"], backend_version=[None, None, None, "9.9", "0.5.10"],
        tp_size=[4.0, 4.0, 4.0, 4.0, 3.0])], ignore_index=True)
    out = evaluate_serving(rows)
    assert list(out.columns[: len(rows.columns)]) == list(rows.columns)
    errors = out["error"].tolist()
    assert errors[0] == errors[1] == "" and out["pred_tpot_ms"][0] == out["pred_tpot_ms"][1] > 0
    assert errors[2] == "" and out["pred_tpot_ms"][2] > 0  # a mixture-of-experts model, tp4 (moe_tp 4)
    assert "unknown GPU 'nope_sxm'" in errors[3]
    assert errors[4] == "" and 0 < out["pred_tpot_ms"][4] < out["pred_tpot_ms"][0]  # NVFP4 weights: fewer bytes
    assert "prefill_num_workers is not given" in errors[5]  # disaggregated: tilecast.serving.disagg, no pools given
    assert out["pred_ttft_ms"][3:4].isna().all() and out["pred_ttft_ms"][5:6].isna().all()
    assert out["ape_tpot_pct"][0] >= 0
    # a row without precision runs at the checkpoint's dtype, said in a note; the bad rows name what is wrong
    assert errors[6] == "" and "checkpoint's dtype bf16" in out["note"][6] and out["pred_tpot_ms"][6] > 0
    assert "concurrency" in errors[7] and "unknown serving engine 'tgi'" in errors[8]
    assert "trtllm 9.9 is outside the measured releases" in errors[9] and "tp=3 does not divide" in errors[10]
    assert out["engine"][0] == "vllm" and out["pred_ttft_ms"][7:].isna().all()


def test_predict_job_serve_mode_prints_and_writes_json(tmp_path):
    out = tmp_path / "serve.json"
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "mode=serve", "model=Qwen/Qwen3-32B",
                           "gpu=b200_sxm", "dtype=fp8", "tp=2", "isl=1024", "osl=512", "concurrency=16",
                           "forecaster=roofline", f"output={out}"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "TTFT" in proc.stdout and "per 1M output tokens" in proc.stdout
    record = json.loads(out.read_text())
    assert record["model"] == "qwen3_32b" and record["tp"] == 2 and record["fits"] is True
    assert record["usd_per_1m_output_tokens"] > 0 and record["tpot_ms"] > 0
    bad = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "mode=serve", "model=llama31_8b",
                          "gpu=b200", "isl=1024", "osl=1024", "concurrency=2.5", "forecaster=roofline"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and "concurrency=2.5: expected an integer" in bad.stderr


def test_predict_tells_memory_fit_and_cost(tmp_path):
    """A plain forecast answers whether it fits next to the latency (issue 16, item 5); a workload that does not
    fit has no throughput and no cost (issue 27, item 11: it cannot run)."""
    out = tmp_path / "p.json"
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "model=llama3_8b", "gpu=h100_sxm_80gb",
                           "batch=8", "seq_len=512", "mode=training", "parallel=dp8", "forecaster=roofline",
                           f"output={out}", f"hydra.run.dir={tmp_path / 'h'}"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "DOES NOT FIT" in proc.stdout and "USD per 1M tokens" not in proc.stdout
    record = json.loads(out.read_text())
    assert record["fits"] is False and record["mem_required_gib"] > record["mem_capacity_gib"]
    assert record["n_gpus"] == 8 and record["usd_per_gpu_hour"] > 0
    assert record["cost_per_1m_tokens_usd"] is None and record["cost_per_step_usd"] is None


def test_predict_refuses_a_fractional_batch_instead_of_truncating_it():
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "model=gpt2_large", "gpu=l4",
                           "batch=2.7", "seq_len=128", "forecaster=roofline"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and "batch must be an integer, got 2.7" in proc.stderr


def test_a_what_if_model_gets_its_own_memory():
    """The prefill footprint is cached per spec, never per catalog key: a 16-layer Llama-3.1-8B needs less."""
    from tilecast.specs import get_model
    from tilecast.specs.whatif import model_with_config

    spec = get_model("llama31_8b")
    half = model_with_config(spec, {"num_hidden_layers": 16})
    b200 = get_gpu("b200")
    full_mem = serve_memory(ServeWorkload(spec, "bf16", 1, 1024, 1024, 8), b200)
    half_mem = serve_memory(ServeWorkload(half, "bf16", 1, 1024, 1024, 8), b200)
    assert half_mem.weights_bytes < 0.6 * full_mem.weights_bytes
    assert half_mem.kv_bytes_per_token == pytest.approx(full_mem.kv_bytes_per_token / 2)
