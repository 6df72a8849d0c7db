"""Kernel forecasts from the registry: ``tilecast-<family>@<alias>`` per family, per-GPU calibration applied.

:func:`load_registry_predictor` is the registry half of :func:`tilecast.predictors.sources.resolve_predictors` (where
every job chooses between the registry and the roofline, once); :func:`forecast_from_registry` is the kernel-table job's
path (input columns
plus ``pred_ms``, plus a ``calibration`` column naming the calibration when one was applied).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.forecast.kernels import forecast_kernels
from tilecast.registry.calibrations import CalibrationSet, load_calibration
from tilecast.registry.models import DEFAULT_ALIAS, LoadedPredictor, load_predictor
from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.ops import FAMILIES, row_families
from tilecast.tiles.sources import kernel_rows

log = logging.getLogger(__name__)

CALIBRATION_COLUMN = "calibration"


@dataclass
class RegistryPredictor:
    """Predictors loaded once per family plus the calibrations found per GPU; callable as a FamilyPredictor.

    ``notes`` collects what a person should know (fallback aliases, calibrations not applied);
    ``used_calibrations`` maps GPU key -> calibration label for every calibration applied so far.
    """

    loaded: dict[str, LoadedPredictor]
    calibrate: bool = True
    notes: list[str] = field(default_factory=list)
    used_calibrations: dict[str, str] = field(default_factory=dict)
    _calibrations: dict[str, CalibrationSet | None] = field(default_factory=dict)

    @property
    def versions(self) -> dict[str, str]:
        """Registered version used per family."""
        return {fam: str(lp.version.version) for fam, lp in self.loaded.items()}

    def calibration(self, gpu_key: str) -> CalibrationSet | None:
        """The stored calibration of ``gpu_key`` (looked up once)."""
        if gpu_key not in self._calibrations:
            self._calibrations[gpu_key] = load_calibration(gpu_key) if self.calibrate else None
        return self._calibrations[gpu_key]

    def predict_labelled(self, family: str, rows: pd.DataFrame, gpu: GpuSpec | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
        """Forecast ms of ``rows`` of ``family`` and the calibration label applied to each row ("" none)."""
        if family not in self.loaded:
            raise KeyError(f"family {family!r} not loaded; loaded: {', '.join(self.loaded)}")
        lp = self.loaded[family]
        pred = np.asarray(lp.predictor.predict_ms(rows, gpu), dtype=float).copy()
        labels = np.full(len(rows), "", dtype=object)
        keys = _gpu_keys(rows, gpu)
        for key in pd.unique(keys):
            cal = self.calibration(key)
            fc = cal.families.get(family) if cal is not None else None
            if fc is None:
                continue
            if fc.base_version != str(lp.version.version) or fc.base_model != lp.version.name:
                note = (f"calibration {cal.label} for {family} not applied: fitted against {fc.base_model} "
                        f"v{fc.base_version}, forecasting with {lp.version.name} v{lp.version.version}; rerun "
                        f"`python jobs/calibrate.py gpu={key} measurements=<csv>`")
                if note not in self.notes:
                    self.notes.append(note)
                    log.warning(note)
                continue
            mask = keys == key
            pred[mask] = np.asarray(fc.calibration.apply(pred[mask], rows.loc[mask]), dtype=float)
            labels[mask] = cal.label
            self.used_calibrations[key] = cal.label
        return pred, labels

    def __call__(self, family: str, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> np.ndarray:
        return self.predict_labelled(family, rows, gpu)[0]


def _gpu_keys(rows: pd.DataFrame, gpu: GpuSpec | None) -> np.ndarray:
    if gpu is not None:
        return np.full(len(rows), gpu.key, dtype=object)
    if "Device" not in rows:
        raise UserError("rows have no 'Device' column: name the GPU (gpu=<key>)")
    lut = {d: get_gpu(str(d)).key for d in pd.unique(rows["Device"])}
    return rows["Device"].map(lut).to_numpy(dtype=object)


def load_registry_predictor(alias: str = DEFAULT_ALIAS, families: Iterable[str] = FAMILIES,
                            calibrate: bool = True) -> RegistryPredictor:
    """Load ``tilecast-<family>@<alias>`` for every family (champion falls back to challenger)."""
    loaded = {fam: load_predictor(fam, alias) for fam in dict.fromkeys(families)}
    return RegistryPredictor(loaded, calibrate=calibrate)


@dataclass
class RegistryKernelForecast:
    """Input rows plus ``pred_ms`` (and ``calibration`` when one was applied), with what was used."""

    table: pd.DataFrame
    unknown_ops: dict[str, int]
    models: dict[str, str]  # family -> "tilecast-<family> v<n> (@alias)"
    calibrations: dict[str, str]  # gpu key -> calibration label applied
    notes: list[str]


def forecast_from_registry(rows: pd.DataFrame, alias: str = DEFAULT_ALIAS, gpu: GpuSpec | None = None,
                           calibrate: bool = True) -> RegistryKernelForecast:
    """Forecast kernel rows with the registered models of the families present, in the input's row order."""
    rows = rows.reset_index(drop=True)
    families = [f for f in row_families(kernel_rows(rows)).dropna().unique()]
    rp = load_registry_predictor(alias, families, calibrate)
    labels = pd.Series("", index=rows.index, dtype=object)

    def predict(family: str, part: pd.DataFrame, g: GpuSpec | None) -> np.ndarray:
        pred, lab = rp.predict_labelled(family, part, g)
        labels.loc[part.index] = lab
        return pred

    result = forecast_kernels(rows, predict, gpu)
    table = result.table
    if rp.used_calibrations:
        table = table.assign(**{CALIBRATION_COLUMN: labels.to_numpy()})
    models = {fam: lp.resolved.describe() for fam, lp in rp.loaded.items()}
    return RegistryKernelForecast(table, result.unknown_ops, models, dict(rp.used_calibrations), list(rp.notes))
