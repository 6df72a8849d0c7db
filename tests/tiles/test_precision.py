"""Precision in the kernel maths: dtype names, bytes, fused-attention work, the dtype-aware roofline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecast.specs import UnsupportedDtypeError, get_gpu
from tilecast.tiles.attention import attention_bytes, attention_flops, attention_pairs
from tilecast.tiles.dtypes import DtypeError, normalise_dtype, op_dtype, row_dtypes
from tilecast.tiles.ops import family_of, row_families
from tilecast.tiles.roofline import kernel_flops_bytes, roofline_ms
from tilecast.tiles.sources import from_aiconfigurator_attention, from_aiconfigurator_gemm, source_schema


def test_dtype_names_as_the_data_spells_them():
    assert [normalise_dtype(x) for x in ("bfloat16", "half", "float32", "fp8", "BF16")] == \
        ["bf16", "fp16", "fp32", "fp8", "bf16"]
    with pytest.raises(DtypeError, match="fp64.*known: bf16"):
        normalise_dtype("fp64")
    assert list(row_dtypes(pd.DataFrame({"x": [1, 2]}))) == ["fp32", "fp32"]


def test_fp8_workloads_run_linears_in_fp8_and_the_rest_in_bf16():
    assert op_dtype("fp8", "linear") == "fp8"
    assert op_dtype("fp8", "bmm") == op_dtype("fp8", "attn") == op_dtype("fp8", "vec") == "bf16"
    assert op_dtype("amp_bf16", "linear") == "bf16"
    assert op_dtype("fp32", "linear") == "fp32"


def test_families_follow_the_dtype():
    assert family_of("linear") == "linear" and family_of("linear", "bf16") == "tc_gemm"
    assert family_of("bmm", "fp8") == "tc_gemm" and family_of("attn_decode", "bf16") == "attn_decode"
    rows = pd.DataFrame({"OPName": ["linear", "linear", "softmax", "attn_prefill", "nope"],
                         "dtype": ["fp32", "bf16", "bf16", "bf16", "bf16"]})
    assert list(row_families(rows)) == ["linear", "tc_gemm", "vec_half", "attn_prefill", None]
    assert family_of("rmsnorm", "bf16") == family_of("rope", "fp16") == "vec_half" and family_of("ln") == "layernorm"


@given(st.integers(1, 4096), st.integers(1, 8))
def test_causal_pairs(n, b):
    assert attention_pairs(n, n) == pytest.approx(n * (n + 1) / 2)  # a prompt: the lower triangle
    assert attention_pairs(1, n) == n  # one decode token sees the whole cache
    assert attention_flops(b, n, n, 128, 32) == pytest.approx(4 * b * 32 * 128 * n * (n + 1) / 2)


@given(st.integers(1, 64), st.integers(1, 8192), st.sampled_from([1, 2, 4, 8, 32]))
def test_gqa_shrinks_the_kv_bytes(b, n, hkv):
    full = attention_bytes(b, 1, n, 128, 32, 32, 2, 2)
    grouped = attention_bytes(b, 1, n, 128, 32, hkv, 2, 2)
    assert grouped <= full
    assert attention_bytes(b, 1, n, 128, 32, hkv, 2, 1) < grouped  # an fp8 cache reads half


def test_bf16_gemm_roofline_uses_the_tensor_peak_and_half_the_bytes():
    a100 = get_gpu("a100_sxm4_80gb")
    rows = pd.DataFrame({"OPName": ["linear"] * 2, "B": [1, 1], "M": [8192, 1], "N": [8192, 8192],
                         "K": [8192, 8192], "dtype": ["bf16", "bf16"]})
    ms = roofline_ms(rows, a100)
    assert ms[0] == pytest.approx(1e3 * 2 * 8192**3 / (a100.bf16_tflops * 1e12))  # compute-bound
    weights = 2 * 8192 * 8192  # decode: reading the weights dominates
    assert ms[1] == pytest.approx(1e3 * (weights + 2 * 2 * 8192) / (a100.mem_bw_gbs * 1e9))
    fp32 = roofline_ms(rows.assign(dtype="fp32"), a100)
    assert fp32[0] > 10 * ms[0]  # CUDA cores: 19.5 vs 312 TFLOP/s


def test_fp8_gemm_counts_the_activation_quantisation():
    rows = pd.DataFrame({"OPName": ["linear"], "B": [1], "M": [64], "N": [4096], "K": [4096], "dtype": ["fp8"]})
    _, nbytes = kernel_flops_bytes(rows)
    assert nbytes[0] == 64 * 4096 + 4096 * 4096 + 2 * 64 * 4096 + 3 * 64 * 4096


def test_fp4_linears_run_in_nvfp4_at_the_fp4_peak_with_block_scales():
    assert normalise_dtype("nvfp4") == normalise_dtype("float4_e2m1fn") == "fp4"
    assert op_dtype("fp4", "linear") == "fp4" and op_dtype("fp4", "attn") == op_dtype("fp4", "vec") == "bf16"
    assert family_of("linear", "fp4") == "tc_gemm"
    b200 = get_gpu("b200")
    m, n, k = 64, 4096, 4096
    rows = pd.DataFrame({"OPName": ["linear"] * 2, "B": [1, 1], "M": [m, 16384], "N": [n, n], "K": [k, k],
                         "dtype": ["fp4", "fp8"]})
    _, nbytes = kernel_flops_bytes(rows.iloc[:1])
    fp4 = 0.5 + 1 / 16  # e2m1 + one fp8 scale per 16 elements
    assert nbytes[0] == pytest.approx(fp4 * (m * n + n * k) + 2 * m * k + (2 + fp4) * m * n)
    ms = roofline_ms(rows.assign(M=16384), b200)  # compute-bound: the fp4 peak is twice fp8's
    assert ms[0] == pytest.approx(ms[1] / 2, rel=1e-9)
    with pytest.raises(UnsupportedDtypeError, match="h100_sxm_80gb.*fp4"):
        roofline_ms(rows.iloc[:1], get_gpu("h100_sxm_80gb"))


def test_a_dtype_the_gpu_lacks_is_a_named_error():
    rows = pd.DataFrame({"OPName": ["linear"], "B": [1], "M": [64], "N": [64], "K": [64], "dtype": ["fp8"]})
    with pytest.raises(UnsupportedDtypeError, match="a100_sxm4_80gb.*fp8"):
        roofline_ms(rows, get_gpu("a100_sxm4_80gb"))


def test_aiconfigurator_rows_map_to_the_kernel_schema():
    gemm = pd.DataFrame({"device": ["NVIDIA B200"], "gemm_dtype": ["bfloat16"], "m": [16], "n": [4096],
                         "k": [1024], "latency_ms": [0.01]})
    assert source_schema(gemm) == "aiconfigurator_gemm"
    row = from_aiconfigurator_gemm(gemm).iloc[0]
    assert (row["M"], row["N"], row["K"], row["dtype"], row["Latency"]) == (16, 1024, 4096, "bfloat16", 0.01)
    att = pd.DataFrame({"device": ["NVIDIA B200"] * 2, "op_name": ["context_attention", "generation_attention"],
                        "batch_size": [2, 8], "isl": [1024, 1], "step": [0, 4096], "num_heads": [32, 32],
                        "num_key_value_heads": [8, 8], "head_dim": [128, 128], "attn_dtype": ["bfloat16"] * 2,
                        "kv_cache_dtype": ["bfloat16", "fp8"], "latency_ms": [0.5, 0.05]})
    rows = from_aiconfigurator_attention(att)
    assert list(rows["OPName"]) == ["attn_prefill", "attn_decode"]
    assert list(rows["M"]) == [1024, 1] and list(rows["N"]) == [1024, 4096]
    flops, nbytes = kernel_flops_bytes(rows)
    assert flops[1] == pytest.approx(4 * 8 * 32 * 128 * 4096)
    assert nbytes[1] == pytest.approx(2 * 8 * 128 * (32 * 2 + 4096 * 8 * 1))
    assert np.all(roofline_ms(rows) > 0)


def test_kernel_forecasts_name_every_bad_dtype_row_and_answer_the_rest():
    """An unknown dtype in one row must not hide another row's unsupported dtype (it used to, and then the
    unsupported row crashed the roofline)."""
    from tilecast.forecast.kernels import forecast_kernels

    rows = pd.DataFrame({"OPName": ["linear"] * 3, "B": [1] * 3, "M": [64] * 3, "N": [64] * 3, "K": [64] * 3,
                         "dtype": ["fp64", "fp8", "bf16"], "Device": ["NVIDIA A100-SXM4-80GB"] * 3})
    out = forecast_kernels(rows, lambda fam, r, g: roofline_ms(r, g)).table
    assert "unknown dtype 'fp64'" in out["error"][0] and "fp8" in out["error"][1] and out["error"][2] == ""
    assert out["pred_ms"].isna().tolist() == [True, True, False]
