"""Mixture-of-experts era kernel rows: schemas, the tables' converters, routing statistics and the rooflines of
``moe``, ``mla_prefill``, ``mla_decode`` and all-to-all rows (tilecast.tiles.moe / mla / a2a / moe_sources)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.specs import get_gpu
from tilecast.tiles.a2a import a2a_bytes, ranks_per_token
from tilecast.tiles.dtypes import MOE_DTYPES, DtypeError, normalise_dtype, peak_dtype
from tilecast.tiles.features import FEATURE_BUILDERS, default_features
from tilecast.tiles.moe import RoutingError, moe_row_errors, power_law_alpha, power_law_loads, routing_stats
from tilecast.tiles.ops import FAMILIES, FAMILY_DIMS, FAMILY_OPTIONAL, MOE_MLA_FAMILIES, row_families
from tilecast.tiles.roofline import kernel_flops_bytes, roofline_ms
from tilecast.tiles.sources import kernel_rows, source_schema

B200 = get_gpu("b200")


def moe_row(**kw) -> dict:
    return {"OPName": "moe", "tokens": 64, "hidden": 4096, "inter": 1536, "topk": 8, "experts": 128, "moe_tp": 1,
            "moe_ep": 1, "dtype": "bf16", "distribution": "balanced", **kw}


def test_schemas_name_every_moe_era_family() -> None:
    assert set(MOE_MLA_FAMILIES) <= set(FAMILIES)
    assert FAMILY_DIMS["moe"] == ("tokens", "hidden", "inter", "topk", "experts", "moe_tp", "moe_ep")
    assert FAMILY_DIMS["mla_prefill"] == FAMILY_DIMS["mla_decode"] == ("B", "M", "N", "H")
    assert {c for c, _ in FAMILY_OPTIONAL["moe"]} == {"dtype", "distribution", "gated", "framework"}
    rows = pd.DataFrame([moe_row(), {"OPName": "mla_prefill"}, {"OPName": "mla_decode"}, {"OPName": "a2a_dispatch"}])
    assert row_families(rows).tolist() == ["moe", "mla_prefill", "mla_decode", None]
    for fam in MOE_MLA_FAMILIES:
        assert fam in FEATURE_BUILDERS and default_features(fam)


def test_expert_formats_carry_scale_bytes_and_compute_peaks() -> None:
    assert normalise_dtype("nvfp4") == "fp4" and normalise_dtype("bfloat16") == "bf16"
    assert MOE_DTYPES["fp4"].weight_bytes == pytest.approx(0.5625)  # e2m1 + one fp8 scale per 16
    assert MOE_DTYPES["w4a16_mxfp4"].weight_bytes == pytest.approx(0.53125)  # + one 8-bit scale per 32
    assert MOE_DTYPES["fp8_block"].act_bytes == pytest.approx(1 + 4 / 128)
    assert [peak_dtype(d) for d in ("w4a16_mxfp4", "w4a8_mxfp4_mxfp8", "int4_wo", "mxfp4", "fp8_block", "bf16")] \
        == ["bf16", "fp8", "bf16", "fp4", "fp8", "bf16"]
    with pytest.raises(DtypeError):
        normalise_dtype("fp6")


def test_moe_converter_reads_the_table_schema() -> None:
    frame = pd.DataFrame({"system": ["l40s", "l40s"], "framework": ["trtllm", "trtllm"], "device": ["NVIDIA L40S"] * 2,
                          "kernel_source": ["moe_torch_flow_cutlass", "moe_torch_flow_nongated"],
                          "moe_dtype": ["nvfp4", "bfloat16"], "num_tokens": [32, 64], "hidden_size": [4096, 2048],
                          "inter_size": [1536, 768], "topk": [8, 8], "num_experts": [128, 128], "moe_tp_size": [2, 1],
                          "moe_ep_size": [4, 8], "distribution": ["balanced", "power_law_1.2"],
                          "latency_ms": [0.1, 0.2]}, index=[5, 3])
    assert source_schema(frame) == "aiconfigurator_moe"
    rows = kernel_rows(frame)
    assert rows.index.tolist() == [5, 3]
    assert rows["OPName"].tolist() == ["moe", "moe"] and rows["gated"].tolist() == [True, False]
    assert rows[["tokens", "inter", "moe_tp", "moe_ep"]].values.tolist() == [[32, 1536, 2, 4], [64, 768, 1, 8]]
    assert rows["Latency"].tolist() == [0.1, 0.2] and rows["Device"].tolist() == ["NVIDIA L40S"] * 2


def test_mla_converter_prefill_counts_the_prefix_decode_the_cache() -> None:
    frame = pd.DataFrame({"system": ["b200_sxm"] * 2, "op_name": ["mla_context", "mla_generation"],
                          "mla_dtype": ["bfloat16"] * 2, "kv_cache_dtype": ["fp8", "bfloat16"], "num_heads": [16, 64],
                          "batch_size": [2, 8], "isl": [512, 1], "tp_size": [8, 2], "step": [100, 4095],
                          "latency_ms": [0.3, 0.05]})
    rows = kernel_rows(frame)
    assert rows["OPName"].tolist() == ["mla_prefill", "mla_decode"]
    assert rows[["B", "M", "N", "H"]].values.tolist() == [[2, 512, 612, 16], [8, 1, 4095, 64]]
    assert rows["kv_dtype"].tolist() == ["fp8", "bfloat16"]


def test_routing_balanced_spreads_pairs_evenly() -> None:
    pairs, active, busiest = routing_stats(np.array([1, 32, 4096]), 256, 8, 8, "balanced")
    assert pairs.tolist() == [1.0, 32.0, 4096.0]
    assert active.tolist() == [1.0, 32.0, 32.0]  # at most the 32 local experts
    assert busiest.tolist() == [1.0, 1.0, 128.0]


def test_power_law_draws_keep_the_pairs_and_cap_each_expert() -> None:
    for tokens, experts, topk in ((1, 256, 8), (32, 256, 8), (4096, 128, 8), (100, 8, 2), (3, 8, 8)):
        loads = power_law_loads(tokens, experts, topk, 1.2)
        assert (loads.sum(axis=1) == tokens * topk).all()
        assert loads.min() >= 0 and loads.max() <= tokens  # a token picks an expert at most once
    assert power_law_alpha("power_law_1.01") == 1.01 and power_law_alpha("balanced") is None
    with pytest.raises(RoutingError, match="unknown routing distribution 'zipf'"):
        power_law_alpha("zipf")
    with pytest.raises(RoutingError, match="moe_ep=3 must divide experts=128"):
        routing_stats(8, 128, 8, 3, "balanced")
    assert moe_row_errors([128, 128, 8], [8, 8, 16], [3, 4, 1], ["balanced", "x", "balanced"]).tolist() == [
        "moe_ep=3 does not divide experts=128",
        "unknown routing distribution 'x'; known: balanced, power_law_<alpha> (alpha > 0, not 1; the data has "
        "balanced, power_law_1.01, power_law_1.2)", "topk=16 is above experts=8"]


shapes = st.fixed_dictionaries({
    "hidden": st.sampled_from([1024, 2880, 4096, 7168]), "inter": st.sampled_from([512, 1536, 2048, 8192]),
    "topk": st.sampled_from([1, 2, 6, 8]), "experts": st.sampled_from([8, 64, 128, 256]),
    "moe_tp": st.sampled_from([1, 2, 4]), "moe_ep": st.sampled_from([1, 2, 8]),
    "dtype": st.sampled_from(["bf16", "fp8", "fp8_block", "fp4", "w4a16_mxfp4", "w4a8_mxfp4_mxfp8", "int4_wo"])})


@settings(max_examples=40, deadline=None)
@given(shape=shapes, gpu=st.sampled_from(["b200", "rtx_pro_6000_server", "gb200"]))
def test_moe_roofline_monotone_in_tokens_balanced(shape, gpu) -> None:
    """More tokens never make a balanced MoE layer's roofline faster."""
    rows = pd.DataFrame([moe_row(tokens=t, **shape) for t in (1, 2, 8, 33, 256, 1024, 8192)])
    roof = roofline_ms(rows, get_gpu(gpu))
    assert np.all(np.isfinite(roof)) and np.all(roof > 0)
    assert np.all(np.diff(roof) >= -1e-12)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, tokens=st.sampled_from([1, 4, 32, 512, 4096]), alpha=st.sampled_from(["1.01", "1.2", "2.0"]))
