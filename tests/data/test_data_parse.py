"""Cell parsers and tag parsing: exact round trips, reasons people can act on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecast.data import parse_tag
from tilecast.data.columns import DEVICE, DIM, LATENCY, CellError, ColumnType, device_name


@given(st.floats(min_value=1e-12, max_value=1e12, allow_nan=False))
def test_latency_round_trips_exactly(x: float) -> None:
    assert LATENCY.cell("Latency", repr(x)) == x


@given(st.integers(min_value=0, max_value=2**53))
def test_dims_accept_non_negative_integers(n: int) -> None:
    assert DIM.cell("B", str(n)) == n
    assert DIM.cell("B", f"{n}.0") == n  # integral floats are integers


@pytest.mark.parametrize(("ctype", "text", "reason"), [
    (LATENCY, "fast", "col: not a number 'fast'"),
    (LATENCY, "0", "col: must be positive, got '0'"),
    (LATENCY, "nan", "col: not a finite number 'nan'"),
    (LATENCY, "", "col: empty"),
    (DIM, "-3", "col: must be non-negative, got '-3'"),
    (DIM, "2.5", "col: not an integer '2.5'"),
])
def test_bad_cells_name_column_and_value(ctype: ColumnType, text: str, reason: str) -> None:
    with pytest.raises(CellError) as exc:
        ctype.cell("col", text)
    assert str(exc.value) == reason


def test_devices_must_be_exact_catalog_names() -> None:
    assert DEVICE.cell("Device", "NVIDIA A100 80GB PCIe") == "NVIDIA A100 80GB PCIe"
    assert device_name("NVIDIA_A100_80GB_PCIe") == "NVIDIA A100 80GB PCIe"  # label directory form
    with pytest.raises(CellError, match="the exact device name is 'NVIDIA L4'"):
        DEVICE.cell("Device", "NVIDIA_L4")
    with pytest.raises(CellError, match="a catalog key, not a device name"):
        DEVICE.cell("Device", "l4")
    with pytest.raises(CellError, match="Device: unknown device 'Tesla K80'"):
        DEVICE.cell("Device", "Tesla K80")


def test_parse_tag() -> None:
    t = parse_tag("gpt3_xl-train-2048-4-pp4_4")
    assert (t.model, t.model_raw, t.mode, t.seq_len, t.batch, t.variant) == (
        "gpt3_xl", "gpt3_xl", "training", 2048, 4, "pp4_4")
    s = parse_tag("switch4-inf-512-1")
    assert (s.model, s.model_raw, s.mode, s.variant) == ("switch4", "switch4", "inference", "plain")
    assert parse_tag("bert_large-inf-512-8-fusion").variant == "fusion"
    for bad, msg in [("bert_large-inf-512", "does not match"), ("bert_large-eval-512-8", "mode 'eval'"),
                     ("bert_large-inf-512-0", "batch '0'")]:
        with pytest.raises(ValueError, match=msg):
            parse_tag(bad)
