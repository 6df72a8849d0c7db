"""The training side's collective model: NCCL's protocol regimes fitted on the shipped one-node NCCL tables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.data import load_aiconfigurator
from tilecast.forecast.collectives import NCCL_REGIMES, fit_op, fit_regimes, nccl_rows, regime_ms, ring_steps
from tilecast.metrics import ape_pct


@pytest.fixture(scope="module")
def rows():
    return nccl_rows(load_aiconfigurator("nccl"))


def test_the_registered_regimes_are_the_fit_of_the_shipped_tables():
    assert fit_regimes(load_aiconfigurator("nccl")) == NCCL_REGIMES


def test_only_nvlink_gpus_are_fitted(rows):
    assert set(rows["gpu"]) == {"a100_sxm4_80gb", "b200", "b300", "gb200"}
    assert (rows["bytes"] > 0).all() and (rows["link_gbs"] >= 300).all()


def test_an_unseen_gpu_is_forecast_within_its_error_band(rows):
    # leave the A100 out: fit on the Blackwell GPUs, forecast the A100's all-gathers and reduce-scatters
    for op in ("all_gather", "reduce_scatter"):
        fit = fit_op(rows.loc[rows["gpu"] != "a100_sxm4_80gb"], op)
        held = rows.loc[(rows["gpu"] == "a100_sxm4_80gb") & (rows["op_name"] == op)]
        ape = ape_pct(regime_ms(op, held["bytes"], held["num_gpus"], held["link_gbs"], {op: fit}),
                      held["latency_ms"].to_numpy(float))
        assert ape.mean() < 15.0, (op, ape.mean())


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(sorted(NCCL_REGIMES)), p=st.integers(2, 4096), mib=st.floats(1e-3, 4096.0),
       bw=st.floats(10.0, 2000.0))
def test_time_grows_with_bytes_and_ranks_and_never_beats_the_link(op, p, mib, bw):
    nbytes = mib * 2**20
    small, big = regime_ms(op, np.array([nbytes, 2 * nbytes]), p, bw)
    assert big > small > 0
    assert regime_ms(op, nbytes, p + 1, bw) >= small - 1e-12
    from tilecast.forecast.comm import COLLECTIVE_FACTORS
    assert small >= COLLECTIVE_FACTORS[op](np.array(float(p))) * nbytes / (bw * 1e9) * 1e3  # the link at 100%
    assert small >= NCCL_REGIMES[op].hop_us * 1e-3 * ring_steps(op, np.array(float(p)))


def test_one_rank_costs_nothing_and_unknown_collectives_are_named():
    assert float(regime_ms("all_gather", 1e9, 1, 300.0)) == 0.0
    assert ring_steps("all_reduce", np.array(8.0)) == 14.0 and ring_steps("all_gather", np.array(8.0)) == 7.0
    with pytest.raises(ValueError, match="unknown collective"):
        regime_ms("broadcast", 1e6, 8, 300.0)


def test_a_ring_across_nodes_pays_the_network_hop_measured_by_vidur_at_every_step():
    from tilecast.data import load_vidur
    from tilecast.forecast.collectives import NETWORK_HOP_US, fit_network_hop_us
    from tilecast.forecast.netcomm import NetworkComm, Placement
    from tilecast.specs import get_gpu

    assert fit_network_hop_us(load_vidur("network")) == NETWORK_HOP_US > NCCL_REGIMES["all_gather"].hop_us
    a100, net = get_gpu("a100_sxm4_80gb"), NetworkComm()
    tiny = 1024.0  # latency-bound: the ring's steps dominate
    inside = float(net.collective_ms("all_gather", tiny, a100, Placement(8, 8)))
    across = float(net.collective_ms("all_gather", tiny, a100, Placement(128, 8)))
    assert across - inside == pytest.approx(1e-3 * (127 * NETWORK_HOP_US - 7 * NCCL_REGIMES["all_gather"].hop_us),
                                            rel=0.05)
