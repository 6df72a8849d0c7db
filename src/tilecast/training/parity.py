"""Parity plot (predicted vs measured latency, log-log) of one family's training run.

Drawn with fixed margins (no ``tight_layout``, which measures every tick label of the log axes: ~5 s of a 6 s plot
in the nightly bootstrap's profile) and at most :data:`MAX_POINTS` points per group (a seeded sample: the picture is
the same cloud; every row is in the run's metrics).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

#: points drawn per group at most (a validation split holds up to ~60,000 rows)
MAX_POINTS = 5_000


def _sample(actual: np.ndarray, pred: np.ndarray, limit: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    if len(actual) <= limit:
        return actual, pred
    keep = np.sort(np.random.default_rng(seed).choice(len(actual), size=limit, replace=False))
    return actual[keep], pred[keep]


def parity_figure(title: str, groups: dict[str, tuple[np.ndarray, np.ndarray]]) -> Figure:
    """One scatter per group ``label -> (measured_ms, predicted_ms)`` around the y = x line; the legend gives each
    group's row count (drawn: at most :data:`MAX_POINTS` of them)."""
    fig, ax = plt.subplots(figsize=(5.5, 5.0), dpi=110)
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.11, top=0.93)
    lo, hi = np.inf, 0.0
    for label, (actual, pred) in groups.items():
        ok = np.isfinite(actual) & np.isfinite(pred) & (actual > 0) & (pred > 0)
        if not ok.any():
            continue
        shown_actual, shown_pred = _sample(actual[ok], pred[ok], MAX_POINTS)
        ax.scatter(shown_actual, shown_pred, s=6, alpha=0.5, label=f"{label} ({ok.sum()})")
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
    return fig
