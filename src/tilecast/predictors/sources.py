"""Which kernel predictors a job forecasts with, resolved in one place: the registry's ``tilecast-<family>@<alias>``
(champion falls back to challenger; each GPU's stored calibration applied when asked) or the spec-sheet roofline.

:func:`resolve_predictors` is the one answer to "registry champion or roofline predictor at an alias" for every job
and the served model (``registry.forecaster.predictor_source``, ``pipelines.evaluate.load_predictors``); the scorer,
which pins versions for its Dask workers instead of loading them here, checks the same names
(:func:`check_forecaster`, ``scoring.predictors.resolve_source``). The pipelines resolve once and pass the result down.
The registry side is imported only when asked for (``tilecast.registry`` depends on this package, not the reverse).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tilecast.errors import UserError
from tilecast.tiles.ops import FAMILIES

#: the forecasters a job can name (``forecaster=``): learned predictors from the registry, or the roofline baseline
FORECASTERS = ("registry", "roofline")


def check_forecaster(name: str) -> str:
    """``name`` if it is one of :data:`FORECASTERS`, else a :class:`UserError` naming them."""
    if name not in FORECASTERS:
        raise UserError(f"unknown forecaster {name!r}; known: {', '.join(FORECASTERS)}")
    return name


@dataclass
class ResolvedPredictors:
    """The predictors of one job: a :data:`FamilyPredictor` (calibrations applied where asked), the spec-only
    predictor of each family, the registered version per family (empty for the roofline) and notes for people
    (fallback aliases, calibrations not applied: the list grows while forecasting)."""

    forecaster: str
    predict: Any  # a tilecast.forecast.FamilyPredictor: (family, rows, gpu) -> ms
    predictors: dict[str, Any]
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def resolve_predictors(forecaster: str = "registry", alias: str = "champion", families: Iterable[str] = FAMILIES,
                       calibrate: bool = True) -> ResolvedPredictors:
    """``registry``: load ``tilecast-<family>@<alias>`` of each of ``families`` once (a missing registered model is
    a named error); ``roofline``: the spec-sheet roofline of each family (no registry, no versions)."""
    families = tuple(dict.fromkeys(families))
    if check_forecaster(forecaster) == "roofline":
        from tilecast.forecast.ops import roofline_predictor
        from tilecast.predictors import PREDICTORS

        return ResolvedPredictors("roofline", roofline_predictor,
                                  {f: PREDICTORS["roofline"].fit(f, None) for f in families})
    from tilecast.registry.kernel_forecast import load_registry_predictor

    rp = load_registry_predictor(alias, families, calibrate)
    return ResolvedPredictors("registry", rp, {f: lp.predictor for f, lp in rp.loaded.items()}, rp.versions, rp.notes)