def test_skewed_routing_does_no_less_work_than_balanced(shape, tokens, alpha) -> None:
    """The busiest GPU under a skewed routing computes at least the balanced share of pairs (max >= mean), so
    its FLOPs, and a compute-bound roofline, are never below balanced. Its bytes can be: a skewed decode step
    touches fewer experts (the tables measure power-law decode steps up to 2x faster, benchmarks/moe.md)."""
    rows = pd.DataFrame([moe_row(tokens=tokens, distribution=d, **shape)
                         for d in ("balanced", f"power_law_{alpha}")])
    flops, nbytes = kernel_flops_bytes(rows)
    assert flops[1] >= flops[0] * (1 - 1e-9)
    peak, bw = B200.peak_gflops(peak_dtype(normalise_dtype(shape["dtype"]))) * 1e9, B200.mem_bw_gbs * 1e9
    if (flops / peak >= nbytes / bw).all():  # compute-bound both ways: the roofline follows the FLOPs
        roof = roofline_ms(rows, B200)
        assert roof[1] >= roof[0] * (1 - 1e-9)


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 64), n=st.integers(1, 1 << 17), h=st.sampled_from([1, 8, 16, 128]),
       kv=st.sampled_from(["bfloat16", "fp8"]))
def test_mla_rooflines_grow_with_the_cache_and_batch(b, n, h, kv) -> None:
    rows = pd.DataFrame([{"OPName": op, "B": bb, "M": 1 if op == "mla_decode" else min(n, 4096), "N": nn, "H": h,
                          "kv_dtype": kv} for op in ("mla_decode", "mla_prefill") for bb, nn in ((b, n), (b, 2 * n),
                                                                                                 (2 * b, 2 * n))])
    rows.loc[rows["OPName"] == "mla_prefill", "N"] = np.maximum(rows["N"], rows["M"])
    roof = roofline_ms(rows, B200).reshape(2, 3)
    assert np.all(roof > 0) and np.all(np.diff(roof, axis=1) >= 0)


