"""GEMM tile maths: kernel-name parsing, blocks vs the launched grid, waves monotone in size."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.data import load_kernels
from tilecast.tiles.gemm import gemm_waves, launched_blocks, output_tiles, parse_kernel_tiles, profiled_tiles


def test_parse_kernel_names():
    names = pd.Series(["ampere_sgemm_128x64_tn", "volta_sgemm_32x32_sliced1x4_nn",
                       "void cutlass::Kernel<cutlass_80_simt_sgemm_256x128_8x4_tn_align1>(...)",
                       "sgemm_128x128x8_NT_vec", "void at::native::vectorized_elementwise_kernel<4>", None])
    t = parse_kernel_tiles(names)
    assert t["tile_k"].tolist()[:4] == [128, 32, 256, 128]
    assert t["tile_m"].tolist()[:4] == [64, 32, 128, 128]
    assert t["sliced"].tolist() == [0, 1, 0, 0, 0, 0]
    assert t["tile_k"].iloc[4:].isna().all()


@pytest.fixture(scope="module")
def bmm_rows():
    return pd.concat([load_kernels("train", "bmm"), load_kernels("test", "bmm")], ignore_index=True)


def test_blocks_match_launched_grid_for_bmm(bmm_rows):
    tiles = profiled_tiles(bmm_rows)
    ok = tiles["tile_k"].notna().to_numpy()
    assert ok.mean() > 0.99
    rows, tiles = bmm_rows[ok], tiles[ok]
    blocks = output_tiles(rows["B"].to_numpy(float), rows["M"].to_numpy(float), rows["K"].to_numpy(float),
                          tiles["tile_k"].to_numpy(), tiles["tile_m"].to_numpy())
    match = blocks == launched_blocks(rows)
    assert match.mean() >= 0.99, f"only {100 * match.mean():.2f}% of bmm rows match their grid"


def test_linear_grid_is_a_whole_split_of_the_output_tiles():
    rows = pd.concat([load_kernels("train", "linear"), load_kernels("test", "linear")], ignore_index=True)
    tiles = profiled_tiles(rows)
    ok = tiles["tile_k"].notna().to_numpy()
    rows, tiles = rows[ok], tiles[ok]
    base = output_tiles(rows["B"].to_numpy(float), rows["M"].to_numpy(float), rows["K"].to_numpy(float),
                        tiles["tile_k"].to_numpy(), tiles["tile_m"].to_numpy())
    exact = base * tiles["split"].to_numpy() == launched_blocks(rows)
    assert exact.mean() >= 0.99
    assert (tiles["split"] > 1).mean() > 0.2  # split-K is common in linear kernels


_dims = st.integers(1, 1 << 15)


@settings(deadline=None)  # timing varies on the shared machine
@given(b=st.integers(1, 512), m=_dims, n=_dims, k=_dims, grow=st.integers(1, 1 << 12), which=st.sampled_from("BMK"),
       tk=st.sampled_from([32, 64, 128, 256]), tm=st.sampled_from([32, 64, 128]), split=st.integers(1, 8),
       sm=st.integers(1, 160))
def test_waves_monotone_in_size(b, m, n, k, grow, which, tk, tm, split, sm):
    small = {"B": b, "M": m, "N": n, "K": k}
    big = {**small, which: small[which] + grow}
    rows = pd.DataFrame([small, big])
    tiles = pd.DataFrame({"tile_k": [tk, tk], "tile_m": [tm, tm], "split": [split, split], "sliced": [0, 0]})
    w = gemm_waves(rows, tiles, np.full(2, float(sm)))
    assert w["waves"].iloc[1] >= w["waves"].iloc[0]
    assert w["blocks"].iloc[1] >= w["blocks"].iloc[0]
    assert ((w["wave_fill"] > 0) & (w["wave_fill"] <= 1)).all()
    assert (w["blocks"] <= w["waves"] * sm).all() and (w["blocks"] > (w["waves"] - 1) * sm).all()
    assert (w["padding"] >= 1).all()
