"""Stacked predictions (one call per family for every GPU) equal per-GPU calls; a failing GPU stays alone."""

import numpy as np
import pandas as pd
import pytest

from tilecast.forecast import op_latency_ms, roofline_predictor
from tilecast.scoring.graphs import build_graphs, dedupe_ops
from tilecast.scoring.predictors import (
    PredictorSource,
    StackedPredictor,
    families_for,
    latency_chunk,
    resolve_source,
)
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FP32_FAMILIES, TENSOR_FAMILIES

GPUS = ["l4", "h100_sxm_80gb", "tesla_t4", "mi300x"]


@pytest.fixture(scope="module")
def distinct():
    graphs = pd.DataFrame([(0, "gpt2_large", 4, 512, "training", "none", False),
                           (1, "llama2_7b", 2, 1024, "inference", "none", True)],
                          columns=["graph_id", "model", "batch", "seq_len", "mode", "parallel", "fused"])
    rows, info = build_graphs(graphs)
    return dedupe_ops(rows, info.set_index("graph_id")["degree"]).distinct


def test_stacked_equals_per_gpu_calls(distinct):
    calls = []

    def counting(fam, rows, gpu):
        calls.append((fam, gpu))
        return roofline_predictor(fam, rows, gpu)

    stacked = StackedPredictor(counting, distinct, [get_gpu(g) for g in GPUS])
    assert all(gpu is None for _, gpu in calls) and len(calls) == len(stacked.tables) == 5  # one call per family
    for g in GPUS:
        got = op_latency_ms(distinct, get_gpu(g), stacked)
        want = op_latency_ms(distinct, get_gpu(g), roofline_predictor)
        np.testing.assert_array_equal(got, want)
    assert len(calls) == 5  # answered from the table


def test_a_gpu_whose_prediction_fails_is_the_only_one_with_an_error(distinct):
    def picky(fam, rows, gpu):
        devices = {gpu.device_name} if gpu is not None else set(rows["Device"])
        if "NVIDIA L4" in devices:
            raise ValueError("no tiles for this GPU")
        return roofline_predictor(fam, rows, gpu)

    stacked = StackedPredictor(picky, distinct, [get_gpu(g) for g in GPUS])
    assert stacked.tables == {}  # the stacked call failed: every GPU predicts on its own
    with pytest.raises(ValueError, match="no tiles"):
        op_latency_ms(distinct, get_gpu("l4"), stacked)
    np.testing.assert_array_equal(op_latency_ms(distinct, get_gpu("mi300x"), stacked),
                                  op_latency_ms(distinct, get_gpu("mi300x"), roofline_predictor))


def test_latency_chunk_shape_and_source_checks(distinct):
    ms, errors = latency_chunk(PredictorSource("roofline"), distinct, GPUS)
    assert ms.shape == (len(distinct), len(GPUS)) and errors == {} and np.isfinite(ms).all()
    with pytest.raises(ValueError, match="unknown predictor 'magic'"):
        resolve_source("magic")


class _Forgetful:
    """A predictor whose pickled copy loses its state (as an object with a lossy ``__getstate__`` would)."""

    def __init__(self) -> None:
        self.scale = 2.0

    def __getstate__(self) -> dict:
        return {}

    def __call__(self, fam, rows, gpu):
        return roofline_predictor(fam, rows, gpu) * self.scale


def test_only_predictors_that_survive_pickling_are_shipped():
    from tilecast.scoring.predictors import ships_faithfully

    gpu = get_gpu("l4")
    assert ships_faithfully(roofline_predictor, gpu, ["bmm", "linear", "elementwise", "softmax", "layernorm"])
    assert ships_faithfully(roofline_predictor, gpu, list(TENSOR_FAMILIES))  # a probe row for every family
    assert not ships_faithfully(_Forgetful(), gpu, ["linear"])
    assert not ships_faithfully(lambda fam, rows, g: roofline_predictor(fam, rows, g), gpu, ["linear"])  # no pickle


def test_stacked_predictions_keep_dtypes_apart():
    """bf16 and fp8 GEMMs of one shape are both ``tc_gemm`` rows: the stacked table must not mix them up."""
    graphs = pd.DataFrame([(0, "llama2_7b", 2, 512, "inference", "none", False, "bf16"),
                           (1, "llama2_7b", 2, 512, "inference", "none", False, "fp8")],
                          columns=["graph_id", "model", "batch", "seq_len", "mode", "parallel", "fused", "dtype"])
    rows, info = build_graphs(graphs)
    ops = dedupe_ops(rows, info.set_index("graph_id")["degree"]).distinct
    gemm = ops.loc[ops["kind"] == "linear"]
    assert set(gemm["dtype"]) == {"bf16", "fp8"}
    assert gemm.duplicated(["m", "n", "k"]).any()  # the same shapes in both dtypes
    gpus = [get_gpu(g) for g in ("l4", "h100_sxm_80gb")]
    stacked = StackedPredictor(roofline_predictor, ops, gpus)
    assert "tc_gemm" in stacked.tables
    for gpu in gpus:
        got = op_latency_ms(ops, gpu, stacked)
        np.testing.assert_array_equal(got, op_latency_ms(ops, gpu, roofline_predictor))
        ms = pd.Series(got[gemm.index], index=gemm.index)
        fp8, bf16 = (ms[gemm["dtype"] == d].to_numpy() for d in ("fp8", "bf16"))
        assert (fp8 < bf16).all()  # each dtype got its own prediction


def test_families_a_matrix_needs():
    assert families_for(["fp32"]) == FP32_FAMILIES
    assert families_for(["fp32", "tf32"]) == (*FP32_FAMILIES, "tc_gemm")
    for half in ("bf16", "fp16", "fp8", "amp_bf16"):
        assert families_for([half]) == (*FP32_FAMILIES, *TENSOR_FAMILIES)
