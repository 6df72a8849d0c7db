"""The kernel-predictor contract: one Protocol, a registry keyed by name, and ``fit_predictor``.

A predictor covers one family (bmm, linear, elementwise, softmax, layernorm) and maps kernel rows
in the data's schema (``OPName`` + ``B, M, N, K`` or ``B, H``; ``Device`` unless a GpuSpec is
given) to latency in ms. Every prediction is at least the roofline time of the row and at least
the family's launch floor (:mod:`tilecast.predictors.bounds`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from tilecast.predictors.rows import TRAINING_GPUS, UNSEEN_GPUS, evaluation_rows, training_rows
from tilecast.specs import GpuSpec
from tilecast.tiles.ops import FAMILIES

__all__ = ["PREDICTORS", "TRAINING_GPUS", "UNSEEN_GPUS", "KernelPredictor", "evaluation_rows", "fit_predictor",
           "register", "training_rows"]


@runtime_checkable
class KernelPredictor(Protocol):
    """Latency of one kernel family's rows; never below the roofline."""

    name: str
    family: str
    params: dict[str, Any]

    def predict_ms(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> np.ndarray:
        """Latency (ms) of each row on ``gpu`` (or each row's ``Device``)."""
        ...

    def save(self, directory: Path) -> None:
        """Write everything needed to rebuild the predictor (native model files + ``meta.json``)."""
        ...

    @classmethod
    def load(cls, directory: Path) -> KernelPredictor:
        """Rebuild a predictor written by :meth:`save`."""
        ...


#: predictor classes by name; each has ``fit(family, rows, **params)`` and ``load(directory)``
PREDICTORS: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: add a predictor class to :data:`PREDICTORS` under its ``name``."""
    PREDICTORS[cls.name] = cls
    return cls


def fit_predictor(name: str, family: str, rows: pd.DataFrame, **params: Any) -> KernelPredictor:
    """Fit predictor ``name`` for ``family`` on ``rows`` (kernel schema with ``Latency`` in ms)."""
    if name not in PREDICTORS:
        raise ValueError(f"unknown predictor {name!r}; known: {', '.join(sorted(PREDICTORS))}")
    if family not in FAMILIES:
        raise ValueError(f"unknown kernel family {family!r}; known: {', '.join(FAMILIES)}")
    return PREDICTORS[name].fit(family, rows, **params)
