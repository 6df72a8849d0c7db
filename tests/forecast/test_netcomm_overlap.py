"""Multi-node collectives and the two-stream overlap of compute and communication."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.forecast.collectives import regime_ms
from tilecast.forecast.comm import CommModel
from tilecast.forecast.netcomm import NetworkComm, Placement, placement
from tilecast.forecast.overlap import COMM, COMPUTE, Schedule, Task, simulate
from tilecast.specs import get_gpu

A100 = get_gpu("a100_sxm4_80gb")


def test_inside_a_node_nvlink_follows_the_nccl_regimes_and_pcie_the_one_node_model():
    net = NetworkComm()
    nbytes = np.array([1e3, 1e6, 1e9])
    l40s, one_node = get_gpu("l40s"), CommModel(floors=True)
    for p in (2, 4, 8):
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            got = net.collective_ms(op, nbytes, A100, Placement(p, p))
            np.testing.assert_allclose(got, regime_ms(op, nbytes, p, A100.link_gbs))
            got = net.collective_ms(op, nbytes, l40s, Placement(p, p))
            np.testing.assert_allclose(got, one_node.collective_ms(op, nbytes, l40s, np.full(3, p)))


def test_across_nodes_the_nics_of_a_node_share_the_ring():
    net = NetworkComm()
    # 64 ranks, 8 per node: min(NVLink, 8 x 25 GB/s) = 200 GB/s before efficiency
    assert net.link_gbs(A100, placement(64, 1, 8)) == min(A100.link_gbs, 8 * 25.0)
    # one rank per node (a replica group): one NIC
    assert net.link_gbs(A100, placement(8, 8, 8)) == 25.0
    assert placement(8, 8, 8) == Placement(8, 1) and placement(16, 2, 8) == Placement(16, 4)
    assert NetworkComm(nic_gbs=50.0).link_gbs(A100, Placement(8, 1)) == 50.0
    assert net.bound(A100, Placement(64, 8)) == "network" and net.bound(A100, Placement(8, 8)) == "link"
    assert float(net.collective_ms("all_gather", 1e9, A100, Placement(1, 1))) == 0.0
    big = net.collective_ms("all_gather", 4e9, A100, Placement(64, 8))
    assert big > net.collective_ms("all_gather", 4e9, A100, Placement(8, 8))  # the NICs are slower than NVLink


@settings(max_examples=50, deadline=None)
@given(p=st.integers(2, 2048), per_node=st.sampled_from([1, 2, 4, 8]), mb=st.floats(0.001, 4096))
def test_time_grows_with_bytes_and_never_beats_the_link(p, per_node, mb):
    net, where = NetworkComm(), Placement(p, per_node)
    small, big = net.collective_ms("all_gather", np.array([mb, 2 * mb]) * 2**20, A100, where)
    assert big > small > 0
    bw_floor = (p - 1) / p * 2 * mb * 2**20 / (A100.link_gbs * 1e9) * 1e3  # never faster than NVLink at 100%
    assert big >= bw_floor


def test_hidden_communication_costs_nothing_exposed_communication_is_attributed():
    s = Schedule()
    ag = s.comm(5.0, "all_gather")
    c1 = s.compute(10.0, "fw", ag)  # waits 5 ms for the gather
    s.comm(3.0, "reduce_scatter", c1)  # runs under the next compute
    s.compute(10.0, "bw", c1)
    t = simulate(s.tasks)
    assert t.end_ms == 25.0 and t.compute_ms == 20.0
    assert t.exposed_ms == {"all_gather": 5.0} and t.comm_ms == {"all_gather": 5.0, "reduce_scatter": 3.0}
    tail = simulate([Task(COMPUTE, 4.0, "bw"), Task(COMM, 6.0, "reduce_scatter", (0,))])
    assert tail.end_ms == 10.0 and tail.exposed_ms["reduce_scatter"] == 6.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(0.0, 50.0), st.booleans()), min_size=1, max_size=30))
def test_the_step_lies_between_the_busier_stream_and_everything_in_series(items):
    tasks = []
    for i, (is_comm, ms, dep) in enumerate(items):
        tasks.append(Task(COMM if is_comm else COMPUTE, ms, "all_gather" if is_comm else "fw",
                          (i - 1,) if dep and i else ()))
    t = simulate(tasks)
    compute = sum(x.ms for x in tasks if x.stream == COMPUTE)
    comm = sum(x.ms for x in tasks if x.stream == COMM)
    assert max(compute, comm) - 1e-9 <= t.end_ms <= compute + comm + 1e-9
    assert t.exposed_total_ms <= comm + 1e-9
    assert abs(t.end_ms - (compute + t.exposed_total_ms)) < 1e-6 or compute == 0


def test_a_hidden_collective_slows_the_compute_it_runs_under_by_the_contention():
    s = Schedule()
    s.comm(5.0, "all_gather")
    s.compute(10.0, "fw")
    t = simulate(s.tasks, contention=0.2)
    # 5 ms beside the gather at 0.8 of the speed (4 ms of work), the other 6 ms alone
    assert t.end_ms == pytest.approx(11.0) and t.contention_ms == {"all_gather": pytest.approx(1.0)}
    assert t.exposed_ms == {} and t.compute_ms == 10.0
    assert simulate(s.tasks).end_ms == 10.0
    with pytest.raises(ValueError, match="contention"):
        simulate(s.tasks, contention=1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(0.0, 50.0), st.booleans()), min_size=1, max_size=30),
       st.floats(0.0, 0.9))
def test_contention_only_lengthens_the_step_and_the_parts_add_up(items, share):
    tasks = [Task(COMM if is_comm else COMPUTE, ms, "all_gather" if is_comm else "fw",
                  (i - 1,) if dep and i else ()) for i, (is_comm, ms, dep) in enumerate(items)]
    free, slowed = simulate(tasks), simulate(tasks, share)
    assert slowed.end_ms >= free.end_ms - 1e-6
    comm = sum(x.ms for x in tasks if x.stream == COMM)
    assert sum(slowed.contention_ms.values()) <= share * comm + 1e-6
    if slowed.compute_ms > 0:
        assert slowed.end_ms == pytest.approx(slowed.compute_ms + slowed.exposed_total_ms
                                              + sum(slowed.contention_ms.values()), abs=1e-6)
