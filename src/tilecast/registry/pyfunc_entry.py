"""Models-from-code entry of a registered predictor: MLflow runs this file to build the pyfunc.

Logged by :func:`tilecast.registry.models.log_predictor` (by path, so nothing is pickled); the predictor
name and family come from the model's ``model_config``.
"""

import mlflow

from tilecast.registry.models import TilePredictorModel

mlflow.models.set_model(TilePredictorModel())
