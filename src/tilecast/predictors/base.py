"""The kernel-predictor contract: one Protocol, a registry keyed by name, and ``fit_predictor``.

A predictor covers one family (bmm, linear, elementwise, softmax, layernorm) and maps kernel rows
in the data's schema (``OPName`` + ``B, M, N, K`` or ``B, H``; ``Device`` unless a GpuSpec is
given) to latency in ms. Every prediction is at least the roofline time of the row and at least
the family's launch floor (:mod:`tilecast.predictors.bounds`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.predictors.rows import TRAINING_GPUS, UNSEEN_GPUS, evaluation_rows, training_rows
from tilecast.specs import GpuSpec
from tilecast.tiles.ops import FAMILIES

__all__ = ["PREDICTORS", "TRAINING_GPUS", "UNSEEN_GPUS", "KernelPredictor", "PredictorRegistry", "evaluation_rows",
           "fit_predictor", "register", "register_lazy", "training_rows"]


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


class PredictorRegistry(Mapping[str, type]):
    """Predictor classes by name. A name registered lazily (with its module) is listed at once, and its
    module imported on first lookup, so a heavy runtime (torch for ``mlp``) loads only when it is used."""

    def __init__(self) -> None:
        self._classes: dict[str, type] = {}
        self._modules: dict[str, str] = {}

    def add(self, cls: type) -> None:
        """Register an imported class under its ``name``."""
        self._classes[cls.name] = cls
        self._modules.setdefault(cls.name, cls.__module__)

    def add_lazy(self, name: str, module: str) -> None:
        """List ``name``; importing ``module`` (which registers the class) happens on first lookup."""
        self._modules.setdefault(name, module)

    def __getitem__(self, name: str) -> type:
        if name not in self._classes and name in self._modules:
            importlib.import_module(self._modules[name])
        return self._classes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __contains__(self, name: object) -> bool:
        return name in self._modules


#: predictor classes by name; each has ``fit(family, rows, **params)`` and ``load(directory)``
PREDICTORS = PredictorRegistry()


def register(cls: type) -> type:
    """Class decorator: add a predictor class to :data:`PREDICTORS` under its ``name``."""
    PREDICTORS.add(cls)
    return cls


def register_lazy(name: str, module: str) -> None:
    """List predictor ``name`` in :data:`PREDICTORS`; its ``module`` is imported when it is first looked up."""
    PREDICTORS.add_lazy(name, module)


def fit_predictor(name: str, family: str, rows: pd.DataFrame, **params: Any) -> KernelPredictor:
    """Fit predictor ``name`` for ``family`` on ``rows`` (kernel schema with ``Latency`` in ms)."""
    if name not in PREDICTORS:
        raise UserError(f"unknown predictor {name!r}; known: {', '.join(sorted(PREDICTORS))}")
    if family not in FAMILIES:
        raise UserError(f"unknown kernel family {family!r}; known: {', '.join(FAMILIES)}")
    return PREDICTORS[name].fit(family, rows, **params)
