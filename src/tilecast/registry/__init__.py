"""MLflow side of tilecast: tracking configuration, registered per-family predictors, aliases with history,
per-GPU calibrations and kernel forecasts from the registry. Training and promotion are :mod:`tilecast.training`
(they record through this package); choosing the registry or the roofline is
:func:`tilecast.predictors.sources.resolve_predictors`.

Names: ``tilecast-<family>`` (aliases ``@challenger`` set by training, ``@champion`` only by promotion) and
``tilecast-calibration-<gpu key>`` (alias ``@current``). Every alias move is recorded, safely under concurrent
jobs, and rollbacks replay that history (see ``aliases``). ``configure`` refuses an unusable store at once
(:class:`TrackingError`).
"""

from tilecast.registry.aliases import AliasMove, NothingToRollBack, alias_history, move_alias, roll_back
from tilecast.registry.calibrations import (
    CalibrationSet,
    FamilyCalibration,
    load_calibration,
    rollback_calibration,
    save_calibration,
)
from tilecast.registry.kernel_forecast import (
    RegistryKernelForecast,
    RegistryPredictor,
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
from tilecast.registry.tracking import TrackingError, configure, default_tracking_uri, ensure_experiment

__all__ = ["DEFAULT_ALIAS", "AliasMove", "CalibrationSet", "FamilyCalibration", "IncompatibleModelError",
           "LoadedPredictor", "NothingToRollBack", "RegistryError",
           "RegistryKernelForecast", "RegistryPredictor", "Resolved", "TrackingError", "alias_history", "configure",
           "default_tracking_uri", "ensure_experiment", "forecast_from_registry",
           "load_calibration", "load_predictor", "load_registry_predictor", "log_predictor", "model_name",
           "move_alias", "resolve_alias", "roll_back", "rollback_calibration", "save_calibration"]
