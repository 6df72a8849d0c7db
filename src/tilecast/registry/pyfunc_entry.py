"""Models-from-code entry of a registered predictor: MLflow runs this file to build the pyfunc.

Logged by :func:`tilecast.registry.models.log_predictor` (by path, so nothing is pickled); the predictor
name and family come from the model's ``model_config``. Only MLflow's own loader (``mlflow models serve``,
``mlflow.pyfunc.load_model``) runs the stored copy; tilecast's jobs read the predictor's data files and
check every file of the version, this one included, against the manifest recorded at registration.
"""

import mlflow

from tilecast.registry.models import TilePredictorModel

mlflow.models.set_model(TilePredictorModel())
