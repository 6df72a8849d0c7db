"""Per-op latency of op frames built by hand (forecast/ops.py, forecast/comm.py)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tilecast.forecast import CommModel, op_kernel_rows, op_latency_ms
from tilecast.specs import get_gpu
from tilecast.tiles.roofline import roofline_ms

L4 = get_gpu("l4")
A100 = get_gpu("a100_sxm4_40gb")


ROWS = [
    dict(kind="linear", op="linear", m=4096, n=1280, k=3840, count=36),
    dict(kind="bmm", op="bmm", b=80, m=1024, n=64, k=1024, count=36),
    dict(kind="vec", op="add", b=4096, h=1280, mem_per_o=12.0, ops_per_o=1.0, count=72),
    dict(kind="vec", op="softmax", b=81920, h=1024, mem_per_o=8.0, ops_per_o=5.0),
    dict(kind="vec", op="ln", b=4096, h=1280, mem_per_o=8.0, ops_per_o=6.0, phase="bw"),
    dict(kind="linear", op="linear", m=4096, n=1280, k=3840, phase="bw", count=36),  # same kernel again
    dict(kind="mem", op="mem", h=1_000_000, bytes=4_000_000.0),
    dict(kind="allreduce", op="allreduce", h=5_242_880, bytes=4 * 5_242_880.0),
    dict(kind="sendrecv", op="sendrecv", h=5_242_880, bytes=4 * 5_242_880.0),
    dict(kind="conv", op="conv", b=1, m=100, n=100, k=100, flops=2e6, bytes=1.2e5),
    dict(kind="vec", op="where", b=10, h=100, flops=0.0, bytes=12000.0),
]


@pytest.fixture
def frame(op_frame):
    return op_frame(ROWS)


def test_kernel_rows_use_the_data_schema(frame):
    rows = op_kernel_rows(frame)
    assert list(rows.columns) == ["OPName", "B", "M", "N", "K", "H", "Hkv", "dtype", "kind", "family"]
    assert rows.index.tolist() == [0, 1, 2, 3, 4, 5]
    assert rows.loc[0, ["OPName", "B", "M", "N", "K"]].tolist() == ["linear", 1, 4096, 1280, 3840]
    assert rows.loc[2, ["OPName", "B", "H", "M"]].tolist() == ["add", 4096, 1280, 0]
    assert rows.family.tolist() == ["linear", "bmm", "elementwise", "softmax", "layernorm", "linear"]


def test_roofline_default_and_non_kernel_costs(frame):
    ms = op_latency_ms(frame, L4, n_gpus=4)
    kernels = op_kernel_rows(frame)
    assert ms[:6] == pytest.approx(roofline_ms(kernels[["OPName", "B", "M", "N", "K", "H"]], L4))
    assert ms[6] == pytest.approx(1e3 * 4e6 / (L4.mem_bw_gbs * 2**30))  # docs/method.md §2: MEM over BW * 2^30
    link = 0.72 * L4.link_gbs * 1e9 / 1e3  # bytes per ms
    assert ms[7] == pytest.approx(2 * 3 / 4 * 4 * 5_242_880 / link)  # ring all-reduce over 4 GPUs
    assert ms[8] == pytest.approx(4 * 5_242_880 / link)
    assert ms[9] == pytest.approx(1e3 * max(2e6 / (L4.fp32_gflops * 1e9), 1.2e5 / (L4.mem_bw_gbs * 1e9)))
    assert ms[10] == pytest.approx(1e3 * 12000 / (L4.mem_bw_gbs * 1e9))  # no family: own bytes


def test_each_distinct_kernel_is_predicted_once_per_family(frame):
    calls = []

    def predict(family, rows, gpu):
        calls.append((family, len(rows), rows["Device"].unique().tolist()))
        assert gpu is L4
        return np.arange(1, len(rows) + 1, dtype=float)

    stacked = pd.concat([frame] * 50, ignore_index=True)
    ms = op_latency_ms(stacked, L4, predict)
    assert sorted(c[:2] for c in calls) == sorted([("linear", 1), ("bmm", 1), ("elementwise", 1), ("softmax", 1),
                                                   ("layernorm", 1)])
    assert all(c[2] == [L4.device_name] for c in calls)
    assert ms[0] == ms[5] == ms[len(frame)]  # same kernel, same prediction, wherever it appears


def test_fused_vector_group_scales_with_its_bytes(op_frame):
    plain = op_frame([dict(kind="vec", op="tanh", b=4096, h=5120, mem_per_o=8.0, ops_per_o=1.0)])
    fused = op_frame([dict(kind="vec", op="tanh", b=4096, h=5120, mem_per_o=16.0, ops_per_o=8.0)])
    p, f = op_latency_ms(plain, A100)[0], op_latency_ms(fused, A100)[0]
    assert f == pytest.approx(2 * p)  # memory-bound: twice the bytes per output element
    unset = op_frame([dict(kind="vec", op="tanh", b=4096, h=5120)])
    assert op_latency_ms(unset, A100)[0] == pytest.approx(p)


def test_link_comes_from_the_spec_not_the_name(op_frame):
    ar = op_frame([dict(kind="allreduce", op="allreduce", h=10**7, bytes=4e7)])
    renamed = replace(A100, device_name="Some Other Name", key="other")
    assert op_latency_ms(ar, renamed, n_gpus=8) == pytest.approx(op_latency_ms(ar, A100, n_gpus=8))
    pcie = replace(A100, nvlink_gbs=None)
    assert op_latency_ms(ar, pcie, n_gpus=8)[0] / op_latency_ms(ar, A100, n_gpus=8)[0] == pytest.approx(
        A100.nvlink_gbs / 2 / A100.pcie_gbs)
    assert op_latency_ms(ar, A100, n_gpus=1)[0] == 0.0
    ref = CommModel(efficiency=0.72, allreduce="reference")
    assert op_latency_ms(ar, A100, n_gpus=4, comm=ref)[0] == pytest.approx(4e7 * 3 / (0.72 * 300e9) * 1e3)


def test_a_small_all_reduce_costs_its_latency_floor(op_frame):
    """A few hundred bytes over 2 / 4 / 8 GPUs: NCCL's measured 10 / 15 / 25 us, not the bandwidth's ~0."""
    ar = op_frame([dict(kind="allreduce", op="allreduce", h=128, bytes=256.0)])
    nccl = CommModel(floors=True)
    got = [op_latency_ms(ar, A100, n_gpus=p, comm=nccl)[0] * 1e3 for p in (2, 4, 8)]
    assert got == pytest.approx([10.2, 15.4, 25.8], abs=0.3)
    assert op_latency_ms(ar, A100, n_gpus=4)[0] * 1e3 < 0.01  # off by default (forecast.comm)
    assert op_latency_ms(ar, A100, n_gpus=1, comm=nccl)[0] == 0.0


def test_the_floors_are_the_fit_of_the_shipped_nccl_tables():
    from tilecast.data import load_aiconfigurator
    from tilecast.forecast.comm import FLOORS_MS, fit_floors

    fitted = fit_floors(load_aiconfigurator("nccl"))
    assert set(fitted) == set(FLOORS_MS)
    for op, (base, per_gpu) in fitted.items():
        assert FLOORS_MS[op] == pytest.approx((base, per_gpu), abs=1e-5), op


def test_predictor_errors_name_the_family(frame):
    with pytest.raises(ValueError, match="bmm predictor returned 0 values"):
        op_latency_ms(frame, L4, lambda fam, rows, gpu: np.ones(len(rows)) if fam != "bmm" else np.ones(0))
    with pytest.raises(ValueError, match="linear predictor returned a non-finite"):
        op_latency_ms(frame, L4, lambda fam, rows, gpu: np.full(len(rows), np.nan if fam == "linear" else 1.0))


def test_bad_comm_model():
    with pytest.raises(ValueError, match="efficiency"):
        CommModel(efficiency=0)
    with pytest.raises(ValueError, match="known: ring"):
        CommModel(allreduce="tree")
