"""The serving search at scale (planning/engine_search.py): every candidate is the forecast ``predict.py mode=serve
engine=...`` makes for that one configuration; memory first; the dense concurrency grid; MoE layouts; the decision
over the rows that can be kept is the decision over all."""

import numpy as np
import pandas as pd
import pytest

from tilecast.forecast.intervals import record_interval
from tilecast.forecast.serve import ServeWorkload, forecast_serve
from tilecast.planning.engine_search import concurrency_grid, engine_candidates, shared_predictor
from tilecast.planning.layouts import ServeSearch
from tilecast.planning.pareto import pareto_mask
from tilecast.planning.questions import ServeQuestion
from tilecast.planning.result import fitting, keep, rank_order
from tilecast.planning.serve_plan import decide, statuses, why
from tilecast.scoring.predictors import PredictorSource, worker_predictor
from tilecast.scoring.pricing import load_pricing
from tilecast.serving.policy import engine_policy
from tilecast.specs.layout import Layout

ROOF = worker_predictor(PredictorSource("roofline"))


@pytest.fixture(scope="module")
def pricing():
    from tilecast.cli import conf_defaults

    return load_pricing(conf_defaults("plan")["pricing"])


def _search(question, search, pricing):
    rows, info, layouts = engine_candidates(question, question.gpus, search, ROOF, pricing)
    return rows, info, layouts


@pytest.fixture(scope="module")
def dense8b(pricing):
    q = ServeQuestion.of("llama31_8b", 1024, 256, ttft_ms=2000, tpot_ms=50, rate=10.0, gpus=("l4", "h100_sxm_80gb"),
                         dtypes=("bf16", "fp8"))
    search = ServeSearch(tp=(1, 2, 3), concurrency=(1, 7, 64, 300))
    return q, search, *_search(q, search, pricing)


def test_every_candidate_is_the_one_configuration_forecast(dense8b):
    q, search, rows, info, _ = dense8b
    assert len(rows) == 3 * 2 * 2 * 3 * 4 and info["engines"] == ["vllm", "sglang", "trtllm"]
    done = rows.loc[rows["ttft_ms"].notna()]
    assert len(done) > 30
    for r in done.sample(12, random_state=0).to_dict("records"):
        sw = ServeWorkload(q.model, r["dtype"], int(r["tp"]), q.isl, q.osl, int(r["concurrency"]))
        fc = forecast_serve(sw, r["gpu"], ROOF, engine=r["engine"])
        assert r["ttft_ms"] == pytest.approx(fc.ttft_ms, rel=1e-9)
        assert r["tpot_ms"] == pytest.approx(fc.tpot_ms, rel=1e-9)
        assert r["tokens_per_s_per_gpu"] == pytest.approx(fc.tokens_per_s_per_gpu, rel=1e-9)
        assert bool(r["fits"]) == fc.memory.fits and r["max_concurrency"] == fc.max_concurrency
        hi = record_interval(fc.to_dict(), r["gpu"])
        assert r["ttft_hi_ms"] == pytest.approx(hi["ttft_hi_ms"], rel=1e-9)
        assert r["tpot_hi_ms"] == pytest.approx(hi["tpot_hi_ms"], rel=1e-9)


def test_what_cannot_run_says_why_and_what_does_not_fit_is_not_forecast(dense8b):
    q, _, rows, _, _ = dense8b
    sized = statuses(rows.copy(), q)
    tp3 = sized.loc[sized["tp"] == 3]
    assert (tp3["status"] == "failed").all() and tp3["error"].str.contains("tp=3 does not divide").all()
    fp8_l4 = sized.loc[(sized["gpu"] == "l4") & (sized["dtype"] == "fp8")]
    assert fp8_l4["status"].ne("not supported").all()  # Ada has fp8
    big = sized.loc[(sized["gpu"] == "l4") & (sized["tp"] == 1) & (sized["concurrency"] == 300)]
    assert (big["status"] == "does not fit").all() and big["ttft_ms"].isna().all()
    assert big["error"].isna().all() and (big["mem_required_gib"] > 20).all()


