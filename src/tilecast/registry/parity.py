"""Parity plot (predicted vs measured latency, log-log) of one family's training run."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def parity_figure(title: str, groups: dict[str, tuple[np.ndarray, np.ndarray]]) -> Figure:
    """One scatter per group ``label -> (measured_ms, predicted_ms)`` around the y = x line."""
    fig, ax = plt.subplots(figsize=(5.5, 5.0), dpi=110)
    lo, hi = np.inf, 0.0
    for label, (actual, pred) in groups.items():
        ok = np.isfinite(actual) & np.isfinite(pred) & (actual > 0) & (pred > 0)
        if not ok.any():
            continue
        ax.scatter(actual[ok], pred[ok], s=6, alpha=0.5, label=f"{label} ({ok.sum()})")
        lo = min(lo, actual[ok].min(), pred[ok].min())
        hi = max(hi, actual[ok].max(), pred[ok].max())
    if hi > 0:
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured latency (ms)")
    ax.set_ylabel("predicted latency (ms)")
    ax.set_title(title)
    ax.legend(fontsize=7, markerscale=2)
    fig.tight_layout()
    return fig
