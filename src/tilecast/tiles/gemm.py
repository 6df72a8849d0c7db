"""GEMM tiles and waves (docs/method.md §3), vectorised over kernel rows.

Data convention: ``[B,M,N] @ [B,N,K]``, N is reduced, the output is ``B x M x K``. cuBLAS sees the
row-major product column-major, so a kernel named ``<a>x<b>`` (``ampere_sgemm_128x64_tn``,
``cutlass_80_simt_sgemm_256x128_8x4_tn``, ``sgemm_128x128x8_NT``) covers ``a`` output columns
(along K) and ``b`` output rows (along M): ``tile_k = a``, ``tile_m = b``. Split-K launches
``split`` blocks per output tile, each reducing ``ceil(N / split)``; ``*_sliced1x4`` kernels split
the reduction inside the block (same grid, flagged ``sliced``).

AMD (rocBLAS / Tensile, ``Cijk_Ailk_Bljk_SB_MT64x32x32_MI16x16x4x1_..._GSU3_...``): the macro tile
``MT<a>x<b>x<depthU>`` is read the same way (``tile_k = a`` along K, ``tile_m = b`` along M; ``depthU`` is
the unroll of the reduction); the profiler (rocprof) reports the grid in work-items, not workgroups, so a
Tensile row's blocks are ``Grid / Block`` per axis, and its split is the kernel's global split-U (``GSU``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

BYTES_PER_ELEMENT = 4.0
#: tile (tile_k x tile_m) used when nothing else is known
DEFAULT_TILE = (128.0, 128.0)
_TILE_RE = r"(\d+)x(\d+)"
#: a Tensile (rocBLAS) kernel name and its macro tile ``MT<a>x<b>x<depthU>``
_TENSILE_RE = r"^Cijk_.*?_MT(\d+)x(\d+)x\d+_"


def is_tensile(kernel_names: pd.Series) -> np.ndarray:
    """Whether each kernel name is a Tensile GEMM kernel (AMD rocBLAS: grid profiled in work-items)."""
    return kernel_names.astype("string").fillna("").str.extract(_TENSILE_RE)[0].notna().to_numpy(dtype=bool)


def parse_kernel_tiles(kernel_names: pd.Series) -> pd.DataFrame:
    """``tile_k, tile_m, sliced`` from profiled kernel names (NaN tiles where the name has none): cuBLAS /
    CUTLASS ``<a>x<b>``, Tensile's macro tile ``MT<a>x<b>x<depthU>``."""
    names = kernel_names.astype("string").fillna("")
    found = names.str.extract(_TILE_RE)
    tensile = names.str.extract(_TENSILE_RE)
    found = tensile.where(tensile[0].notna(), found)
    return pd.DataFrame({
        "tile_k": pd.to_numeric(found[0], errors="coerce").to_numpy(dtype=float),
        "tile_m": pd.to_numeric(found[1], errors="coerce").to_numpy(dtype=float),
        "sliced": names.str.contains("sliced", regex=False).to_numpy(dtype=float),
    }, index=kernel_names.index)


def _dims(rows: pd.DataFrame) -> tuple[np.ndarray, ...]:
    return tuple(pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=float) for c in ("B", "M", "N", "K"))


def output_tiles(b: np.ndarray, m: np.ndarray, k: np.ndarray, tile_k: np.ndarray,
                 tile_m: np.ndarray) -> np.ndarray:
    """Output tiles of a (batched) GEMM: ``B * ceil(K / tile_k) * ceil(M / tile_m)``."""
    return b * np.ceil(k / tile_k) * np.ceil(m / tile_m)


def profiled_tiles(rows: pd.DataFrame) -> pd.DataFrame:
    """Tiles of profiled rows: ``tile_k, tile_m, sliced`` from ``Kernel Name`` and ``split`` from the grid.

    ``split`` is the launched blocks (:func:`launched_blocks`) over the output tiles, rounded, at least 1
    (bmm puts the batch in ``Grid z``; linear puts split-K there; Tensile's ``GSU``). Rows whose kernel
    name carries no tile get NaN.
    """
    tiles = parse_kernel_tiles(rows["Kernel Name"])
    b, m, _, k = _dims(rows)
    base = output_tiles(b, m, k, tiles["tile_k"].to_numpy(), tiles["tile_m"].to_numpy())
    with np.errstate(invalid="ignore", divide="ignore"):
        split = np.maximum(np.round(launched_blocks(rows) / base), 1.0)
    tiles["split"] = np.where(np.isfinite(split), split, np.nan)
    return tiles


def launched_blocks(rows: pd.DataFrame) -> np.ndarray:
    """Blocks actually launched by profiled rows (``Grid x * Grid y * Grid z``; Tensile rows, whose grid
    is profiled in work-items, divided by the workgroup size ``Block x * Block y * Block z``)."""
    def axes(kind: str) -> np.ndarray:
        return np.prod([pd.to_numeric(rows[f"{kind} {a}"], errors="coerce").to_numpy(dtype=float)
                        for a in "xyz"], axis=0)

    grid = axes("Grid")
    tensile = is_tensile(rows["Kernel Name"]) if "Kernel Name" in rows else np.zeros(len(rows), dtype=bool)
    if tensile.any():
        grid = np.where(tensile, grid / axes("Block"), grid)
    return grid


def gemm_waves(rows: pd.DataFrame, tiles: pd.DataFrame, num_sm: np.ndarray) -> pd.DataFrame:
    """Per-row tile work and waves for GEMM rows under the given tiles.

    Columns: ``blocks`` (``output_tiles * split``), ``waves`` (``ceil(blocks / S)``), ``wave_fill``
    (``blocks / (S * waves)``, 1 = no tail), ``tile_flops`` and ``tile_bytes`` of one block
    (``2 tm tk Ns`` and ``4 (tm Ns + Ns tk + tm tk)`` with ``Ns = ceil(N / split)``) and
    ``padding`` (padded over true output size, >= 1).
    """
    b, m, n, k = _dims(rows)
    tk = tiles["tile_k"].to_numpy(dtype=float)
    tm = tiles["tile_m"].to_numpy(dtype=float)
    split = tiles["split"].to_numpy(dtype=float)
    blocks = output_tiles(b, m, k, tk, tm) * split
    waves = np.ceil(blocks / num_sm)
    n_split = np.ceil(n / split)
    return pd.DataFrame({
        "blocks": blocks,
        "waves": waves,
        "wave_fill": blocks / (num_sm * waves),
        "tile_flops": 2.0 * tm * tk * n_split,
        "tile_bytes": BYTES_PER_ELEMENT * (tm * n_split + n_split * tk + tm * tk),
        "padding": np.ceil(k / tk) * tk * np.ceil(m / tm) * tm / (k * m),
    }, index=rows.index)
