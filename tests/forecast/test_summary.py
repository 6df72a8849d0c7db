"""Aggregation maths on op frames: phases, groups, many cells at once (forecast/summary.py)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecast.forecast import SUMMARY_KEYS, op_latency_ms, stack_frames, summarise, summarise_many, workload_frame
from tilecast.specs import get_gpu


def test_summarise_hand_made_frame(op_frame):
    f = op_frame([
        dict(kind="linear", op="linear", m=8, n=8, k=8, count=3),
        dict(kind="vec", op="gelu", b=8, h=8, count=2),
        dict(kind="vec", op="mul", b=8, h=8, phase="bw", count=4),
        dict(kind="vec", op="add", b=1, h=64, phase="acc", count=5),
        dict(kind="mem", op="mem", h=64, phase="bw"),
        dict(kind="vec", op="ln", b=8, h=8, section="epilogue"),
        dict(kind="bmm", op="bmm", b=2, m=8, n=8, k=8, section="prologue"),
        dict(kind="conv", op="conv", b=1, m=8, n=8, k=8),
    ])
    ms = np.array([1.0, 0.5, 0.25, 0.1, 2.0, 0.3, 0.7, 0.9])
    s = summarise(f, ms)
    assert list(s) == list(SUMMARY_KEYS)
    assert s["fw_ms"] == pytest.approx(3 + 1 + 0.3 + 0.7 + 0.9)
    assert s["bw_ms"] == pytest.approx(1 + 2)
    assert s["acc_ms"] == pytest.approx(0.5)
    assert s["e2e_ms"] == pytest.approx(s["fw_ms"] + s["bw_ms"] + s["acc_ms"])
    assert (s["ms_linear"], s["ms_elementwise"], s["ms_mem"], s["ms_layernorm"], s["ms_bmm"], s["ms_other"]) == \
        pytest.approx((3, 1 + 1 + 0.5, 2, 0.3, 0.7, 0.9))
    assert s["ms_softmax"] == s["ms_comm"] == 0.0
    assert sum(s[f"ms_{g}"] for g in ("bmm", "linear", "elementwise", "softmax", "layernorm", "mem", "comm",
                                      "other")) == pytest.approx(s["e2e_ms"])


def test_summarise_rejects_bad_input(op_frame):
    f = op_frame([dict(kind="vec", op="gelu", b=8, h=8)])
    with pytest.raises(ValueError, match="one value per op row"):
        summarise(f, np.ones(3))
    with pytest.raises(ValueError, match="phase 'xx'"):
        summarise(f.assign(phase="xx"), np.ones(1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["fw", "bw", "acc"]), st.sampled_from(["linear", "vec", "mem"]),
                          st.integers(1, 50), st.floats(0.001, 10)), min_size=1, max_size=30))
def test_sequential_e2e_is_the_count_weighted_sum(op_frame, rows):
    f = op_frame([dict(phase=p, kind=k, op={"linear": "linear", "vec": "add", "mem": "mem"}[k], count=c)
                  for p, k, c, _ in rows])
    ms = np.array([r[3] for r in rows])
    s = summarise(f, ms)
    assert s["e2e_ms"] == pytest.approx(float((ms * f["count"]).sum()))


def test_many_cells_equal_one_at_a_time():
    gpu = get_gpu("a100_sxm4_40gb")
    frames = {("gpt2_large", par): workload_frame("gpt2_large", 4, 512, "training", par)
              for par in (None, "dp4", "tp2", "pp4_2")}
    frames["bert"] = workload_frame("bert_large", 2, 128, "inference", None, fused=True)
    stacked = stack_frames(frames)
    many = summarise_many(stacked, op_latency_ms(stacked, gpu))
    assert list(many.index) == list(frames)
    for key, f in frames.items():
        one = summarise(f, op_latency_ms(f, gpu))
        assert many.loc[[key]].iloc[0].to_dict() == pytest.approx(one)


def test_summarise_many_defaults_to_one_gpu(op_frame):
    f = op_frame([dict(kind="vec", op="gelu", b=8, h=8, count=2)] * 2).assign(cell=["a", "b"])
    out = summarise_many(f, np.array([1.0, 3.0]))
    assert out["e2e_ms"].tolist() == [2.0, 6.0]
    assert isinstance(out, pd.DataFrame)
