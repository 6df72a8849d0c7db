"""The calibration tier of the evaluation: per GPU and family, a small correction fitted on at most
``n_rows`` of that GPU's kernel test rows (drawn with a fixed seed), applied on top of the spec-only
forecast. A GPU without kernel rows (or a family without any) stays spec-only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd

from tilecast.evaluation.suite import CalibratedFor
from tilecast.forecast import FamilyPredictor
from tilecast.predictors import KernelPredictor, evaluation_rows
from tilecast.predictors.calibration import fit_calibration
from tilecast.specs import GpuSpec

log = logging.getLogger(__name__)


def calibration_rows(family: str, gpu: GpuSpec, n_rows: int = 20, seed: int = 0) -> pd.DataFrame:
    """At most ``n_rows`` kernel test rows of ``family`` measured on ``gpu`` (seeded sample, source order)."""
    rows = evaluation_rows(family, devices=[gpu.device_name])
    if len(rows) > n_rows:
        rows = rows.sample(n=n_rows, random_state=seed).sort_index()
    return rows.reset_index(drop=True)


def calibrated_for(predictors: Mapping[str, KernelPredictor], n_rows: int = 20, seed: int = 0) -> CalibratedFor:
    """GPU -> a FamilyPredictor with that GPU's corrections (None when it has no kernel rows at all)."""
    cache: dict[str, FamilyPredictor | None] = {}

    def for_gpu(gpu: GpuSpec) -> FamilyPredictor | None:
        if gpu.key in cache:
            return cache[gpu.key]
        corrections = {}
        for fam, predictor in predictors.items():
            rows = calibration_rows(fam, gpu, n_rows, seed)
            if len(rows):
                corrections[fam] = fit_calibration(predictor, rows, gpu)
        if not corrections:
            log.info("no kernel test rows of %s: its calibrated forecast is the spec-only one", gpu.key)
            cache[gpu.key] = None
            return None

        def predict(family: str, rows: pd.DataFrame, g: GpuSpec | None) -> np.ndarray:
            pred = np.asarray(predictors[family].predict_ms(rows, g), dtype=float)
            cal = corrections.get(family)
            return pred if cal is None else np.asarray(cal.apply(pred, rows), dtype=float)

        cache[gpu.key] = predict
        return predict

    return for_gpu
