"""The iteration-level simulation's properties (hypothesis) and the closed-form steady state against it."""

import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.serving.policy import engine_policy
from tilecast.serving.simulate import simulate
from tilecast.serving.steady import steady_state
from tilecast.serving.step import step_costs
from tilecast.specs import get_gpu, get_model

#: the steady state's agreement with the simulation over the grid below (outputs of 400 tokens, +-10%: the
#: replacements spread out as in measured runs; stated in docs/method.md)
TTFT_TOLERANCE, TPOT_TOLERANCE = 0.25, 0.10


@functools.cache
def cost(engine: str):
    return step_costs(get_model("llama31_8b"), "bf16", None, [get_gpu("b200")], None, engine_policy(engine))["b200"]


@settings(max_examples=12, deadline=None)
@given(engine=st.sampled_from(["vllm", "sglang", "trtllm"]), isl=st.integers(16, 6000), osl=st.integers(2, 40),
       c=st.integers(1, 24))
def test_ttft_covers_the_prefill_and_grows_with_concurrency(engine, isl, osl, c):
    sc = cost(engine)
    own = float(sc.gpu_ms(0, 0, isl, sc.prefill_attn_ms(np.array(0), np.array(isl))))
    one = simulate(sc, isl, osl, c)
    assert one.ttft_ms >= own * (1 - 1e-9)
    # monotone for fixed output lengths (with the +-10% spread, in expectation only: a draw may lower it a little)
    fixed = simulate(sc, isl, osl, c, osl_spread=0.0)
    assert simulate(sc, isl, osl, 2 * c, osl_spread=0.0).ttft_ms >= fixed.ttft_ms * (1 - 1e-9)


@settings(max_examples=8, deadline=None)
@given(engine=st.sampled_from(["vllm", "sglang", "trtllm"]), isl=st.integers(64, 4096), osl=st.integers(16, 64),
       c=st.integers(2, 16))
def test_littles_law_in_the_steady_part(engine, isl, osl, c):
    res = simulate(cost(engine), isl, osl, c, n_requests=30 * c)
    order = np.argsort(res.finish_ms)
    lo, hi = 5 * c, 25 * c  # completions after the first waves, before the drain
    rate = (hi - lo) / ((res.finish_ms[order[hi]] - res.finish_ms[order[lo]]) / 1e3)
    done = order[lo + 1: hi + 1]
    latency = np.mean(res.finish_ms[done] - res.arrival_ms[done]) / 1e3
    assert rate * latency == pytest.approx(c, rel=0.1)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_the_steady_state_agrees_with_the_simulation(engine):
    sc = cost(engine)
    for isl in (512, 4096):
        for c in (1, 8, 48):
            sim = simulate(sc, isl, 400, c)
            st_ = steady_state(sc, isl, 400, c)
            assert float(st_["ttft_ms"]) == pytest.approx(sim.ttft_ms, rel=TTFT_TOLERANCE), (isl, c)
            assert float(st_["tpot_ms"]) == pytest.approx(sim.tpot_ms, rel=TPOT_TOLERANCE), (isl, c)


def test_a_full_kv_cache_queues_requests():
    sc = cost("vllm")
    free = steady_state(sc, 1024, 64, 32)
    tight = steady_state(sc, 1024, 64, 32, kv_tokens=8 * 1024)
    assert float(tight["running"]) == 8 and float(tight["ttft_ms"]) > 2 * float(free["ttft_ms"])
    assert simulate(sc, 1024, 64, 16, kv_tokens=4 * 1100).ttft_ms > simulate(sc, 1024, 64, 16).ttft_ms


@given(st.integers(1, 64), st.sampled_from([2, 4, 8]))
@settings(max_examples=15)
def test_attention_dp_ranks_each_run_their_share(c_rank, dp):
    """Under attention data parallelism each of the ``dp`` ranks schedules ``c / dp`` requests: the replica's TTFT
    and TPOT are one rank's at its share, its throughput ``dp`` times one rank's."""
    base = cost("vllm")
    wide = dataclasses.replace(base, dp=dp)
    one = steady_state(base, 1024, 256, c_rank)
    all_ranks = steady_state(wide, 1024, 256, c_rank * dp)
    for key in ("ttft_ms", "tpot_ms"):
        assert np.allclose(all_ranks[key], one[key])
    assert np.allclose(all_ranks["throughput_rps"], dp * one["throughput_rps"])


def test_the_grid_holds_every_ranks_share():
    """A layout's step-cost grid is built per attention rank: its graphs carry ``dp`` times the batch."""
    from tilecast.serving.step import grid_keys
    one, eight = grid_keys(4096), grid_keys(4096, dp=8)
    assert (eight["batch"] == 8 * one["batch"]).all()
    assert (eight[["seq_len", "kv_len"]] == one[["seq_len", "kv_len"]]).all().all()