def test_mla_fp8_cache_runs_at_fp8_where_the_gpu_has_it() -> None:
    row = {"OPName": "mla_decode", "B": 256, "M": 1, "N": 512, "H": 128}
    bf16, fp8 = roofline_ms(pd.DataFrame([row, {**row, "kv_dtype": "fp8"}]), B200)
    assert fp8 < bf16  # fewer bytes and the fp8 rate
    a100 = roofline_ms(pd.DataFrame([{**row, "kv_dtype": "fp8"}]), get_gpu("a100_sxm4_80gb"))
    assert np.isfinite(a100).all()  # no fp8 peak: the bf16 rate, not an error


def test_a2a_bytes_and_roofline() -> None:
    assert ranks_per_token(8, 256, 1)[()] == pytest.approx(1.0)
    assert ranks_per_token(8, 8, 8)[()] == pytest.approx(8.0)  # one expert per rank, all eight chosen
    nv, net = a2a_bytes(["a2a_combine"], [128], [7168], [8], [256], [8], [1], ["ll"], [None])
    assert nv[0] == pytest.approx(128 * 8 * 7168 * 2 * 7 / 8) and net[0] == 0
    nv2, net2 = a2a_bytes(["a2a_combine"], [128], [7168], [8], [256], [16], [2], ["ll"], [None])
    sent = 128 * 8 * 7168 * 2
    assert net2[0] == pytest.approx(sent * 8 / 16) and nv2[0] == pytest.approx(sent * 7 / 16)
    rows = pd.DataFrame([{"OPName": "a2a_dispatch", "tokens": t, "hidden": 4096, "topk": 8, "experts": 256, "ep": 8,
                          "a2a_mode": "normal"} for t in (1, 64, 4096)])
    roof = roofline_ms(rows, B200)
    assert np.all(np.diff(roof) > 0)
