"""Shared pieces of the feature builders (:mod:`tilecast.tiles.features`, :mod:`tilecast.tiles.moe_features`):
log2 with a floor, numeric dims, per-SM rates and the roofline ratios every tensor-core family reads."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.tiles.dtypes import bytes_per_element, row_dtypes

_US = 1e6
_MIB = float(2**20)


def log2(x: np.ndarray) -> np.ndarray:
    """log2 of ``x`` floored at 1e-30 (zero counts give a large negative number, not -inf)."""
    return np.log2(np.maximum(np.asarray(x, dtype=float), 1e-30))


def per_sm(spec: pd.DataFrame, peak: str = "fp32_gflops") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """SMs, FLOP/s and bytes/s per SM (FLOP/s at the spec column ``peak``), L2 bytes."""
    sm = spec["num_sm"].to_numpy(dtype=float)
    flops_per_sm = spec[peak].to_numpy(dtype=float) * 1e9 / sm
    bytes_per_sm = spec["mem_bw_gbs"].to_numpy(dtype=float) * 1e9 / sm
    l2_bytes = spec["l2_mb"].to_numpy(dtype=float) * _MIB
    return sm, flops_per_sm, bytes_per_sm, l2_bytes


def dim(rows: pd.DataFrame, c: str) -> np.ndarray:
    """Column ``c`` as floats (non-numbers NaN)."""
    return pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=float)


def common_tensor(spec: pd.DataFrame, roof_ms: np.ndarray, flops: np.ndarray, nbytes: np.ndarray,
                  rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """The roofline features of tensor-core rows: bytes per element, compute and memory time (log2 us) at the
    row's peak and bandwidth, intensity over the ridge point, bytes over L2, the roofline time."""
    sm, flops_per_sm, bytes_per_sm, l2_bytes = per_sm(spec, "peak_gflops")
    return {
        "bytes_per_element": bytes_per_element(row_dtypes(rows)),
        "log_compute_us": log2(flops / (flops_per_sm * sm) * _US),
        "log_memory_us": log2(nbytes / (bytes_per_sm * sm) * _US),
        "log_intensity_over_ridge": log2(flops / nbytes / (flops_per_sm / bytes_per_sm)),
        "log_bytes_over_l2": log2(nbytes / l2_bytes),
        "log_roofline_us": log2(roof_ms * 1e3),
    }
