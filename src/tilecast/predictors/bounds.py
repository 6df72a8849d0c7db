"""Physical lower bounds every prediction respects: the roofline time and a launch-overhead floor."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: quantile of each training GPU's latencies taken as its launch floor (robust to a stray fast row)
FLOOR_QUANTILE = 0.005


def fit_launch_floor_ms(rows: pd.DataFrame) -> float:
    """Launch floor of a family (ms): the lowest per-GPU ``FLOOR_QUANTILE`` latency of the rows.

    The smallest kernels of every training GPU take about the same time whatever their work
    (launch and one block's latency); taking the lowest GPU keeps the floor a bound.
    """
    lat = pd.to_numeric(rows["Latency"], errors="coerce")
    if "Device" in rows:
        per_gpu = lat.groupby(rows["Device"].astype(str)).quantile(FLOOR_QUANTILE)
        value = float(per_gpu.min())
    else:
        value = float(lat.quantile(FLOOR_QUANTILE))
    return value if np.isfinite(value) and value > 0 else 0.0


def bounded_ms(pred_ms: np.ndarray, roof_ms: np.ndarray, floor_ms: float = 0.0) -> np.ndarray:
    """``max(pred, roofline, floor)``: never faster than the roofline allows, never below launch cost."""
    return np.maximum(np.maximum(np.asarray(pred_ms, dtype=float), roof_ms), floor_ms)
