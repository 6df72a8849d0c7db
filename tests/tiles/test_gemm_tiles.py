"""GEMM tile maths: kernel-name parsing, blocks vs the launched grid, waves monotone in size."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.data import load_amd_kernels, load_kernels
from tilecast.tiles.gemm import (
    gemm_waves,
    is_tensile,
    launched_blocks,
    output_tiles,
    parse_kernel_tiles,
    profiled_tiles,
)


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


#: real Tensile (rocBLAS) kernel names of NeuSight's MI100 / MI210 rows (data/neusight_amd), shortened after GSU
TENSILE = ["Cijk_Ailk_Bljk_SB_MT64x64x32_MI32x32x2x1_SE_1LDSB0_APM1_ABV0_GSU1_GSUASB_WS64_WG32_8_1_WGM1",
           "Cijk_Alik_Bljk_SB_MT128x96x32_MI32x32x2x1_SE_1LDSB1_APM1_ABV0_GSU1_GSUASB_WS64_WG128_2_1_WGM15",
           "Cijk_Ailk_Bljk_SB_MT16x16x16_SN_1LDSB0_APM1_ABV0_GSU8_GSUAMB_GLS0_WS64_WG8_8_4_WGM1"]


def test_parse_tensile_macro_tiles():
    t = parse_kernel_tiles(pd.Series(TENSILE))
    assert t["tile_k"].tolist() == [64, 128, 16] and t["tile_m"].tolist() == [64, 96, 16]
    assert (t["sliced"] == 0).all()
    assert is_tensile(pd.Series([*TENSILE, "ampere_sgemm_128x64_tn", None])).tolist() == [True] * 3 + [False] * 2


@pytest.mark.parametrize("table", ["bmm", "linear"])
def test_amd_rows_tiles_and_split_from_tensile_names_and_the_work_item_grid(table):
    """rocprof's grid counts work-items: blocks = Grid / Block; the split is then Tensile's GSU on every row."""
    rows = load_amd_kernels(table)
    names = rows["Kernel Name"].astype(str)
    assert names.str.startswith("Cijk_").all()
    tiles = profiled_tiles(rows)
    mt = names.str.extract(r"_MT(\d+)x(\d+)x\d+_").astype(float)
    np.testing.assert_array_equal(tiles["tile_k"], mt[0])
    np.testing.assert_array_equal(tiles["tile_m"], mt[1])
    gsu = names.str.extract(r"_GSU(\d+)_")[0].astype(float).to_numpy()
    np.testing.assert_array_equal(tiles["split"].to_numpy(), gsu)
    blocks = output_tiles(rows["B"].to_numpy(float), rows["M"].to_numpy(float), rows["K"].to_numpy(float),
                          tiles["tile_k"].to_numpy(), tiles["tile_m"].to_numpy()) * gsu
    np.testing.assert_array_equal(blocks, launched_blocks(rows))
    assert (gsu > 1).any()


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
