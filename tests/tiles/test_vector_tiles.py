"""Vector tiles: blocks follow the launched grid of profiled softmax / layernorm / elementwise rows."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.data import load_kernels
from tilecast.tiles.gemm import launched_blocks
from tilecast.tiles.vector import vector_waves


@pytest.mark.parametrize("table", ["softmax", "ln"])
def test_blocks_match_grid_for_row_kernels(table):
    rows = pd.concat([load_kernels("train", table), load_kernels("test", table)], ignore_index=True)
    w = vector_waves(rows, np.ones(len(rows)))
    assert (w["blocks"].to_numpy() == launched_blocks(rows)).mean() >= 0.99


def test_blocks_match_grid_for_elementwise_below_32bit_indexing():
    rows = load_kernels("test", "elem")
    small = (rows["B"] * rows["H"] * 4 < 2**31).to_numpy()  # larger tensors are launched in chunks
    rows = rows[small]
    w = vector_waves(rows, np.ones(len(rows)))
    assert (w["blocks"].to_numpy() == launched_blocks(rows)).mean() >= 0.99


@settings(deadline=None)  # timing varies on the shared machine
@given(op=st.sampled_from(["add", "gelu", "softmax", "ln"]), b=st.integers(1, 1 << 16), h=st.integers(1, 1 << 14),
       grow=st.integers(1, 1 << 10), sm=st.integers(1, 160))
def test_vector_waves_monotone_in_rows(op, b, h, grow, sm):
    rows = pd.DataFrame({"OPName": [op, op], "B": [b, b + grow], "H": [h, h]})
    w = vector_waves(rows, np.full(2, float(sm)))
    assert w["waves"].iloc[1] >= w["waves"].iloc[0]
    assert ((w["wave_fill"] > 0) & (w["wave_fill"] <= 1)).all()
