"""Roofline baseline: hand computations, and the reference's per-device MAPE (docs/method.md §4)."""

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
