"""Engine kernel factors: the wrapper's identity for vLLM, named errors, the fit on a small table, properties."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.serving.engine_kernel_fit import default_kernels, kernel_generation, library_class, regime_keys
from tilecast.serving.engine_kernels import (
    FactorTable,
    engine_family_predictor,
    engine_log_factors,
    fit_factors,
    shipped_factors,
)
from tilecast.serving.engines import UnknownEngineError, UnknownEngineVersionError
from tilecast.specs import get_gpu

B200, H100, L40S = get_gpu("b200"), get_gpu("h100_sxm_80gb"), get_gpu("l40s")


def base_predict(family, rows, gpu):
    """A stand-in predictor: a positive time per row from its dims (any FamilyPredictor would do)."""
    return 1e-3 * (1.0 + rows["M"].to_numpy(float)) ** 0.5


def gemm_rows(ms, dtype="bf16", device=None):
    rows = pd.DataFrame({"OPName": "linear", "B": 1, "M": ms, "N": 4096, "K": 4096, "dtype": dtype})
    if device is not None:
        rows["Device"] = device
    return rows


def synthetic_tables():
    """B200 and B300 (one library class): SGLang's fp8 GEMM 2x vLLM's at M <= 16, half of it at M >= 8192;
    bf16 as vLLM."""
    shapes = [(m, n, k) for m in (1, 8, 16, 8192, 16384) for n in (1024, 4096) for k in (1024, 4096)]
    eng, vllm = [], []
    for system, device in (("b200_sxm", "NVIDIA B200"), ("b300_sxm", "NVIDIA B300 SXM6 AC")):
        for dtype in ("bfloat16", "fp8"):
            for m, n, k in shapes:
                v = 1e-6 * m * n * k / 1e3 + 0.005
                factor = 1.0 if dtype == "bfloat16" else (2.0 if m <= 16 else 0.5)
                common = {"system": system, "device": device, "gemm_dtype": dtype, "m": m, "n": n, "k": k}
                vllm.append({**common, "version": "0.24.0", "kernel_source": "vllm", "latency_ms": v})
                eng.append({**common, "framework": "sglang", "version": "0.5.14", "kernel_source": "sgl",
                            "latency_ms": v * factor})
    return {"gemm_engines": pd.DataFrame(eng)}, {"gemm": pd.DataFrame(vllm)}


@pytest.fixture(scope="module")
def synthetic_factors() -> FactorTable:
    engines, vllm = synthetic_tables()
    return fit_factors(engines, vllm)


def test_vllm_is_the_identity():
    assert engine_family_predictor(base_predict, "vllm") is base_predict
    assert engine_family_predictor(base_predict, "VLLM", "0.19.0") is base_predict
    rows = gemm_rows([1, 64, 4096], "fp8", "NVIDIA B200")
    assert np.all(engine_log_factors("vllm", "tc_gemm", rows) == 0.0)


def test_unknown_engine_version_and_scaling_are_named():
    with pytest.raises(UnknownEngineError, match="known: vllm, sglang, trtllm"):
        engine_family_predictor(base_predict, "tensorrt")
    with pytest.raises(UnknownEngineVersionError, match="measured trtllm releases: 1.0.0, 1.3.0rc20"):
        engine_family_predictor(base_predict, "trtllm", "0.8.1")
    with pytest.raises(ValueError, match="unknown fp8 scaling 'row'; known: tensor, block"):
        engine_family_predictor(base_predict, "sglang", fp8_scaling="row")


def test_fit_recovers_the_regime_factors_and_applies_them(synthetic_factors):
    predict = engine_family_predictor(base_predict, "sglang", factors=synthetic_factors)
    rows = gemm_rows([4, 16384], "fp8")
    base = base_predict("tc_gemm", rows, B200)
    assert predict("tc_gemm", rows, B200) == pytest.approx(base * [2.0, 0.5])
    assert predict("tc_gemm", gemm_rows([4, 16384], "bf16"), B200) == pytest.approx(base)
    # GB300 (sm103) is datacenter Blackwell: the same class; Hopper was never measured: factor 1
    assert predict("tc_gemm", rows, get_gpu("gb300")) == pytest.approx(base * [2.0, 0.5])
    assert predict("tc_gemm", rows, H100) == pytest.approx(base)
    # a regime no GPU measured (M = 300) takes the cell's median over its regimes
    mid = predict("tc_gemm", gemm_rows([300], "fp8"), B200) / base_predict("tc_gemm", gemm_rows([300]), B200)
    assert 0.5 <= float(mid[0]) <= 2.0
    # families and ops the engine tables do not measure are left alone
    bmm = gemm_rows([4], "fp8").assign(OPName="bmm")
    assert predict("tc_gemm", bmm, B200) == pytest.approx(base_predict("tc_gemm", bmm, B200))
    vec = pd.DataFrame({"OPName": ["add"], "B": [4], "H": [4096], "dtype": ["bf16"]})
    assert predict("vec_half", vec.assign(M=0), B200) == pytest.approx(base_predict("vec_half", vec.assign(M=0), B200))


def test_rows_name_their_gpu_when_none_is_given(synthetic_factors):
    predict = engine_family_predictor(base_predict, "sglang", factors=synthetic_factors)
    rows = gemm_rows([4, 4], "fp8").assign(Device=["NVIDIA B200", "NVIDIA H100 80GB HBM3"])
    got = predict("tc_gemm", rows, None) / base_predict("tc_gemm", rows, None)
    assert got == pytest.approx([2.0, 1.0])


def test_block_scaled_fp8_is_its_own_variant(synthetic_factors):
    predict = engine_family_predictor(base_predict, "sglang", factors=synthetic_factors, fp8_scaling="block")
    rows = gemm_rows([4], "fp8")
    assert predict("tc_gemm", rows, B200) == pytest.approx(base_predict("tc_gemm", rows, B200))  # not measured


@settings(max_examples=40, deadline=None)
@given(ms=st.lists(st.integers(1, 1 << 16), min_size=1, max_size=8), scale=st.floats(0.01, 100.0),
       engine=st.sampled_from(["sglang", "trtllm"]), dtype=st.sampled_from(["bf16", "fp8", "fp16"]))
def test_engine_forecasts_are_positive_and_monotone_in_the_base(synthetic_factors, ms, scale, engine, dtype):
    """The factor does not depend on the base forecast: positive in, positive out, and a base twice as slow gives
    an engine forecast twice as slow (so the wrapper keeps every ordering the predictor makes on one shape)."""
    rows = gemm_rows(ms, dtype)
    one = engine_family_predictor(base_predict, engine, factors=synthetic_factors)("tc_gemm", rows, B200)
    scaled = engine_family_predictor(lambda f, r, g: scale * base_predict(f, r, g), engine,
                                     factors=synthetic_factors)("tc_gemm", rows, B200)
    assert np.all(one > 0) and np.all(np.isfinite(one))
    assert scaled == pytest.approx(scale * one, rel=1e-9)


def test_regimes_generations_and_library_classes():
    rows = pd.DataFrame({"M": [1, 17, 5000], "N": [64, 4096, 8192], "K": [64, 4096, 8192]})
    assert list(regime_keys("tc_gemm", rows)) == ["0_0", "1_1", "5_2"]
    decode = pd.DataFrame({"B": [8, 64], "M": [1, 1], "N": [100, 10000], "H": [64, 64], "Hkv": [8, 1]})
    assert list(regime_keys("attn_decode", decode)) == ["0_0_1", "3_1_3"]
    assert [kernel_generation(get_gpu(g)) for g in ("a100_sxm4_80gb", "l40s", "h200_sxm", "b300", "rtx_pro_6000_server",
                                                     "mi300x")] == ["sm80", "sm89", "sm90", "sm100", "sm120", None]
    assert library_class("attn_decode", "sm120") == library_class("attn_decode", "sm89")
    assert library_class("tc_gemm", "sm120") != library_class("tc_gemm", "sm89")


def test_default_kernel_is_the_library_measured_on_the_full_grid():
    rows = pd.DataFrame({"engine": "sglang", "system": "b200_sxm", "family": "attn_decode", "variant": "fp8",
                         "kernel_source": ["trtllm_mha"] * 3 + ["triton"], "attn_dtype": ["fp8", "bfloat16",
                                                                                          "bfloat16", "bfloat16"]})
    got = default_kernels(rows)
    assert set(got["kernel_source"]) == {"trtllm_mha"} and set(got["attn_dtype"]) == {"bfloat16"}


def test_shipped_factors_say_what_the_engines_tables_measure():
    """DeepGEMM's block-scaled fp8 is slower than vLLM's per-tensor CUTLASS at a few tokens and faster at many
    (B200); SGLang's FlashInfer decode beats vLLM's FlashAttention-2 on Ada; bf16 GEMMs (cuBLAS everywhere)
    agree within 10%."""
    table = shipped_factors()
    small, large = gemm_rows([8], "fp8"), gemm_rows([16384], "fp8")
    block = dict(fp8_scaling="block", factors=table)
    assert np.exp(engine_log_factors("sglang", "tc_gemm", small, B200, **block))[0] > 1.3
    assert np.exp(engine_log_factors("sglang", "tc_gemm", large, B200, **block))[0] < 1.0
    decode = pd.DataFrame({"OPName": ["attn_decode"], "B": [8], "M": [1], "N": [64], "K": [128], "H": [32],
                           "Hkv": [8], "dtype": ["bf16"], "kv_dtype": ["bf16"]})
    assert np.exp(engine_log_factors("sglang", "attn_decode", decode, L40S, factors=table))[0] < 0.9
    for engine in ("sglang", "trtllm"):
        f = np.exp(engine_log_factors(engine, "tc_gemm", gemm_rows([1, 64, 4096], "bf16"), B200, factors=table))
        assert np.all(np.abs(f - 1.0) < 0.1)
