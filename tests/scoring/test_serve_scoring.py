"""A matrix's serve section through the engine on a real (in-process) Dask cluster: the same numbers as
``forecast_serve`` cell for cell, errors per cell, and the serve table's schema."""

import numpy as np
import pandas as pd
import pytest

from tilecast.forecast.serve import ServeWorkload, forecast_serve
from tilecast.scoring.engine import score_grid
from tilecast.scoring.matrix import SERVE_KEYS, MatrixError, expand, expand_serve, load_matrix
from tilecast.scoring.predictors import PredictorSource
from tilecast.scoring.pricing import load_pricing
from tilecast.scoring.schema import SERVE_COLUMNS, conform_serve
from tilecast.scoring.serve import ROLES

BASE = {"models": ["gpt2_large"], "gpus": ["l4"], "batch_sizes": [1], "seq_lens": [512], "modes": ["inference"]}
SERVE = {"models": ["llama31_8b", "llama31_70b"], "gpus": ["h100_sxm_80gb", "a100_sxm4_80gb"],
         "dtypes": ["bf16", "fp8"], "tp": [1, 3, 4], "isl_osl": [[1024, 1024], [8192, 1024]],
         "concurrency": [1, 32]}


@pytest.fixture(scope="module")
def scored(compose_cfg, thread_client):
    pricing = load_pricing(compose_cfg("score")["pricing"])
    matrix = load_matrix({**BASE, "serve": SERVE})
    serve = expand_serve(matrix)
    out = score_grid(expand(matrix), thread_client, PredictorSource("roofline"), pricing, serve_cells=serve)
    return serve, out


def test_every_serve_cell_once_in_input_order(scored):
    serve, out = scored
    assert len(serve) == 2 * 2 * 2 * 3 * 2 * 2 and out.stats.serve_cells == len(serve)
    pd.testing.assert_frame_equal(out.serve[list(SERVE_KEYS)].reset_index(drop=True), serve[list(SERVE_KEYS)])
    assert len(out.table) == 1 and out.table["error"].isna().all()  # the plain cell is scored beside them
    table = conform_serve(out.serve.assign(run_date="2026-12-01"))
    assert tuple(table.schema.names) == SERVE_COLUMNS


def test_a_mixture_of_experts_cell_is_scored_as_forecast_serve_prices_it(compose_cfg, thread_client):
    pricing = load_pricing(compose_cfg("score")["pricing"])
    matrix = load_matrix({**BASE, "serve": {"models": ["qwen3_30b_a3b"], "gpus": ["h100_sxm_80gb"], "dtypes": ["fp8"],
                                            "tp": [2], "isl_osl": [[1024, 256]], "concurrency": [16]}})
    out = score_grid(expand(matrix), thread_client, PredictorSource("roofline"), pricing,
                     serve_cells=expand_serve(matrix)).serve
    assert len(out) == 1 and out["error"].isna().all() and bool(out["fits"].iloc[0])
    want = forecast_serve(ServeWorkload("qwen3_30b_a3b", "fp8", 2, 1024, 256, 16), "h100_sxm_80gb").to_dict()
    for col in ("ttft_ms", "tpot_ms", "tokens_per_s_per_gpu", "weights_gib", "kv_cache_gib"):
        assert out[col].iloc[0] == pytest.approx(want[col], rel=1e-9), col
    assert out["cost_per_1m_output_tokens_usd"].iloc[0] > 0


def test_the_scorer_agrees_with_forecast_serve(scored):
    _, out = scored
    ok = out.serve.loc[out.serve["error"].isna()]
    assert len(ok) == 2 * 2 * 2 * 2 * 2 + 2 * 2 * 2 * 2  # tp 1 and 4; fp8 only on the H100
    for row in ok.sample(8, random_state=1).itertuples():
        fc = forecast_serve(ServeWorkload(row.model, row.dtype, row.tp, row.isl, row.osl, row.concurrency), row.gpu)
        want = fc.to_dict()
        for col in ("ttft_ms", "tpot_ms", "prefill_ms", "decode_step_ms", "request_latency_ms",
                    "tokens_per_s_per_gpu", "tokens_per_s_per_user", "mem_required_gib", "kv_cache_gib",
                    "weights_gib"):
            if want[col] is None:  # no throughput where the configuration does not fit
                assert not want["fits"] and np.isnan(getattr(row, col)), col
                continue
            assert getattr(row, col) == pytest.approx(want[col], rel=1e-9), col
        assert row.fits == want["fits"] and row.max_concurrency == want["max_concurrency"]
        if not want["fits"]:
            assert np.isnan(row.cost_per_1m_output_tokens_usd)
            continue
        cost = row.usd_per_gpu_hour / (want["tokens_per_s_per_gpu"] * 3600) * 1e6
        assert row.cost_per_1m_output_tokens_usd == pytest.approx(cost)


