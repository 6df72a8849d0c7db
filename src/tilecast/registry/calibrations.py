"""Per-GPU calibrations in the registry: registered model ``tilecast-calibration-<gpu key>``.

Each calibration run logs ``calibration/calibration.json`` (one small correction per family, each
tied to the predictor version it was fitted against) and the measurements it used; the artifact
directory becomes a new version of ``tilecast-calibration-<gpu key>`` and alias ``@current`` moves to
it (recorded by :mod:`tilecast.registry.aliases`, so a calibration can be rolled back like a model).
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from tilecast.predictors.calibration import Calibration
from tilecast.registry.aliases import (
    ROLLBACK,
    AliasMove,
    NothingToRollBack,
    alias_history,
    is_transient,
    move_alias,
    roll_back,
    rollback_target,
)
from tilecast.registry.models import fetch_version_files
from tilecast.registry.tracking import ensure_experiment

log = logging.getLogger(__name__)

CALIBRATION_PREFIX = "tilecast-calibration-"
CURRENT_ALIAS = "current"
ARTIFACT_DIR = "calibration"
FILE_NAME = "calibration.json"


def calibration_model_name(gpu_key: str) -> str:
    """Registered model holding the calibrations of one GPU."""
    return f"{CALIBRATION_PREFIX}{gpu_key}"


@dataclass(frozen=True)
class FamilyCalibration:
    """A family's correction on one GPU and the predictor version it was fitted against."""

    calibration: Calibration
    base_model: str  # e.g. tilecast-linear
    base_version: str
    rows: int
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"calibration": self.calibration.to_dict(), "base_model": self.base_model,
                "base_version": self.base_version, "rows": self.rows, "metrics": self.metrics}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FamilyCalibration:
        return cls(Calibration.from_dict(d["calibration"]), d["base_model"], str(d["base_version"]),
                   int(d["rows"]), dict(d.get("metrics", {})))


@dataclass(frozen=True)
class CalibrationSet:
    """All family corrections of one GPU; ``version`` is the registry version (None before saving)."""

    gpu_key: str
    families: dict[str, FamilyCalibration]
    version: str | None = None

    @property
    def label(self) -> str:
        """How outputs name it: ``tilecast-calibration-<gpu key> v<version>``."""
        return f"{calibration_model_name(self.gpu_key)} v{self.version}"

    def to_json(self) -> str:
        return json.dumps({"gpu": self.gpu_key, "families": {f: c.to_dict() for f, c in self.families.items()}},
                          indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, version: str | None = None) -> CalibrationSet:
        d = json.loads(text)
        return cls(d["gpu"], {f: FamilyCalibration.from_dict(c) for f, c in d["families"].items()}, version)


def save_calibration(cal: CalibrationSet, measurements: pd.DataFrame, reason: str) -> CalibrationSet:
    """Store ``cal`` as a new registry version in the active run and move ``@current`` to it."""
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("save_calibration needs an active MLflow run")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / ARTIFACT_DIR
        d.mkdir()
        (d / FILE_NAME).write_text(cal.to_json())
        measurements.to_csv(d / "measurements.csv", index=False)
        mlflow.log_artifacts(str(d), ARTIFACT_DIR)
    name = calibration_model_name(cal.gpu_key)
    client = MlflowClient()
    try:
        client.get_registered_model(name)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        try:
            client.create_registered_model(name, description=f"per-family latency corrections for {cal.gpu_key}")
        except MlflowException as created:  # another job created it in between
            if created.error_code != "RESOURCE_ALREADY_EXISTS" and not is_transient(created):
                raise
    source = f"{run.info.artifact_uri.rstrip('/')}/{ARTIFACT_DIR}"
    mv = client.create_model_version(name, source=source, run_id=run.info.run_id)
    metrics = {f"{fam}.{k}": v for fam, c in cal.families.items() for k, v in c.metrics.items()}
    move_alias(name, CURRENT_ALIAS, mv.version, reason=reason, metrics=metrics, client=client)
    _CACHE.clear()
    return CalibrationSet(cal.gpu_key, cal.families, str(mv.version))


def rollback_calibration(gpu_key: str, experiment: str = "tilecast-calibration") -> AliasMove:
    """Restore the calibration of ``gpu_key`` that ``@current`` pointed at before its latest move not yet undone;
    when that move stored the first calibration, remove ``@current`` (forecasts on that GPU are then
    uncalibrated). Recorded in the alias history (a ``rollback`` move) and as an MLflow run of ``experiment``.
    A second rollback goes further back; with nothing left, :class:`NothingToRollBack`, nothing changed."""
    name = calibration_model_name(gpu_key)
    client = MlflowClient()
    try:
        history = alias_history(name, CURRENT_ALIAS, client)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        history = []
    if rollback_target(history) is None:
        what = "every stored calibration is rolled back already" if history else "no calibration was ever stored"
        raise NothingToRollBack(f"{name}: {what}; nothing to roll back")
    with mlflow.start_run(experiment_id=ensure_experiment(experiment), run_name=f"rollback-{gpu_key}") as run:
        move = roll_back(name, CURRENT_ALIAS, client=client, allow_remove=True,
                         reason=f"jobs/calibrate.py gpu={gpu_key} rollback=true (run {run.info.run_id})")
        mlflow.set_tags({"tilecast.gpu": gpu_key, "tilecast.rollback": f"{name}@{CURRENT_ALIAS} {move.describe()}",
                         "tilecast.kind": ROLLBACK})
    _CACHE.clear()
    return move


_CACHE: dict[tuple[str, str, str], CalibrationSet] = {}


def load_calibration(gpu_key: str, alias: str = CURRENT_ALIAS) -> CalibrationSet | None:
    """The calibration of ``gpu_key`` behind ``@alias``, or None when that GPU has none."""
    name = calibration_model_name(gpu_key)
    client = MlflowClient()
    try:
        mv = client.get_model_version_by_alias(name, alias)
    except MlflowException as exc:
        if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"):
            return None
        raise
    key = (mlflow.get_tracking_uri(), name, str(mv.version))
    if key not in _CACHE:  # copied out of the store (a moved or read-only one too), never written into it
        with tempfile.TemporaryDirectory(prefix="tilecast-calibration-") as tmp:
            path = fetch_version_files(mv, Path(tmp) / ARTIFACT_DIR)
            _CACHE[key] = CalibrationSet.from_json((Path(path) / FILE_NAME).read_text(), str(mv.version))
    return _CACHE[key]