def test_the_dense_grid_stops_at_the_engines_running_cap():
    search = ServeSearch(max_concurrency=5000)
    assert search.concurrency == "dense"
    grid = concurrency_grid(search, engine_policy("trtllm"))
    assert grid[0] == 1 and len(grid) == engine_policy("trtllm").max_num_seqs and np.all(np.diff(grid) == 1)
    assert len(concurrency_grid(ServeSearch(), engine_policy("vllm"))) == 1024
    assert concurrency_grid(ServeSearch(concurrency=(1, 4096)), engine_policy("vllm")).tolist() == [1]


def test_moe_layouts_are_searched_as_predict_runs_them(pricing):
    q = ServeQuestion.of("qwen3_30b_a3b", 512, 128, ttft_ms=2000, tpot_ms=50, rate=10.0, gpus=("h100_sxm_80gb",),
                         dtypes=("bf16",))
    search = ServeSearch(tp=(1, 2), ep=(1, 2), attention_dp=(1, 2), concurrency=(8,), engines=("sglang",))
    rows, _, layouts = _search(q, search, pricing)
    assert set(rows["layout"]) == {"tp1", "tp1 ep2", "tp1 adp2", "tp1 ep2 adp2", "tp2", "tp2 ep2", "tp2 adp2",
                                   "tp2 ep2 adp2"}
    bad = rows.loc[rows["layout"] == "tp1 ep2"]  # ep 2 does not divide the one GPU of tp x dp
    assert bad["error"].str.contains("does not divide").all()
    r = rows.loc[rows["layout"] == "tp2 ep2 adp2"].iloc[0]
    fc = forecast_serve(ServeWorkload(q.model, "bf16", 2, 512, 128, 8, layout=Layout(2, 2, 2)), "h100_sxm_80gb",
                        ROOF, engine="sglang")
    assert r["ttft_ms"] == pytest.approx(fc.ttft_ms, rel=1e-9) and r["tpot_ms"] == pytest.approx(fc.tpot_ms, rel=1e-9)
    assert r["gpus_per_replica"] == 4


def test_the_decision_over_the_kept_rows_is_the_decision_over_all(dense8b):
    q, _, rows, _, _ = dense8b
    sized = statuses(rows.copy(), q)
    feasible, kept, pareto = decide(sized, q)
    # the reference: every row ranked and kept as before the pruning
    gpus = sized["n_gpus"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    ranked = sized.iloc[rank_order(sized, sized["usd_per_month"].to_numpy(float), gpus,
                                   -sized["margin_pct"].to_numpy(float))]
    fit = fitting(ranked)
    with np.errstate(divide="ignore"):
        front = pareto_mask(np.where(fit, 1 / ranked["tokens_per_s_per_gpu"].to_numpy(float), np.nan),
                            np.where(fit, 1 / ranked["tokens_per_s_per_user"].to_numpy(float), np.nan))
    ref = keep(ranked, front, ["engine", "gpu", "dtype", "layout"], lambda k, p: why(k, q, p), "tokens_per_s_per_user")
    assert feasible == ref[0]
    pd.testing.assert_frame_equal(kept, ref[1])
    pd.testing.assert_frame_equal(pareto, ref[2])


def test_the_shared_kernel_forecasts_answer_each_set_of_rows_once_in_its_order():
    calls = []

    def base(family, rows, gpu):
        calls.append(family)
        return rows["m"].to_numpy(float) * 2

    once = shared_predictor(base)
    rows = pd.DataFrame({"m": [1, 2, 3], "n": [4, 5, 6]})
    assert once("linear", rows, None).tolist() == [2, 4, 6]
    assert once("linear", rows.copy(), None).tolist() == [2, 4, 6] and calls == ["linear"]
    assert once("linear", rows.iloc[::-1], None).tolist() == [6, 4, 2] and len(calls) == 2
    assert once("bmm", rows, None).tolist() == [2, 4, 6] and len(calls) == 3
