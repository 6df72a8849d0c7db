"""The roofline predictor: ``max(flops / peak, bytes / bandwidth)`` per row (docs/method.md §4 baseline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tilecast.predictors.base import register
from tilecast.predictors.bounds import bounded_ms
from tilecast.predictors.format import read_predictor_meta, write_predictor_meta
from tilecast.specs import GpuSpec
from tilecast.tiles.roofline import roofline_ms

#: ``format_version`` written to ``meta.json``, and the versions :meth:`RooflinePredictor.load` reads
FORMAT_VERSION = 1
SUPPORTED_FORMATS = (1,)
_V1_KEYS = ("name", "family", "params")  # the unversioned first layout


@register
class RooflinePredictor:
    """Spec-sheet roofline; ``floor_ms`` (default 0: the plain baseline) adds a launch floor."""

    name = "roofline"

    def __init__(self, family: str, floor_ms: float = 0.0) -> None:
        self.family = family
        self.floor_ms = float(floor_ms)
        self.params: dict[str, Any] = {"floor_ms": self.floor_ms}

    @classmethod
    def fit(cls, family: str, rows: pd.DataFrame | None = None, floor_ms: float = 0.0) -> RooflinePredictor:
        """Nothing to learn; ``rows`` are accepted for the common ``fit_predictor`` signature."""
        return cls(family, floor_ms)

    def predict_ms(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> np.ndarray:
        """Roofline latency (ms) of each row, at least ``floor_ms``."""
        roof = roofline_ms(rows, gpu)
        return bounded_ms(roof, roof, self.floor_ms)

    def save(self, directory: Path) -> None:
        """Write ``meta.json`` (format version, name, family, params)."""
        write_predictor_meta(directory, {"name": self.name, "family": self.family, "params": self.params},
                             FORMAT_VERSION)

    @classmethod
    def load(cls, directory: Path) -> RooflinePredictor:
        """Rebuild from ``meta.json`` (an unreadable format raises ``ModelFormatError``)."""
        meta = read_predictor_meta(directory, cls.name, SUPPORTED_FORMATS, _V1_KEYS)
        return cls(meta["family"], **meta["params"])
