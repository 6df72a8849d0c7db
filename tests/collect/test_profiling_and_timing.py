"""Kernel columns from a profiler trace, and the timing statistic."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecast.collect.profiling import kernel_columns, kernels_from_trace
from tilecast.collect.timing import TimingPlan, mean_of_fastest

SGEMM = "ampere_sgemm_128x128_nn"
SPLITK = "void splitkreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(...)"


def _kernel(name, ts, dur, grid, block, **extra):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur,
            "args": {"grid": grid, "block": block, **extra}}


def test_grid_math_reproduces_a_shipped_row():
    """Shipped L4 row: bmm (192, 96, 196, 196), grid (2,1,192), block 256 on 58 SMs -> 52.96552 / 6.62069."""
    trace = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "ts": 0, "dur": 9},
                             _kernel(SGEMM, 5, 238.6, [2, 1, 192], [256, 1, 1])]}
    cols = kernel_columns(kernels_from_trace(trace, num_sm=58))
    assert cols["Kernel Name"] == SGEMM and cols["Kernels"] == ";" + SGEMM
    assert cols["Warps per SM"] == pytest.approx(52.96552, rel=1e-6)
    assert cols["Blocks per SM"] == pytest.approx(6.62069, rel=1e-6)
    assert (cols["Grid x"], cols["Grid y"], cols["Grid z"], cols["Block x"]) == (2, 1, 192, 256)


def test_main_kernel_is_the_longest_and_all_are_listed_in_launch_order():
    trace = {"traceEvents": [_kernel(SPLITK, 30, 5.0, [4, 1, 1], [128, 1, 1]),
                             _kernel(SGEMM, 10, 90.0, [1, 2, 300], [256, 1, 1], **{"warps per SM": 7.5,
                                                                                     "blocks per SM": 1.25})]}
    cols = kernel_columns(kernels_from_trace(trace, num_sm=132))
    assert cols["Kernel Name"] == SGEMM
    assert cols["Kernels"] == f";{SGEMM};{SPLITK}"
    assert (cols["Warps per SM"], cols["Blocks per SM"]) == (7.5, 1.25)  # the profiler's own figures win


def test_no_kernels_gives_empty_columns():
    cols = kernel_columns(kernels_from_trace({"traceEvents": []}, num_sm=10))
    assert set(cols.values()) == {""}


@given(st.lists(st.floats(0.001, 1e4), min_size=1, max_size=40), st.integers(1, 40))
def test_mean_of_fastest_is_between_min_and_mean(samples, k):
    m = mean_of_fastest(samples, k)
    assert min(samples) - 1e-9 <= m <= sum(samples) / len(samples) + 1e-9
    if k == 1:
        assert m == min(samples)


def test_timing_plan_checks_itself():
    with pytest.raises(ValueError, match="fastest=30"):
        TimingPlan(warmup=1, repeats=25, fastest=30)
