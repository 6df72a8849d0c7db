"""Money for people: never exponent notation, two significant figures at least, the scale suffix right."""

import math
import re

from hypothesis import given
from hypothesis import strategies as st

from tilecast.reports.money import is_money_column, usd

_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "B": 1e9}


@given(st.floats(min_value=1e-9, max_value=1e13, allow_nan=False))
def test_usd_reads_back_within_its_rounding(value):
    text = usd(value)
    assert "e" not in text.lower() and text.startswith("$")
    m = re.fullmatch(r"\$([0-9.]+)([kMB]?)", text)
    assert m, text
    back = float(m.group(1)) * _SCALE[m.group(2)]
    digits = len(m.group(1).replace(".", "").lstrip("0"))
    assert digits >= 2 or back == 0 or value >= 9.95e9  # two significant figures (B: as many as there are)
    assert math.isclose(back, value, rel_tol=0.06)  # $1.2k for 1,234: within the last shown digit


def test_money_columns():
    assert all(is_money_column(c) for c in ("usd_per_month", "cost_per_1m_tokens_usd", "usd_to_train",
                                            "cost_per_step_usd", "usd_per_gpu_hour"))
    assert not any(is_money_column(c) for c in ("e2e_ms", "gpu", "tokens_per_s", "margin_pct"))
