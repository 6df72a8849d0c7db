"""XGBoost predictor: boosted trees on device-agnostic features learn ``log(latency / roofline)``.

The prediction is ``roofline * exp(max(f(x), 0))`` bounded below by the launch floor: never faster
than the roofline allows. GEMM families carry a tile chooser for GPUs without profiles.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb

from tilecast.predictors.base import register
from tilecast.predictors.bounds import bounded_ms, fit_launch_floor_ms
from tilecast.predictors.design import (
    GEMM_FAMILIES,
    design_matrix,
    fit_params,
    log_ratio_target,
    make_chooser,
    predictor_defaults,
    row_weights,
    training_tiles,
)
from tilecast.predictors.format import read_predictor_meta, write_predictor_meta
from tilecast.predictors.tile_choice import TileChooser, load_chooser_in, save_chooser_in
from tilecast.specs import GpuSpec

MODEL_FILE = "model.json"
#: ``format_version`` written to ``meta.json``, and the versions :meth:`XGBoostPredictor.load` reads
FORMAT_VERSION = 1
SUPPORTED_FORMATS = (1,)
_V1_KEYS = ("name", "family", "columns", "floor_ms", "params")  # the unversioned first layout

#: the defaults: ``conf/predictor/xgboost.yaml`` (one source for jobs, benchmarks and tests)
DEFAULTS: dict[str, Any] = predictor_defaults("xgboost")
_BOOSTER_KEYS = ("max_depth", "eta", "subsample", "colsample_bytree", "min_child_weight", "nthread", "seed")


@register
class XGBoostPredictor:
    """Per-family boosted trees on the log ratio to the roofline."""

    name = "xgboost"

    def __init__(self, family: str, booster: xgb.Booster, columns: list[str], floor_ms: float,
                 params: dict[str, Any], chooser: TileChooser | None = None, fit_s: float = 0.0) -> None:
        self.family, self.booster, self.columns = family, booster, list(columns)
        self.floor_ms, self.params, self.chooser, self.fit_s = float(floor_ms), dict(params), chooser, fit_s

    @classmethod
    def fit(cls, family: str, rows: pd.DataFrame, **params: Any) -> XGBoostPredictor:
        """Fit on ``rows`` (kernel schema with ``Latency``; ``Source == 'test'`` rows weighted up)."""
        p = fit_params("xgboost", family, DEFAULTS, params)
        t0 = time.perf_counter()
        chooser = make_chooser(family, rows, p["tile_chooser"])
        x, roof = design_matrix(family, rows, tiles=training_tiles(family, rows, chooser))
        dtrain = xgb.DMatrix(x[p["features"]], label=log_ratio_target(rows, roof),
                             weight=row_weights(rows, p["test_row_weight"]))
        booster = xgb.train({"objective": "reg:squarederror", **{k: p[k] for k in _BOOSTER_KEYS}}, dtrain,
                            int(p["rounds"]))
        return cls(family, booster, p["features"], fit_launch_floor_ms(rows), p, chooser,
                   time.perf_counter() - t0)

    def predict_ms(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> np.ndarray:
        """Latency (ms) of each row on ``gpu`` (or its ``Device``); tiles come from the chooser."""
        if len(rows) == 0:
            return np.zeros(0)
        tiles = self.chooser.choose(rows, gpu) if self.family in GEMM_FAMILIES else None
        x, roof = design_matrix(self.family, rows, gpu, tiles)
        log_ratio = np.maximum(self.booster.predict(xgb.DMatrix(x[self.columns])), 0.0)
        return bounded_ms(roof * np.exp(log_ratio), roof, self.floor_ms)

    def save(self, directory: Path) -> None:
        """Write ``model.json`` (native XGBoost), the tile chooser and ``meta.json``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(directory / MODEL_FILE)
        save_chooser_in(directory, self.chooser)
        write_predictor_meta(directory, {"name": self.name, "family": self.family, "columns": self.columns,
                                         "floor_ms": self.floor_ms, "params": self.params, "fit_s": self.fit_s,
                                         "xgboost": xgb.__version__}, FORMAT_VERSION)

    @classmethod
    def load(cls, directory: Path) -> XGBoostPredictor:
        """Rebuild from :meth:`save`'s files (an unreadable format raises ``ModelFormatError``)."""
        directory = Path(directory)
        meta = read_predictor_meta(directory, cls.name, SUPPORTED_FORMATS, _V1_KEYS)
        booster = xgb.Booster(model_file=str(directory / MODEL_FILE))
        return cls(meta["family"], booster, meta["columns"], meta["floor_ms"], meta["params"],
                   load_chooser_in(directory), meta.get("fit_s", 0.0))
