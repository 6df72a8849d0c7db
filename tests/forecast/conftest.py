"""Hand-made op frames (the ``OpGraph.to_frame()`` columns) for the aggregation tests."""

import pandas as pd
import pytest

COLUMNS = ["phase", "kind", "op", "b", "m", "n", "k", "h", "count", "flops", "bytes", "mem_per_o", "ops_per_o",
           "section", "name"]
DEFAULTS = dict(phase="fw", b=1, m=0, n=0, k=0, h=0, count=1, flops=0.0, bytes=0.0, mem_per_o=0.0, ops_per_o=0.0,
                section="layer", name="")


def build_op_frame(rows):
    return pd.DataFrame([{**DEFAULTS, **r} for r in rows], columns=COLUMNS)


@pytest.fixture
def op_frame():
    """``op_frame([dict(kind=..., op=..., ...), ...])`` -> an op frame with defaults filled in."""
    return build_op_frame
