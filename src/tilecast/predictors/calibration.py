"""Calibration tier: a small per-family correction for one GPU from a handful of measured kernels.

Most of a learned predictor's error on an unseen GPU is one factor for the whole family (how
efficiently that GPU's kernels run, METHOD.md §7). The correction is that factor, ``scale``: the
value minimising the mean absolute percentage error on the measured rows, i.e. the weighted median
of ``measured / predicted`` with weights ``predicted / measured``. With at least ``min_rows_slope``
rows a slope over log kernel size is added (``method="auto"``), shrunk towards 0. Corrected
predictions stay at or above the roofline and the launch floor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.predictors.bounds import bounded_ms
from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.roofline import roofline_ms

METHODS = ("scale", "auto")


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """Weighted median (lower), the minimiser of ``sum w |c - v|``."""
    order = np.argsort(values)
    v, w = np.asarray(values, float)[order], np.asarray(weights, float)[order]
    cum = np.cumsum(w)
    return float(v[np.searchsorted(cum, 0.5 * cum[-1])])


@dataclass(frozen=True)
class Calibration:
    """``corrected = bound(pred * scale * (pred / ref_ms) ** slope)`` for one family on one GPU."""

    family: str
    gpu_key: str
    scale: float = 1.0
    slope: float = 0.0
    ref_ms: float = 1.0
    floor_ms: float = 0.0
    rows: int = 0
    method: str = "scale"

    def apply(self, pred_ms: np.ndarray, rows: pd.DataFrame) -> np.ndarray:
        """Corrected latency (ms) of ``rows`` given the predictor's ``pred_ms`` on this GPU."""
        pred = np.asarray(pred_ms, dtype=float)
        corrected = pred * self.scale * (pred / self.ref_ms) ** self.slope
        if len(rows) == 0:
            return corrected
        return bounded_ms(corrected, roofline_ms(rows, get_gpu(self.gpu_key)), self.floor_ms)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        """Inverse of :meth:`to_dict`."""
        return cls(**d)


def _mape_scale(pred: np.ndarray, lat: np.ndarray) -> float:
    ratio = lat / pred
    return weighted_median(ratio, 1.0 / ratio)


def fit_calibration(predictor: Any, rows_measured: pd.DataFrame, gpu: GpuSpec, method: str = "auto",
                    min_rows_slope: int = 10, shrink: float = 0.5) -> Calibration:
    """Fit the correction of ``predictor`` (one family) on ``rows_measured`` (with ``Latency``) on ``gpu``."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; known: {', '.join(METHODS)}")
    family = str(getattr(predictor, "family", ""))
    floor = float(getattr(predictor, "floor_ms", 0.0))
    lat = pd.to_numeric(rows_measured["Latency"], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(lat) & (lat > 0)
    if not ok.any():
        return Calibration(family, gpu.key, floor_ms=floor, method=method)
    rows = rows_measured.loc[ok]
    pred = np.asarray(predictor.predict_ms(rows, gpu), dtype=float)
    lat = lat[ok]
    scale = _mape_scale(pred, lat)
    slope, ref = 0.0, 1.0
    if method == "auto" and len(lat) >= min_rows_slope:
        z = np.log(pred)
        ref = float(np.exp(np.median(z)))
        dz = z - np.log(ref)
        if np.var(dz) > 1e-6:
            resid = np.log(lat / (pred * scale))
            slope = shrink * float(np.cov(dz, resid, bias=True)[0, 1] / np.var(dz))
            adj = pred * (pred / ref) ** slope
            scale = _mape_scale(adj, lat)
    return Calibration(family, gpu.key, float(scale), float(slope), float(ref), floor, int(len(lat)), method)
