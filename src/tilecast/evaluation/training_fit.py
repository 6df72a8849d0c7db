"""Fitting one number of the training forecast on measured runs, and validating it on runs it never saw.

A number (e.g. :data:`~tilecast.forecast.train_run.FLASH_BACKWARD_FACTOR`) is fitted by forecasting every run at
each value of a grid and keeping the value with the smallest mean APE; it is validated by cross-validation over
folds (the runs' GPU, model size, sequence length, ...): each fold is forecast with the value fitted on the other
folds' runs only. ``benchmarks/training_at_scale.py`` reports both (docs/method.md §19).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CrossValidation:
    """Per run its APE when its fold was held out (``ape``), and per fold the grid value fitted without it."""

    ape: np.ndarray
    picks: dict[object, float]

    @property
    def mape(self) -> float:
        return float(self.ape.mean())


def grid_fit(ape: np.ndarray, values: Sequence[float], rows: np.ndarray | None = None) -> tuple[float, int]:
    """The grid value (and its column) with the smallest mean APE over ``rows`` (default all) of ``ape`` (runs x
    grid values)."""
    ape = np.asarray(ape, dtype=float)
    if ape.ndim != 2 or ape.shape[1] != len(values):
        raise ValueError(f"ape must be runs x {len(values)} grid values, got shape {ape.shape}")
    part = ape if rows is None else ape[rows]
    if not len(part):
        raise ValueError("no runs to fit on")
    col = int(np.argmin(part.mean(axis=0)))
    return float(values[col]), col


def cross_validate(ape: np.ndarray, values: Sequence[float], folds: Sequence[object]) -> CrossValidation:
    """Hold out each fold in turn: its runs' APE at the grid value fitted on the other folds (:func:`grid_fit`)."""
    ape = np.asarray(ape, dtype=float)
    keys = np.asarray(folds, dtype=object)
    if len(keys) != len(ape):
        raise ValueError(f"{len(keys)} fold labels for {len(ape)} runs")
    out = np.full(len(ape), np.nan)
    picks: dict[object, float] = {}
    for key in dict.fromkeys(keys.tolist()):
        held = keys == key
        if held.all():
            raise ValueError("cross-validation needs at least two folds")
        value, col = grid_fit(ape, values, ~held)
        picks[key] = value
        out[held] = ape[held, col]
    return CrossValidation(out, picks)


__all__ = ["CrossValidation", "cross_validate", "grid_fit"]
