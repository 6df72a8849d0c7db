"""Disaggregated serving: the closed loop's properties, the KV transfer, and rows answered or refused one by one."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.serving.disagg import (
    DisaggConfig,
    DisaggError,
    disagg_config_from_row,
    evaluate_disagg,
    forecast_disagg,
    kv_transfer_bytes,
    solve_closed_loop,
    step_batches,
    transfer_link_gbs,
    transfer_ms,
)
from tilecast.specs import get_gpu, get_model
from tilecast.specs.layout import Layout


def table(first: float, slope: float, bmax: float) -> np.ndarray:
    """A step table affine in the batch (ms) at the grid of ``bmax``."""
    return first + slope * (step_batches(bmax)[0] - 1.0)


pools = st.fixed_dictionaries({
    "c": st.integers(1, 4096), "osl": st.integers(16, 2048), "pw": st.integers(1, 8), "pb": st.sampled_from([1, 4, 8]),
    "p0": st.floats(5.0, 2000.0), "pslope": st.floats(0.0, 300.0), "tx": st.floats(0.0, 50.0),
    "ranks": st.integers(1, 64), "d0": st.floats(2.0, 40.0), "dslope": st.floats(0.0, 0.5)})


def solve(p: dict, ranks: int | None = None) -> dict:
    ranks = ranks or p["ranks"]
    bmax = max(1, -(-p["c"] // ranks))
    return solve_closed_loop(p["c"], p["osl"], p["pw"], p["pb"], table(p["p0"], p["pslope"], p["pb"]), p["tx"],
                             ranks, bmax, table(p["d0"], p["dslope"], bmax))


@settings(max_examples=25, deadline=None)
@given(pools)
def test_ttft_covers_prefill_and_transfer_and_the_loop_holds_its_clients(p):
    out = solve(p)
    assert out["ttft"][0] >= out["prefill"][0] + p["tx"] - 1e-9
    assert out["tpot"][0] == pytest.approx(out["step"][0])
    # Little's law over the request's path: at most the client's concurrency in flight
    path = out["queue"][0] + out["prefill"][0] + p["tx"] + p["osl"] * out["step"][0]
    assert out["rate"][0] * path <= p["c"] * (1 + 1e-6)
    assert 0 < out["busy"][0] < 1


@settings(max_examples=25, deadline=None)
@given(pools, st.integers(1, 8))
def test_more_decode_workers_never_lower_throughput(p, more):
    fewer, bigger = solve(p, p["ranks"]), solve(p, p["ranks"] * (1 + more))
    assert bigger["rate"][0] >= fewer["rate"][0] * (1 - 1e-6)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 1e10), st.floats(0.0, 1e10), st.sampled_from([50.0, 100.0, 900.0]))
def test_transfer_time_is_monotone_in_the_kv_bytes(a, b, link):
    lo, hi = sorted((a, b))
    assert transfer_ms(lo, link) <= transfer_ms(hi, link)
    assert transfer_ms(0.0, link) == 0.0


def test_the_link_is_nvlink_inside_the_domain_and_the_network_beyond():
    gb200, b200 = get_gpu("gb200"), get_gpu("b200_sxm")
    assert transfer_link_gbs(gb200, 40) == gb200.link_gbs  # 40 GPUs of one NVL72 rack
    assert transfer_link_gbs(b200, 8) == b200.link_gbs
    assert transfer_link_gbs(b200, 12) == b200.network_gbs  # two HGX boards: the network


def test_the_kv_a_request_moves_grows_with_its_prompt():
    model = get_model("Qwen/Qwen3-32B")
    cfgs = [DisaggConfig(model, "fp8", isl, 128, 8, Layout(2), 1, Layout(4), 1) for isl in (512, 1024)]
    small, big = (kv_transfer_bytes(c) for c in cfgs)
    assert big == pytest.approx(2 * small) and small > 0


def row(**over) -> dict:
    base = {"model_path": "Qwen/Qwen3-32B", "system": "b200_sxm", "precision": "fp8", "mode": "disagg",
            "isl": 1024, "osl": 128, "prefill_batch_size": 1.0, "prefill_num_workers": 2.0, "prefill_tp_size": 2.0,
            "prefill_pp_size": 1.0, "prefill_attention_dp_size": 1.0, "prefill_moe_tp_size": 2.0,
            "prefill_moe_ep_size": 1.0, "decode_batch_size": 8.0, "decode_num_workers": 1.0, "decode_tp_size": 4.0,
            "decode_pp_size": 1.0, "decode_attention_dp_size": 1.0, "decode_moe_tp_size": 4.0,
            "decode_moe_ep_size": 1.0, "silicon_ttft_ms": 100.0, "silicon_tpot_ms": 10.0}
    return {**base, **over}


def test_a_row_reads_its_pools_and_the_clients_concurrency():
    cfg, gpu = disagg_config_from_row(row(decode_num_workers=3.0))
    assert gpu == "b200" and cfg.concurrency == 24 and cfg.prefill == Layout(2) and cfg.n_gpus == 2 * 2 + 3 * 4
    moe, _ = disagg_config_from_row(row(model_path="deepseek-ai/DeepSeek-R1", prefill_tp_size=1.0,
                                        prefill_attention_dp_size=4.0, prefill_moe_tp_size=1.0,
                                        prefill_moe_ep_size=4.0, decode_tp_size=1.0, decode_attention_dp_size=8.0,
                                        decode_moe_tp_size=1.0, decode_moe_ep_size=8.0))
    assert moe.concurrency == 8 * 8 and moe.decode_ranks == 8
    assert moe.prefill_bmax == 4 * (8192 // 1024)  # four ranks, each packing prompts up to its token budget
    one, _ = disagg_config_from_row(row(isl=1024), prefill_tokens=1)
    assert one.prefill_bmax == 1  # one prompt a step: the row's prefill batch alone


def test_bad_rows_are_named_and_the_others_answered():
    mismatched = row(model_path="deepseek-ai/DeepSeek-R1", decode_moe_tp_size=2.0, decode_moe_ep_size=1.0)
    rows = pd.DataFrame([row(), row(prefill_num_workers=0.0), row(decode_num_workers=np.nan),
                         row(decode_batch_size=0.0), mismatched, row(mode="agg"), row()])
    out = evaluate_disagg(rows)
    err = out["error"].tolist()
    assert err[0] == err[6] == "" and out["pred_ttft_ms"][0] == out["pred_ttft_ms"][6] > 0
    assert "prefill_num_workers=0.0" in err[1]
    assert "decode_num_workers is not given" in err[2]
    assert "decode_batch_size=0.0" in err[3]
    assert "decode_moe_tp_size x decode_moe_ep_size = 2 x 1" in err[4]  # the layout does not match its GPUs
    assert "not a disaggregated row" in err[5]
    assert out["pred_ttft_ms"][1:6].isna().all()
    assert out["pred_tpot_ms"][0] > 0 and out["pred_tokens_per_s_per_gpu"][0] > 0 and out["fits"][0] is True


def test_the_single_forecast_agrees_with_the_row_evaluator():
    cfg, gpu = disagg_config_from_row(row())
    fc = forecast_disagg(cfg, gpu)
    out = evaluate_disagg(pd.DataFrame([row()]))
    assert fc.ttft_ms == pytest.approx(out["pred_ttft_ms"][0]) and fc.tpot_ms == pytest.approx(out["pred_tpot_ms"][0])
    assert fc.ttft_ms >= fc.prefill_ms + fc.transfer_ms and fc.n_gpus == 8
    assert fc.tokens_per_s_per_gpu == pytest.approx(out["pred_tokens_per_s_per_gpu"][0])


def test_a_config_refuses_zero_workers_naming_them():
    with pytest.raises(DisaggError, match="decode_workers"):
        DisaggConfig(get_model("Qwen/Qwen3-32B"), "fp8", 1024, 128, 8, Layout(2), 1, Layout(4), 0)
