"""Kernel predictors behind one Protocol, registered by name: roofline, xgboost, mlp."""

from tilecast.predictors.base import (
    PREDICTORS,
    TRAINING_GPUS,
    UNSEEN_GPUS,
    KernelPredictor,
    evaluation_rows,
    fit_predictor,
    register,
    training_rows,
)
from tilecast.predictors.mlp import MLPPredictor
from tilecast.predictors.roofline import RooflinePredictor
from tilecast.predictors.xgboost_predictor import XGBoostPredictor

__all__ = ["PREDICTORS", "TRAINING_GPUS", "UNSEEN_GPUS", "KernelPredictor", "MLPPredictor", "RooflinePredictor",
           "XGBoostPredictor", "evaluation_rows", "fit_predictor", "register", "training_rows"]
