"""Stacked predictions (one call per family for every GPU) equal per-GPU calls; a failing GPU stays alone."""

import numpy as np
import pandas as pd
import pytest

from tilecast.forecast import op_latency_ms, roofline_predictor
from tilecast.forecast.ops import op_latency_matrix
from tilecast.scoring.graphs import build_graphs, dedupe_ops
from tilecast.scoring.predictors import (
    PredictorSource,
    families_for,
    latency_chunk,
    resolve_source,
)
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FP32_FAMILIES, MOE_MLA_FAMILIES, TENSOR_FAMILIES

GPUS = ["l4", "h100_sxm_80gb", "tesla_t4", "mi300x"]


@pytest.fixture(scope="module")
def distinct():
    graphs = pd.DataFrame([(0, "gpt2_large", 4, 512, "training", "none", False),
                           (1, "llama2_7b", 2, 1024, "inference", "none", True)],
                          columns=["graph_id", "model", "batch", "seq_len", "mode", "parallel", "fused"])
    rows, info = build_graphs(graphs)
    return dedupe_ops(rows, info.set_index("graph_id")["degree"]).distinct


def test_one_stacked_call_per_family_equals_per_gpu_calls(distinct):
    calls = []

    def counting(fam, rows, gpu):
        calls.append((fam, gpu))
        return roofline_predictor(fam, rows, gpu)

    ms, errors = op_latency_matrix(distinct, [get_gpu(g) for g in GPUS], counting)
    assert errors == {} and all(gpu is None for _, gpu in calls) and len(calls) == 5  # one call per family
    for j, g in enumerate(GPUS):
        np.testing.assert_array_equal(ms[:, j], op_latency_ms(distinct, get_gpu(g), roofline_predictor))


def test_a_gpu_whose_prediction_fails_is_the_only_one_with_an_error(distinct):
    def picky(fam, rows, gpu):
        devices = {gpu.device_name} if gpu is not None else set(rows["Device"])
        if "NVIDIA L4" in devices:
            raise ValueError("no tiles for this GPU")
        return roofline_predictor(fam, rows, gpu)

    ms, errors = op_latency_matrix(distinct, [get_gpu(g) for g in GPUS], picky)
    assert list(errors) == ["l4"] and "no tiles" in errors["l4"]  # the stacked call failed: GPU by GPU
    assert np.isnan(ms[:, 0]).any()
    for j, g in enumerate(GPUS[1:], start=1):
        np.testing.assert_array_equal(ms[:, j], op_latency_ms(distinct, get_gpu(g), roofline_predictor))
    with pytest.raises(ValueError, match="no tiles"):
        op_latency_ms(distinct, get_gpu("l4"), picky)


def test_latency_chunk_shape_and_source_checks(distinct):
    ms, errors = latency_chunk(PredictorSource("roofline"), distinct, GPUS)
    assert ms.shape == (len(distinct), len(GPUS)) and errors == {} and np.isfinite(ms).all()
    with pytest.raises(ValueError, match="unknown forecaster 'magic'"):
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
    stacked, errors = op_latency_matrix(ops, gpus, roofline_predictor)
    assert errors == {}
    for j, gpu in enumerate(gpus):
        got = stacked[:, j]
        np.testing.assert_array_equal(got, op_latency_ms(ops, gpu, roofline_predictor))
        ms = pd.Series(got[gemm.index], index=gemm.index)
        fp8, bf16 = (ms[gemm["dtype"] == d].to_numpy() for d in ("fp8", "bf16"))
        assert (fp8 < bf16).all()  # each dtype got its own prediction


def test_families_a_matrix_needs():
    assert families_for(["fp32"]) == FP32_FAMILIES
    assert families_for(["fp32", "tf32"]) == (*FP32_FAMILIES, "tc_gemm")
    for half in ("bf16", "fp16", "fp8", "amp_bf16"):
        assert families_for([half]) == (*FP32_FAMILIES, *TENSOR_FAMILIES)
    # a mixture-of-experts model adds the fused-MoE and MLA families, in half precision only; dense ones do not
    assert families_for(["fp8"], ["deepseek_r1"]) == (*FP32_FAMILIES, *TENSOR_FAMILIES, *MOE_MLA_FAMILIES)
    assert families_for(["fp8"], ["llama31_8b", "not-a-model"]) == (*FP32_FAMILIES, *TENSOR_FAMILIES)
    assert families_for(["fp32"], ["deepseek_r1"]) == FP32_FAMILIES
