"""Layouts: tp x attention-dp GPUs, experts over ep x moe_tp; read from serving rows; named errors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecast.specs import get_model
from tilecast.specs.layout import Layout, LayoutError, layout_from_row, parse_layout, row_layouts

POWERS = st.sampled_from([1, 2, 4, 8, 16, 32, 64])


@given(tp=POWERS, dp=POWERS, ep=POWERS)
def test_moe_tp_times_ep_is_the_gpu_count(tp, dp, ep):
    if (tp * dp) % ep:
        with pytest.raises(LayoutError, match="does not divide"):
            Layout(tp, dp, ep)
        return
    layout = Layout(tp, dp, ep)
    assert layout.moe_tp * layout.ep == layout.gpus == tp * dp
    assert parse_layout(layout.tag) == layout


@given(batch=st.integers(1, 4096), dp=POWERS)
def test_local_batch_covers_the_batch(batch, dp):
    local = Layout(1, dp).local_batch(batch)
    assert local * dp >= batch and (local - 1) * dp < batch and local == math.ceil(batch / dp)


@given(ep=st.integers(1, 600))
def test_ep_must_divide_the_experts(ep):
    m = get_model("deepseek_v3")
    gpus = ep
    if m.moe.experts % ep:
        try:
            Layout(1, gpus, ep).check(m)
        except LayoutError as exc:
            assert "ep" in str(exc)
        else:
            raise AssertionError(f"ep={ep} accepted for 256 experts")
    else:
        assert Layout(1, gpus, ep).check(m).ep == ep


@pytest.mark.parametrize(("layout", "key", "gpus", "words"), [
    (Layout(1, 6, 6), "deepseek_v3", None, ("ep=6", "256 experts")),
    (Layout(3), "deepseek_v3", None, ("tp=3", "128 attention heads")),
    (Layout(4, 2), "deepseek_v3", 4, ("4 x 2 = 8 GPUs", "4 GPUs")),
    (Layout(1, 2, 2), "llama31_70b", None, ("ep=2", "dense")),
    (Layout(12), "minimax_m25", None, ("tp=12", "8 KV heads")),
    (Layout(1, 128, 1), "gpt_oss_120b", None, ("moe_tp=128", "2880")),
])
def test_layouts_that_cannot_run_are_named(layout, key, gpus, words):
    with pytest.raises(LayoutError) as info:
        layout.check(get_model(key), gpus)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("tag", ["tp", "ep0", "tp4x", "pp2", "tp0"])
def test_bad_tags(tag):
    with pytest.raises(LayoutError):
        parse_layout(tag)


def _row(**kw):
    base = {"mode": "agg", "tp_size": 8.0, "attention_dp_size": 1.0, "moe_tp_size": 8.0, "moe_ep_size": 1.0,
            "pp_size": 1.0}
    return {**base, **kw}


def test_rows_spell_layouts():
    m = get_model("deepseek_r1")
    assert layout_from_row(_row(), m) == Layout(8)
    assert layout_from_row(_row(moe_tp_size=1.0, moe_ep_size=8.0), m) == Layout(8, 1, 8)
    assert layout_from_row(_row(tp_size=1.0, attention_dp_size=8.0, moe_tp_size=1.0, moe_ep_size=8.0), m) == \
        Layout(1, 8, 8)
    assert layout_from_row(_row(attention_dp_size=float("nan"), moe_tp_size=2.0, moe_ep_size=4.0), m) == \
        Layout(8, 1, 4)
    dense = get_model("qwen3_32b")  # the data spells 0 / NaN / mismatched moe sizes on dense rows: ignored
    assert layout_from_row(_row(tp_size=2.0, attention_dp_size=0.0, moe_tp_size=0.0, moe_ep_size=0.0), dense) == \
        Layout(2)


def test_nullable_integer_rows_read_missing_sizes_as_unset():
    import pandas as pd

    row = pd.DataFrame([_row(attention_dp_size=None, moe_tp_size=1.0, moe_ep_size=8.0)]).astype(
        {c: "Int64" for c in ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "pp_size")}).iloc[0]
    assert row["attention_dp_size"] is pd.NA
    assert layout_from_row(row, get_model("deepseek_r1")) == Layout(8, 1, 8)


def test_wide_rows_read_as_attention_dp_and_wide_ep():
    m = get_model("deepseek_r1")
    assert layout_from_row(_row(tp_size=72.0, moe_tp_size=72.0), m) == Layout(1, 72, 72, 288)
    assert layout_from_row(_row(tp_size=36.0, moe_tp_size=36.0, moe_ep_size=float("nan")), m) == \
        Layout(1, 36, 36, 288)
    assert layout_from_row(_row(tp_size=32.0, moe_tp_size=32.0), m) == Layout(1, 32, 32)  # 32 divides 256
    assert layout_from_row(_row(tp_size=16.0, moe_tp_size=4.0, moe_ep_size=4.0), m) == Layout(16, 1, 4)
    assert layout_from_row(_row(), m) == Layout(8)  # one node: as spelled


@given(ep=st.integers(1, 300))
def test_redundant_slots_hold_every_expert_evenly(ep):
    m = get_model("deepseek_v3")
    slots = -(-m.moe.experts // ep) * ep
    lay = parse_layout(f"tp1dp{ep}ep{ep}s{slots}") if slots != m.moe.experts else Layout(1, ep, ep)
    assert lay.check(m).expert_slots(m.moe.experts) % ep == 0
    assert lay.expert_slots(m.moe.experts) >= m.moe.experts
    assert parse_layout(lay.tag) == lay


@pytest.mark.parametrize(("tag", "words"), [("tp1dp8ep8s104", ("104 expert slots", "fewer than the 256")),
                                            ("tp1dp8ep8s260", ("260 expert slots", "multiple of ep=8"))])
def test_bad_slots_are_named(tag, words):
    with pytest.raises(LayoutError) as info:
        parse_layout(tag).check(get_model("deepseek_v3"))
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(("row", "words"), [
    (_row(moe_tp_size=2.0, moe_ep_size=2.0), ("2 x 2 = 4", "8 x 1 = 8")),
    (_row(pp_size=2.0), ("pp_size=2",)),
    (_row(tp_size=float("nan")), ("tp_size is not set",)),
    (_row(tp_size=2.5), ("tp_size=2.5",)),
])
def test_bad_rows_are_named(row, words):
    with pytest.raises(LayoutError) as info:
        layout_from_row(row, get_model("deepseek_r1"))
    for word in words:
        assert word in str(info.value)


def test_disaggregated_rows_have_two_pools():
    row = {"mode": "disagg", **{f"prefill_{k}": v for k, v in _row(tp_size=1.0, attention_dp_size=4.0,
                                                                    moe_tp_size=1.0, moe_ep_size=4.0).items()},
           **{f"decode_{k}": v for k, v in _row(tp_size=1.0, attention_dp_size=32.0, moe_tp_size=1.0,
                                                moe_ep_size=32.0).items()},
           "prefill_num_workers": 4.0, "decode_num_workers": 1.0}
    got = row_layouts(row, get_model("deepseek_v3"))
    assert got.disaggregated and got.prefill == Layout(1, 4, 4) and got.decode == Layout(1, 32, 32)
    assert (got.prefill_workers, got.decode_workers) == (4, 1)
    assert row_layouts(_row(), get_model("deepseek_v3")).agg == Layout(8)
