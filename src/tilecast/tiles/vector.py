"""Vector-op tiles and waves (docs/method.md §3), vectorised over kernel rows ``(OPName, B, H)``.

Blocks follow the PyTorch 2.1 kernels of the data:
- elementwise: ``vectorized_elementwise_kernel<4>``, 128 threads x 4 elements = 512 per block;
- layernorm: ``vectorized_layer_norm_kernel``, one block per row;
- softmax: ``softmax_warp_forward`` for ``H <= 1024`` (one warp of ``min(next_pow2(H), 32)``
  lanes per row, 128 threads per block, 2 rows per warp when ``next_pow2(H) <= 128``), otherwise
  ``cunn_SoftMaxForward`` with one block per row.
The tile is the elements one block covers (the METHOD's T).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.tiles.ops import family_of, mem_per_output, ops_per_output

ELEMENTWISE_BLOCK_ELEMENTS = 512.0
WARP_SOFTMAX_MAX_H = 1024.0
_THREADS_PER_WARP_BLOCK = 128.0


def _softmax_rows_per_block(h: np.ndarray) -> np.ndarray:
    pow2 = 2.0 ** np.ceil(np.log2(np.maximum(h, 1.0)))
    warp = np.minimum(pow2, 32.0)
    rows_per_warp = np.where(pow2 <= 128.0, 2.0, 1.0)
    return np.where(h <= WARP_SOFTMAX_MAX_H, _THREADS_PER_WARP_BLOCK / warp * rows_per_warp, 1.0)


def vector_waves(rows: pd.DataFrame, num_sm: np.ndarray) -> pd.DataFrame:
    """Per-row tile and waves of vector rows.

    Columns: ``tile_elements`` (T), ``blocks``, ``waves`` (``ceil(blocks / S)``), ``wave_fill``
    (``blocks / (S * waves)``), ``ops_per_output``, ``mem_per_output`` (bytes), ``tile_flops``,
    ``tile_bytes``.
    """
    ops = rows["OPName"].astype(str).to_numpy()
    b = pd.to_numeric(rows["B"], errors="coerce").to_numpy(dtype=float)
    h = pd.to_numeric(rows["H"], errors="coerce").to_numpy(dtype=float)
    fam = np.array([family_of(o) or "" for o in ops])
    rows_per_block = np.where(fam == "softmax", _softmax_rows_per_block(h), 1.0)
    per_row = (fam == "softmax") | (fam == "layernorm")
    tile = np.where(per_row, h * rows_per_block, ELEMENTWISE_BLOCK_ELEMENTS)
    blocks = np.where(per_row, np.ceil(b / rows_per_block), np.ceil(b * h / ELEMENTWISE_BLOCK_ELEMENTS))
    waves = np.ceil(blocks / num_sm)
    opo = np.array([ops_per_output(o) for o in ops])
    mpo = np.array([mem_per_output(o) for o in ops])
    return pd.DataFrame({
        "tile_elements": tile,
        "blocks": blocks,
        "waves": waves,
        "wave_fill": blocks / (num_sm * waves),
        "ops_per_output": opo,
        "mem_per_output": mpo,
        "tile_flops": opo * tile,
        "tile_bytes": mpo * tile,
    }, index=rows.index)
