"""Wall-clock schedules: data-parallel overlap and the pipeline (forecast/schedule.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.forecast.schedule import PhaseTotals, overlap_end_ms, schedule, stage_layers


def loop_overlap(compute, comm):
    """The two-stream timeline written out event by event."""
    done = link = 0.0
    for c, a in zip(compute, comm, strict=True):
        done += c
        link = max(link, done) + a
    return max(done, link)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), min_size=1, max_size=60))
def test_overlap_matches_the_event_timeline(events):
    compute, comm = zip(*events, strict=True)
    assert overlap_end_ms(np.array(compute), np.array(comm)) == pytest.approx(loop_overlap(compute, comm),
                                                                              rel=1e-9, abs=1e-9)


def test_overlap_bounds():
    assert overlap_end_ms(np.array([5.0, 5.0]), np.array([1.0, 1.0])) == 11.0  # only the last comm shows
    assert overlap_end_ms(np.array([1.0, 1.0]), np.array([5.0, 5.0])) == 11.0  # link-bound
    assert overlap_end_ms(np.array([]), np.array([])) == 0.0


def totals(fw, bw, acc, comm_bw=None, comm_fw=None, layers=10, degree=1, micro=1):
    sec = ("prologue", "layer", "epilogue")
    z = dict.fromkeys(sec, 0.0)
    return PhaseTotals({"fw": dict(zip(sec, fw, strict=True)), "bw": dict(zip(sec, bw, strict=True)),
                        "acc": dict(zip(sec, acc, strict=True))},
                       {"fw": dict(zip(sec, comm_fw, strict=True)) if comm_fw else z,
                        "bw": dict(zip(sec, comm_bw, strict=True)) if comm_bw else z, "acc": z},
                       layers, degree, micro)


def test_sequential_sums_everything():
    out = schedule(None, totals((1, 10, 2), (2, 20, 4), (0.5, 5, 0.5), comm_bw=(0, 3, 0)))
    assert out == {"fw_ms": 13.0, "bw_ms": 29.0, "acc_ms": 6.0, "e2e_ms": 48.0}
    assert schedule("tp", totals((1, 10, 2), (0, 0, 0), (0, 0, 0)))["e2e_ms"] == 13.0


def test_data_parallel_hides_allreduce_behind_backward():
    hidden = schedule("dp", totals((1, 10, 2), (2, 20, 4), (0, 0, 0), comm_bw=(0, 5, 0), layers=10, degree=4))
    assert hidden["e2e_ms"] == pytest.approx(13 + 26)  # the prologue's backward hides the last all-reduce
    tail = schedule("dp", totals((1, 10, 2), (0, 20, 4), (0, 0, 0), comm_bw=(0, 5, 0), layers=10, degree=4))
    assert tail["e2e_ms"] == pytest.approx(13 + 24 + 0.5)  # nothing after the layers: the last one shows
    exposed = schedule("dp", totals((1, 10, 2), (2, 20, 4), (0, 0, 0), comm_bw=(8, 50, 4), layers=10, degree=4))
    assert exposed["e2e_ms"] == pytest.approx(13 + 4 + 4 + 50 + 8)  # link-bound once the epilogue is done
    assert exposed["e2e_ms"] == pytest.approx(exposed["fw_ms"] + exposed["bw_ms"] + exposed["acc_ms"])


def test_pipeline_one_micro_batch_is_the_papers_formula():
    """docs/method.md §9 with one send-recv per boundary: pro + L layers + epi each way, plus (p-1) sr each way."""
    t = totals((1, 36, 3), (2, 72, 6), (0.1, 3.6, 0.3), comm_fw=(0, 0.3, 0), comm_bw=(0, 0.3, 0), layers=36,
               degree=4)
    out = schedule("pp", t)
    assert out["fw_ms"] == pytest.approx(1 + 36 + 3 + 0.3)
    assert out["bw_ms"] + out["acc_ms"] == pytest.approx(2 + 72 + 6 + 0.3 + 4.0)


def test_pipeline_micro_batches_add_the_slowest_stage():
    t = totals((0, 8, 0), (0, 16, 0), (0, 0, 0), layers=8, degree=4, micro=3)
    out = schedule("pp", t)
    assert out["fw_ms"] == pytest.approx(8 + 2 * 2)
    assert out["bw_ms"] == pytest.approx(16 + 2 * 4)


@pytest.mark.parametrize("layers, stages, expected", [(36, 4, [9] * 4), (10, 4, [3, 3, 2, 2]), (3, 3, [1] * 3)])
def test_stage_layers(layers, stages, expected):
    assert stage_layers(layers, stages).tolist() == expected


def test_unknown_schedule():
    with pytest.raises(ValueError, match="known"):
        schedule("zz", totals((0, 0, 0), (0, 0, 0), (0, 0, 0)))
