"""Feature vectors: finite on real rows, device-agnostic (per-SM ratios, no raw spec values)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from tilecast.data import load_kernels
from tilecast.specs import get_gpu
from tilecast.tiles.features import FEATURE_BUILDERS, OP_CODES, default_features
from tilecast.tiles.gemm import gemm_waves, profiled_tiles
from tilecast.tiles.roofline import kernel_flops_bytes, roofline_ms, roofline_regime, spec_frame

TABLES = {"bmm": "bmm", "linear": "linear", "elementwise": "elem", "softmax": "softmax", "layernorm": "ln"}


def _features(family, rows, gpu):
    tiles = profiled_tiles(rows) if family in ("bmm", "linear") else None
    flops, nbytes = kernel_flops_bytes(rows)
    return FEATURE_BUILDERS[family](rows, spec_frame(rows, gpu), tiles, roofline_ms(rows, gpu), flops, nbytes)


@pytest.mark.parametrize("family", list(TABLES))
def test_features_are_finite_on_test_rows(family):
    rows = load_kernels("test", TABLES[family]).head(300)
    rows = rows[rows["Kernel Name"].str.contains(r"\d+x\d+") | (family not in ("bmm", "linear"))]
    x = _features(family, rows, get_gpu("l4"))
    assert set(default_features(family)) <= set(x.columns)
    assert np.isfinite(x[default_features(family)].to_numpy()).all()


@pytest.mark.parametrize("family", ["bmm", "softmax"])
def test_default_features_see_per_sm_resources_only(family):
    """A GPU with twice the SMs, FLOPs, bandwidth and L2 but twice the work per kernel in B looks the same."""
    rows = load_kernels("test", TABLES[family]).head(50)
    gpu = get_gpu("a100_pcie_80gb")
    twice = dataclasses.replace(gpu, num_sm=2 * gpu.num_sm, fp32_gflops=2 * gpu.fp32_gflops,
                                mem_bw_gbs=2 * gpu.mem_bw_gbs, l2_mb=2 * gpu.l2_mb, mem_gb=7.0)
    doubled = rows.assign(B=2 * rows["B"])
    a = _features(family, rows, gpu)[default_features(family)]
    b = _features(family, doubled, twice)[default_features(family)]
    same = [c for c in a.columns if not c.startswith("log_b") and c not in ("log_numel",)]
    np.testing.assert_allclose(a[same].to_numpy(), b[same].to_numpy(), rtol=1e-9, atol=1e-9)


def test_op_is_a_feature_of_elementwise():
    rows = pd.DataFrame({"OPName": ["add", "mul", "gelu"], "B": [64] * 3, "H": [1024] * 3})
    x = _features("elementwise", rows, get_gpu("tesla_t4"))
    assert x["op_code"].nunique() == 3 and x["op_code"].tolist() == [OP_CODES[o] for o in ("add", "mul", "gelu")]


def test_amd_gemm_features_see_the_matrix_core_rate_and_nvidia_the_cuda_core_rate():
    """GEMM compute features read the rows' GEMM peak (the roofline's): the fp32 matrix rate on AMD, so a spec
    without it (vector rate only) reads twice the tile compute time; NVIDIA rows read ``fp32_gflops``."""
    from tilecast.data import load_amd_kernels

    rows = load_amd_kernels("bmm").head(50)
    mi100 = get_gpu("mi100")
    vector_only = dataclasses.replace(mi100, fp32_matrix_gflops=None)
    matrix, vector = _features("bmm", rows, mi100), _features("bmm", rows, vector_only)
    ratio = np.log2(mi100.fp32_matrix_gflops / mi100.fp32_gflops)
    np.testing.assert_allclose(vector["log_tile_compute_us"] - matrix["log_tile_compute_us"], ratio, rtol=1e-12)
    np.testing.assert_allclose(matrix["log_intensity_over_ridge"] - vector["log_intensity_over_ridge"], -ratio,
                               rtol=1e-12)
    nv = load_kernels("test", "bmm").head(50)
    l4 = get_gpu("l4")
    x = _features("bmm", nv, l4)
    w = gemm_waves(nv, profiled_tiles(nv), np.full(len(nv), float(l4.num_sm)))
    np.testing.assert_allclose(x["log_tile_compute_us"], np.log2(w["tile_flops"] / (l4.fp32_gflops * 1e9 / l4.num_sm)
                                                                 * 1e6), rtol=1e-12)


def test_attention_candidate_features_see_head_dim_padding_and_split_kv():
    """Issue 26 item 2: a 192 head dim runs a 256 kernel; a short decode batch over a long cache splits the cache
    over the idle SMs (at most one split per 256 keys), a batch that fills the SMs does not."""
    rows = pd.DataFrame({"OPName": "attn_decode", "B": [1, 1, 512, 1], "M": 1, "N": [65536, 65536, 65536, 300],
                         "K": [128, 192, 128, 128], "H": 32, "Hkv": 8, "dtype": "bfloat16", "kv_dtype": "bfloat16",
                         "Device": get_gpu("b200").device_name})
    x = _features("attn_decode", rows, get_gpu("b200"))
    assert list(x["log_k_padding"]) == pytest.approx([0.0, np.log2(256 / 192), 0.0, 0.0])
    sms = get_gpu("b200").num_sm
    assert list(x["log_kv_splits"]) == pytest.approx([np.log2(np.ceil(sms / 8)), np.log2(np.ceil(sms / 8)), 0.0,
                                                      np.log2(2)])
    assert ((x["split_wave_fill"] > 0) & (x["split_wave_fill"] <= 1)).all()


def test_roofline_regime_tells_compute_from_memory_bound():
    rows = pd.DataFrame({"OPName": ["linear", "linear", "add"], "B": [1, 1, 4096], "M": [8192, 1, 0],
                         "N": [8192, 8192, 0], "K": [8192, 8192, 0], "H": [0, 0, 4096]})
    got = roofline_regime(rows, get_gpu("a100_pcie_40gb"))
    assert got[0] > 1 and got[1] < -1 and got[2] < -1  # a square GEMM; a matrix-vector product; an add
