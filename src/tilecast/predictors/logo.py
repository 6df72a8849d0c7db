"""Leave-one-GPU-out (LOGO) of one predictor on one family's training rows: the project's model-selection
criterion (``benchmarks/generalisation.md``, ``benchmarks/precision.md``) as a library call.

For every GPU of the rows that has rows to score, fit the predictor (:func:`fit_predictor`, the same name and
parameters as training) on the rows of every *other* GPU and forecast the left-out GPU's rows; the criterion is
the mean over left-out GPUs of their MAPE, and the worst GPU is reported beside it. The rows scored are the
ones the benchmarks score: for the fp32 families the model-shaped rows (``Source == "test"``, the NeuSight
``kernels/test`` tables); for the precision-path families every row of the GPU. A GPU with no row to score gets
no fold (it still trains the others); a family whose rows come from fewer than two GPUs has no LOGO at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tilecast.metrics import ape_pct
from tilecast.predictors.base import fit_predictor
from tilecast.specs import get_gpu
from tilecast.tiles.ops import PRECISION_FAMILIES

log = logging.getLogger("tilecast.logo")


@dataclass(frozen=True)
class LogoResult:
    """The folds of one family: MAPE (%), rows scored and fit seconds per left-out GPU (catalog key)."""

    family: str
    predictor: str
    mape_pct: dict[str, float]
    rows: dict[str, int] = field(default_factory=dict)
    fit_s: dict[str, float] = field(default_factory=dict)

    @property
    def mean_pct(self) -> float:
        """The criterion: mean over the left-out GPUs of their MAPE."""
        return float(np.mean(list(self.mape_pct.values())))

    @property
    def worst_gpu(self) -> str:
        return max(self.mape_pct, key=self.mape_pct.get)

    @property
    def worst_pct(self) -> float:
        return self.mape_pct[self.worst_gpu]

    def metrics(self) -> dict[str, float]:
        """``logo_mape_pct`` (mean), ``logo_worst_mape_pct`` and ``logo_mape_pct.<gpu key>`` per fold."""
        return {"logo_mape_pct": self.mean_pct, "logo_worst_mape_pct": self.worst_pct,
                **{f"logo_mape_pct.{gpu}": v for gpu, v in self.mape_pct.items()},
                "logo_s": float(sum(self.fit_s.values()))}

    def describe(self) -> str:
        return f"mean {self.mean_pct:.2f}%, worst {self.worst_pct:.2f}% ({self.worst_gpu})"


def scored(family: str, rows: pd.DataFrame) -> np.ndarray:
    """Which rows a fold scores: fp32 families the model-shaped ones (``Source == "test"``; every row when the
    rows carry no ``Source``), precision-path families every row."""
    if family in PRECISION_FAMILIES or "Source" not in rows:
        return np.ones(len(rows), dtype=bool)
    return (rows["Source"] == "test").to_numpy()


def logo_devices(family: str, rows: pd.DataFrame) -> list[str]:
    """Device names of the folds: GPUs of ``rows`` with rows to score, when the rows hold two GPUs or more."""
    devices = rows["Device"].astype(str)
    if devices.nunique() < 2:
        return []
    return sorted(devices.loc[scored(family, rows)].unique())


def run_logo(family: str, predictor: str, params: Mapping[str, Any], rows: pd.DataFrame) -> LogoResult | None:
    """LOGO of ``predictor`` (``params`` as training passes them) over the GPUs of ``rows`` (the family's
    training rows). None when no fold can be made (fewer than two GPUs, or none with rows to score)."""
    devices = logo_devices(family, rows)
    if not devices:
        log.warning("%s: no leave-one-GPU-out: its %d rows come from %d GPU(s) with rows to score", family,
                    len(rows), rows["Device"].nunique())
        return None
    device = rows["Device"].astype(str).to_numpy()
    is_scored = scored(family, rows)
    mape, counts, secs = {}, {}, {}
    for i, name in enumerate(devices, 1):
        key = get_gpu(name).key
        out = device == name
        test = rows.loc[out & is_scored]
        t0 = time.perf_counter()
        model = fit_predictor(predictor, family, rows.loc[~out], **params)
        secs[key] = time.perf_counter() - t0
        pred = np.asarray(model.predict_ms(test), dtype=float)
        mape[key] = float(ape_pct(pred, test["Latency"].to_numpy(float)).mean())
        counts[key] = len(test)
        log.info("%s: LOGO fold %d/%d without %s: %s fit %.1f s on %d rows, MAPE %.2f%% on %d rows", family, i,
                 len(devices), key, predictor, secs[key], int((~out).sum()), mape[key], len(test))
    result = LogoResult(family, predictor, mape, counts, secs)
    log.info("%s: LOGO over %d GPUs: %s", family, len(devices), result.describe())
    return result
