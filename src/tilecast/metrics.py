"""Error measures used by every benchmark and evaluation: APE, MAPE tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the longest latency a measurement may have (10 minutes): a kernel, a model step or a label above it is a
#: mistake (a unit slip, a corrupt file), refused by name. Calibration measurements and end-to-end labels share it.
MAX_MEASURED_MS = 600_000.0


def ape_pct(pred, actual) -> np.ndarray:
    """Absolute percentage error ``100 * |pred - actual| / actual``."""
    pred = np.asarray(pred, dtype=float)
    actual = np.asarray(actual, dtype=float)
    return 100.0 * np.abs(pred - actual) / actual


def mape_table(df: pd.DataFrame, by: str | list[str], pred: str = "pred_ms", actual: str = "Latency"
               ) -> pd.DataFrame:
    """MAPE, median and p90 APE and row count per group of ``by`` (rows without a forecast skipped)."""
    d = df[df[pred].notna()].assign(_ape=lambda x: ape_pct(x[pred], x[actual]))
    g = d.groupby(by)["_ape"]
    return pd.DataFrame({"mape_pct": g.mean(), "median_ape_pct": g.median(),
                         "p90_ape_pct": g.quantile(0.9), "rows": g.size()}).round(1)
