"""Engines' own all-reduce: the CommModel hook, the fit against the shipped tables, NCCL above the hand-off."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.data import load_aiconfigurator, load_aiconfigurator_engines
from tilecast.forecast.comm import CommModel
from tilecast.serving.engine_allreduce import (
    ALLREDUCE_PARAMS,
    ENGINE_IMPLEMENTATIONS,
    engine_allreduce,
    engine_comm,
    fit_allreduce,
)
from tilecast.serving.engines import UnknownEngineError, UnknownEngineVersionError
from tilecast.specs import get_gpu

NCCL = CommModel(floors=True)


@pytest.fixture(scope="module")
def shipped() -> pd.DataFrame:
    return load_aiconfigurator_engines("custom_allreduce")


def test_shipped_constants_are_the_fit_of_the_shipped_tables(shipped):
    fitted = fit_allreduce(shipped, load_aiconfigurator("nccl"))
    assert set(fitted) == set(ALLREDUCE_PARAMS)
    for impl, want in ALLREDUCE_PARAMS.items():
        got = fitted[impl]
        assert got.max_bytes == want.max_bytes, impl
        assert got.efficiency == pytest.approx(want.efficiency, abs=5e-4), impl
        assert got.base_ms == pytest.approx(want.base_ms, abs=5e-6), impl
        assert got.per_gpu_ms == pytest.approx(want.per_gpu_ms, abs=5e-6), impl


@pytest.mark.parametrize(("system", "source", "p", "elements", "tolerance"), [
    ("b200_sxm", "SGLang_CustomAllReduce_graph", 8, 4096, 0.25),   # latency floor, NVLink
    ("b200_sxm", "TRTLLM", 4, 4096, 0.25),
    ("a100_sxm", "vLLM_custom_graph", 2, 1024, 0.25),
    ("a100_sxm", "SGLang_CustomAllReduce_graph", 2, 2097152, 0.5),  # 4 MiB: bandwidth
    ("rtx_pro_6000_server", "vLLM_custom_graph", 2, 256, 0.4),  # two PCIe GPUs: its kernel, floor 4 us vs 6
])
def test_engine_model_against_shipped_rows(shipped, system, source, p, elements, tolerance):
    row = shipped[(shipped["system"] == system) & (shipped["kernel_source"] == source) & (shipped["num_gpus"] == p)
                  & (shipped["message_size"] == elements)].iloc[0]
    engine = {"SGLang": "sglang", "TRTLLM": "trtllm", "vLLM": "vllm"}[source.split("_")[0]]
    got = engine_comm(engine).allreduce_ms(np.array([2.0 * elements]), get_gpu(system), p)[0]
    assert got == pytest.approx(row["latency_ms"], rel=tolerance)
    # the NCCL floor alone is 2-5x the engines' small-message times on NVLink GPUs
    if elements <= 4096 and system != "rtx_pro_6000_server":
        assert NCCL.allreduce_ms(np.array([2.0 * elements]), get_gpu(system), p)[0] > 1.5 * row["latency_ms"]


def test_nccl_takes_what_the_engine_hands_over():
    gpu, comm = get_gpu("b200"), engine_comm("vllm")
    big = np.array([4.0 * ALLREDUCE_PARAMS["vllm_graph"].max_bytes])
    assert comm.allreduce_ms(big, gpu, 8) == pytest.approx(NCCL.allreduce_ms(big, gpu, 8))
    small = np.array([4096.0])
    assert comm.allreduce_ms(small, gpu, 8)[0] < NCCL.allreduce_ms(small, gpu, 8)[0]
    l40s = get_gpu("l40s")  # more than two PCIe-only GPUs: the kernel is off
    assert comm.allreduce_ms(small, l40s, 4) == pytest.approx(NCCL.allreduce_ms(small, l40s, 4))
    assert comm.allreduce_ms(small, l40s, 2)[0] < NCCL.allreduce_ms(small, l40s, 2)[0]
    assert comm.allreduce_ms(small, gpu, 1) == pytest.approx([0.0])
    # collective rows (predict_kernels) go through the same kernel; other collectives stay NCCL's
    assert comm.collective_ms("all_reduce", small, gpu, np.array([8.0])) == pytest.approx(
        comm.allreduce_ms(small, gpu, 8))
    assert comm.collective_ms("all_gather", small, gpu, np.array([8.0])) == pytest.approx(
        NCCL.collective_ms("all_gather", small, gpu, np.array([8.0])))


def test_eager_pays_the_host_and_the_default_comm_is_unchanged():
    gpu, small = get_gpu("a100_sxm4_80gb"), np.array([2048.0])
    assert engine_comm("sglang", mode="eager").allreduce_ms(small, gpu, 2)[0] > 3 * engine_comm(
        "sglang").allreduce_ms(small, gpu, 2)[0]
    assert engine_allreduce("trtllm", mode="eager").implementation == "trtllm"  # one kernel either way
    assert CommModel().allreduce_kernel is None


def test_bad_engine_version_and_mode_are_named():
    with pytest.raises(UnknownEngineError, match="known: vllm, sglang, trtllm"):
        engine_comm("deepspeed")
    with pytest.raises(UnknownEngineVersionError, match="measured sglang releases"):
        engine_comm("sglang", "0.4.0")
    with pytest.raises(ValueError, match="unknown all-reduce mode 'lazy'; known: graph, eager"):
        engine_comm("vllm", mode="lazy")


@settings(max_examples=50, deadline=None)
@given(engine=st.sampled_from(sorted(ENGINE_IMPLEMENTATIONS)), mode=st.sampled_from(["graph", "eager"]),
       p=st.sampled_from([2, 4, 8]), gpu=st.sampled_from(["b200", "a100_sxm4_80gb", "rtx_pro_6000_server"]),
       sizes=st.lists(st.floats(1.0, 2.0 ** 30), min_size=2, max_size=10))
def test_positive_and_monotone_in_bytes_on_either_side_of_the_hand_off(engine, mode, p, gpu, sizes):
    comm, spec = engine_comm(engine, mode=mode), get_gpu(gpu)
    limit = comm.allreduce_kernel.params.max_bytes
    for part in (np.sort([s for s in sizes if s <= limit]), np.sort([s for s in sizes if s > limit])):
        ms = comm.allreduce_ms(part, spec, p)
        assert np.all(ms > 0) and np.all(np.isfinite(ms))
        assert np.all(np.diff(ms) >= -1e-12)
