"""Kernel predictors behind one Protocol, registered by name: roofline, xgboost, mlp.

``mlp`` (PyTorch) is listed in :data:`PREDICTORS` at once but imported on first use
(``PREDICTORS["mlp"]`` or ``tilecast.predictors.MLPPredictor``), so code that never touches it does
not pay for importing torch.
"""

from typing import Any

from tilecast.predictors.base import (
    PREDICTORS,
    TRAINING_GPUS,
    UNSEEN_GPUS,
    KernelPredictor,
    evaluation_rows,
    fit_predictor,
    register,
    register_lazy,
    training_rows,
)
from tilecast.predictors.format import ModelFormatError
from tilecast.predictors.roofline import RooflinePredictor
from tilecast.predictors.xgboost_predictor import XGBoostPredictor

register_lazy("mlp", "tilecast.predictors.mlp")


def __getattr__(name: str) -> Any:
    """``MLPPredictor`` on first access (imports torch)."""
    if name == "MLPPredictor":
        return PREDICTORS["mlp"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PREDICTORS", "TRAINING_GPUS", "UNSEEN_GPUS", "KernelPredictor", "MLPPredictor", "ModelFormatError",
           "RooflinePredictor", "XGBoostPredictor", "evaluation_rows", "fit_predictor", "register", "training_rows"]
