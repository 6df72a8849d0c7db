"""Every prediction respects the roofline and the launch floor, over random shapes and spec sheets."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecast.specs import get_gpu
from tilecast.tiles.roofline import roofline_ms

BASE = get_gpu("a100_pcie_80gb")

gpus = st.builds(
    lambda sm, f, bw, l2, arch: dataclasses.replace(BASE, key="random", device_name="Random GPU", num_sm=sm,
                                                    fp32_gflops=f, mem_bw_gbs=bw, l2_mb=l2, architecture=arch),
    sm=st.integers(8, 256), f=st.floats(1e3, 2e5), bw=st.floats(100.0, 1e4), l2=st.floats(1.0, 256.0),
    arch=st.sampled_from(["pascal", "volta", "ampere", "ada", "hopper", "cdna3"]))
gemm_rows = st.lists(st.tuples(st.integers(1, 4096), st.integers(1, 1 << 16), st.integers(1, 1 << 16),
                               st.integers(1, 1 << 16)), min_size=1, max_size=20)
vec_rows = st.lists(st.tuples(st.integers(1, 1 << 22), st.integers(1, 1 << 16)), min_size=1, max_size=20)
VEC_OPS = {"elementwise": ["add", "mulu", "gelu", "tanh", "div"], "softmax": ["softmax"], "layernorm": ["ln"]}


def _check(predictor, rows, gpu):
    pred = predictor.predict_ms(rows, gpu)
    roof = roofline_ms(rows, gpu)
    assert pred.shape == (len(rows),) and np.isfinite(pred).all()
    assert (pred >= roof * (1 - 1e-12)).all()
    assert (pred >= predictor.floor_ms).all()


@pytest.mark.parametrize("name", ["xgboost", "mlp", "roofline"])
@pytest.mark.parametrize("family", ["bmm", "linear"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gpu=gpus, shapes=gemm_rows)
def test_gemm_never_faster_than_roofline(tiny_predictor, name, family, gpu, shapes):
    rows = pd.DataFrame(shapes, columns=["B", "M", "N", "K"]).assign(OPName=family)
    if family == "linear":
        rows["B"] = 1
    _check(tiny_predictor(name, family), rows, gpu)


@pytest.mark.parametrize("name", ["xgboost", "mlp"])
@pytest.mark.parametrize("family", list(VEC_OPS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gpu=gpus, shapes=vec_rows, data=st.data())
def test_vector_never_faster_than_roofline(tiny_predictor, name, family, gpu, shapes, data):
    ops = [data.draw(st.sampled_from(VEC_OPS[family])) for _ in shapes]
    rows = pd.DataFrame(shapes, columns=["B", "H"]).assign(OPName=ops)
    _check(tiny_predictor(name, family), rows, gpu)


def test_launch_floor_is_learned_and_applied(tiny_predictor):
    p = tiny_predictor("xgboost", "elementwise")
    assert 0.005 < p.floor_ms < 0.1  # smallest measured kernels take tens of microseconds
    tiny = pd.DataFrame({"OPName": ["add"], "B": [1], "H": [1]})
    assert p.predict_ms(tiny, get_gpu("h100_sxm_80gb"))[0] >= p.floor_ms
