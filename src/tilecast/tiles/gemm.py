"""GEMM tiles and waves (docs/method.md §3), vectorised over kernel rows.

Data convention: ``[B,M,N] @ [B,N,K]``, N is reduced, the output is ``B x M x K``. cuBLAS sees the
row-major product column-major, so a kernel named ``<a>x<b>`` (``ampere_sgemm_128x64_tn``,
``cutlass_80_simt_sgemm_256x128_8x4_tn``, ``sgemm_128x128x8_NT``) covers ``a`` output columns
(along K) and ``b`` output rows (along M): ``tile_k = a``, ``tile_m = b``. Split-K launches
``split`` blocks per output tile, each reducing ``ceil(N / split)``; ``*_sliced1x4`` kernels split
the reduction inside the block (same grid, flagged ``sliced``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

BYTES_PER_ELEMENT = 4.0
#: tile (tile_k x tile_m) used when nothing else is known
DEFAULT_TILE = (128.0, 128.0)
_TILE_RE = r"(\d+)x(\d+)"


def parse_kernel_tiles(kernel_names: pd.Series) -> pd.DataFrame:
    """``tile_k, tile_m, sliced`` from profiled kernel names (NaN tiles where the name has none)."""
    names = kernel_names.astype("string").fillna("")
    found = names.str.extract(_TILE_RE)
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

    ``split`` is the launched grid (``Grid x*y*z``) over the output tiles, rounded, at least 1
    (bmm puts the batch in ``Grid z``; linear puts split-K there). Rows whose kernel name carries no
    tile get NaN.
    """
    tiles = parse_kernel_tiles(rows["Kernel Name"])
    b, m, _, k = _dims(rows)
    base = output_tiles(b, m, k, tiles["tile_k"].to_numpy(), tiles["tile_m"].to_numpy())
    grid = np.prod([pd.to_numeric(rows[f"Grid {a}"], errors="coerce").to_numpy(dtype=float)
                    for a in "xyz"], axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        split = np.maximum(np.round(grid / base), 1.0)
    tiles["split"] = np.where(np.isfinite(split), split, np.nan)
    return tiles


def launched_blocks(rows: pd.DataFrame) -> np.ndarray:
    """Blocks actually launched by profiled rows (``Grid x * Grid y * Grid z``)."""
    return np.prod([pd.to_numeric(rows[f"Grid {a}"], errors="coerce").to_numpy(dtype=float)
                    for a in "xyz"], axis=0)


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
