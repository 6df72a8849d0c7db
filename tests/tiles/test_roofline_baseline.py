"""Roofline baseline: hand computations, and the reference's per-device MAPE (docs/method.md §4)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecast.metrics import ape_pct
from tilecast.specs import get_gpu
from tilecast.tiles.roofline import kernel_flops_bytes, roofline_ms


def test_hand_computed_rows():
    l4 = get_gpu("l4")  # 31334 GFLOP/s, 300 GB/s
    rows = pd.DataFrame({"OPName": ["bmm", "linear", "add", "softmax"],
                         "B": [192, 1, 32768, 4096], "M": [96, 1024, 0, 0], "N": [196, 2560, 0, 0],
                         "K": [196, 2560, 0, 0], "H": [0, 0, 1600, 2048]})
    flops, nbytes = kernel_flops_bytes(rows)
    assert flops[0] == 2 * 192 * 96 * 196 * 196
    assert nbytes[1] == 4 * (1024 * 2560 + 2560 * 2560 + 1024 * 2560)
    assert (flops[2], nbytes[2]) == (32768 * 1600, 12 * 32768 * 1600)
    assert (flops[3], nbytes[3]) == (5 * 4096 * 2048, 8 * 4096 * 2048)
    ms = roofline_ms(rows, l4)
    bmm = max(flops[0] / 31334e9, nbytes[0] / (300 * 2**30))
    linear = max(flops[1] / 31334e9, nbytes[1] / (300 * 2**30))
    add = max(flops[2] / 31334e9, nbytes[2] / 300e9)
    np.testing.assert_allclose(ms[:3], 1e3 * np.array([bmm, linear, add]))


def test_device_column_resolves_each_row_and_unknown_device_is_named():
    rows = pd.DataFrame({"OPName": ["add", "add"], "B": [1, 1], "H": [1 << 20] * 2,
                         "Device": ["NVIDIA L4", "Tesla T4"]})
    ms = roofline_ms(rows)
    assert ms[0] == pytest.approx(1e3 * 12 * (1 << 20) / 300e9)
    assert ms[1] == pytest.approx(1e3 * 12 * (1 << 20) / 320e9)
    with pytest.raises(KeyError, match="closest known"):
        roofline_ms(rows.assign(Device="NVIDIA Z9"))


@given(b=st.integers(1, 64), m=st.integers(1, 4096), n=st.integers(1, 4096), k=st.integers(1, 4096),
       scale=st.integers(2, 8))
def test_roofline_is_monotone_and_linear_in_batch(b, m, n, k, scale):
    gpu = get_gpu("a100_pcie_80gb")
    rows = pd.DataFrame({"OPName": ["bmm", "bmm"], "B": [b, b * scale], "M": [m, m], "N": [n, n], "K": [k, k]})
    ms = roofline_ms(rows, gpu)
    assert ms[1] == pytest.approx(scale * ms[0], rel=1e-9)


def test_reference_mape_on_unseen_gpus(test_kernels):
    """docs/method.md §4: bmm L4 52 / A100-80GB 29; linear 72 / 16; within 1 point."""
    expected = {("bmm", "NVIDIA L4"): 52, ("bmm", "NVIDIA A100 80GB PCIe"): 29,
                ("linear", "NVIDIA L4"): 72, ("linear", "NVIDIA A100 80GB PCIe"): 16}
    for (family, device), mape in expected.items():
        rows = test_kernels(family)
        rows = rows[rows["Device"] == device]
        got = ape_pct(roofline_ms(rows), rows["Latency"]).mean()
        assert abs(got - mape) <= 1.0, (family, device, got)


@pytest.mark.parametrize("family, lo, hi", [("elem", 16, 22), ("ln", 27, 37), ("softmax", 23, 34)])
def test_reference_vector_mape_ranges(test_kernels, family, lo, hi):
    rows = test_kernels(family)
    for device in ("NVIDIA L4", "NVIDIA A100 80GB PCIe"):
        r = rows[rows["Device"] == device]
        got = ape_pct(roofline_ms(r), r["Latency"]).mean()
        assert lo - 1 <= got <= hi + 1, (family, device, got)


_GEMM = st.fixed_dictionaries({"OPName": st.sampled_from(["bmm", "linear"]), "B": st.integers(1, 64),
                               "M": st.integers(1, 8192), "N": st.integers(1, 8192), "K": st.integers(1, 8192)})


@given(row=_GEMM, amd=st.sampled_from(["mi100", "mi210", "mi250", "mi250x", "mi300x"]),
       nvidia=st.sampled_from(["l4", "a100_pcie_80gb", "tesla_t4", "h100_sxm_80gb"]))
def test_fp32_gemms_run_at_the_matrix_core_peak_where_the_spec_has_one(row, amd, nvidia):
    """AMD fp32 GEMMs (Tensile MFMA kernels) are bound by the fp32 matrix peak; NVIDIA's by the fp32 (CUDA core)
    peak, as before; vector ops stay on the vector rate on both."""
    row = {**row, "B": 1} if row["OPName"] == "linear" else row
    rows = pd.DataFrame([row, {"OPName": "gelu", "B": row["B"], "H": row["M"] * row["K"]}])
    flops, nbytes = kernel_flops_bytes(rows)
    for key, peak in ((amd, get_gpu(amd).fp32_matrix_gflops), (nvidia, get_gpu(nvidia).fp32_gflops)):
        g = get_gpu(key)
        ms = roofline_ms(rows, g)
        assert ms[0] == pytest.approx(1e3 * max(flops[0] / (peak * 1e9), nbytes[0] / (g.mem_bw_gbs * 2**30)),
                                      rel=1e-12)
        assert ms[1] == pytest.approx(1e3 * max(flops[1] / (g.fp32_gflops * 1e9), nbytes[1] / (g.mem_bw_gbs * 1e9)),
                                      rel=1e-12)
    vector_only = dataclasses.replace(get_gpu(amd), fp32_matrix_gflops=None)  # the old, vector-rate roofline
    assert roofline_ms(rows, get_gpu(amd))[0] <= roofline_ms(rows, vector_only)[0]


def test_amd_kernel_rows_never_beat_the_matrix_roofline():
    """NeuSight's MI100 / MI210 fp32 GEMMs: up to 1.5x faster than the vector roofline, none faster than the
    matrix one (the learned target, log(latency / roofline) clipped at 0, keeps every row)."""
    from tilecast.predictors.rows import amd_rows

    for family in ("bmm", "linear"):
        for device, part in amd_rows(family).groupby("Device"):
            lat = part["Latency"].to_numpy(float)
            vector = roofline_ms(part, dataclasses.replace(get_gpu(device), fp32_matrix_gflops=None))
            assert (lat < vector).mean() > 0.15  # the vector roofline is no bound on AMD GEMMs
            assert (lat >= roofline_ms(part)).all()
