"""MLflow side of tilecast: tracking configuration, registered per-family predictors, aliases with history,
per-GPU calibrations, training runs and kernel forecasts from the registry.

Names: ``tilecast-<family>`` (aliases ``@challenger`` set by training, ``@champion`` by promotion) and
``tilecast-calibration-<gpu key>`` (alias ``@current``). Every alias move is recorded (see ``aliases``).
"""

from tilecast.registry.aliases import AliasMove, alias_history, move_alias
from tilecast.registry.calibrations import CalibrationSet, FamilyCalibration, load_calibration, save_calibration
from tilecast.registry.kernel_forecast import (
    RegistryKernelForecast,
    RegistryPredictor,
    family_predictor,
    forecast_from_registry,
    load_registry_predictor,
)
from tilecast.registry.models import (
    DEFAULT_ALIAS,
    IncompatibleModelError,
    LoadedPredictor,
    RegistryError,
    Resolved,
    load_predictor,
    log_predictor,
    model_name,
    resolve_alias,
)
from tilecast.registry.tracking import configure, default_tracking_uri, ensure_experiment

__all__ = ["DEFAULT_ALIAS", "AliasMove", "CalibrationSet", "FamilyCalibration", "IncompatibleModelError",
           "LoadedPredictor", "RegistryError",
           "RegistryKernelForecast", "RegistryPredictor", "Resolved", "alias_history", "configure",
           "default_tracking_uri", "ensure_experiment", "family_predictor", "forecast_from_registry",
           "load_calibration", "load_predictor", "load_registry_predictor", "log_predictor", "model_name",
           "move_alias", "resolve_alias", "save_calibration"]