def test_errors_stay_with_their_cells(scored):
    _, out = scored
    sv = out.serve
    bad_tp = sv["tp"] == 3
    assert sv.loc[bad_tp, "error"].str.contains("tp=3 does not divide").all()
    fp8_a100 = (sv["dtype"] == "fp8") & (sv["gpu"] == "a100_sxm4_80gb") & ~bad_tp
    assert sv.loc[fp8_a100, "error"].str.contains("fp8 is not supported on GPU a100_sxm4_80gb").all()
    failed = sv["error"].notna()
    assert sv.loc[failed, ["ttft_ms", "tpot_ms", "tokens_per_s_per_gpu"]].isna().all().all()
    fits = sv["fits"].fillna(True).astype(bool)
    assert np.isfinite(sv.loc[~failed, ["ttft_ms", "tpot_ms"]]).all().all()
    assert np.isfinite(sv.loc[~failed & fits, "cost_per_1m_output_tokens_usd"]).all()
    # a 70B model in bf16 does not fit one 80 GB GPU: the latencies stay, with the memory it needs; no throughput
    # and no cost (it cannot run)
    big = sv.loc[~failed & (sv["model"] == "llama31_70b") & (sv["tp"] == 1) & (sv["dtype"] == "bf16")]
    assert len(big) and (~big["fits"]).all() and (big["mem_required_gib"] > 130).all()
    assert (big["max_concurrency"] == 0).all() and big["ttft_ms"].notna().all()
    assert big[["tokens_per_s_per_gpu", "cost_per_1m_output_tokens_usd"]].isna().all().all()


def test_step_cost_grids_are_shared_between_gpus_and_cells(scored):
    serve, out = scored
    valid = serve.loc[serve["tp"] != 3]
    # one step-cost grid per (model, dtype, tp): no GPU, isl, osl or concurrency in the key
    configs = valid[["model", "dtype", "tp"]].drop_duplicates()
    assert out.stats.graphs == 1 + len(configs) * len(ROLES)
    assert (out.serve["engine"] == "vllm").all()


@pytest.mark.parametrize("serve, message", [
    ({**SERVE, "models": ["gpt2_large"]}, "serving is modelled for the decoder families llama, moe"),
    ({**SERVE, "dtypes": ["fp32"]}, "'serve.dtypes' has invalid value 'fp32'"),
    ({**SERVE, "isl_osl": [[1024]]}, "expected [isl, osl] pairs"),
    ({**SERVE, "concurrency": [0]}, "'serve.concurrency' has invalid value 0"),
    ({**SERVE, "batch": [1]}, "serve section has unknown field 'batch'"),
    ({**SERVE, "exclude": [{"batch": 1}]}, "serve.exclude[0] names unknown key 'batch'"),
    ({k: v for k, v in SERVE.items() if k != "concurrency"}, "serve section misses field 'concurrency'"),
])
def test_bad_serve_sections_are_named(serve, message):
    with pytest.raises(MatrixError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_matrix({**BASE, "serve": serve})


def test_serve_exclusions_and_context_limit():
    matrix = load_matrix({**BASE, "serve": {**SERVE, "models": ["llama2_7b", "llama31_8b"],
                                            "exclude": [{"dtype": "fp8", "tp": [3, 4]}]}})
    cells = expand_serve(matrix)
    assert not ((cells["dtype"] == "fp8") & cells["tp"].isin([3, 4])).any()
    # llama2_7b has 4096 positions: its 8192 + 1024 cells are dropped like a too-long sequence
    assert set(cells.loc[cells["model"] == "llama2_7b", "isl"]) == {1024}
    assert set(cells.loc[cells["model"] == "llama31_8b", "isl"]) == {1024, 8192}
    assert (cells["n_gpus"] == cells["tp"]).all()


def test_every_forecast_carries_its_interval(scored):
    _, out = scored
    sv, cells = out.serve, out.table
    ok = sv["error"].isna()
    for key in ("ttft", "tpot"):
        lo, mid, hi = (sv.loc[ok, c] for c in (f"{key}_lo_ms", f"{key}_ms", f"{key}_hi_ms"))
        assert ((lo < mid) & (mid < hi)).all(), key
        assert sv.loc[~ok, [f"{key}_lo_ms", f"{key}_hi_ms"]].isna().all().all()
    assert sv.loc[ok, "interval_note"].str.startswith("80% interval").all()
    assert ((cells["pred_lo_ms"] < cells["e2e_ms"]) & (cells["e2e_ms"] < cells["pred_hi_ms"])).all()
