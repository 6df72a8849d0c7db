"""The servable end-to-end forecaster: registered model ``tilecast-forecaster``, an MLflow pyfunc.

One version bundles one predictor version per family (the champions when promotion registers it)
and the graph builder (the ``tilecast`` package), so

    mlflow models serve -m models:/tilecast-forecaster@champion --env-manager local

answers POSTed rows ``model, gpu, batch, seq_len, mode`` (optional ``parallel``, ``fused``) with
``e2e_ms``, ``fw_ms``, ``bw_ms``, ``acc_ms`` and ``ms_<group>``. A row that cannot be forecast (an
unknown model or GPU, a workload that cannot be built) gets its reason in ``error``; the other
rows still answer.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.types.schema import ColSpec, Schema

from tilecast.forecast import SUMMARY_KEYS, FamilyPredictor, forecast, roofline_predictor
from tilecast.predictors import KernelPredictor
from tilecast.registry.aliases import move_alias
from tilecast.registry.kernel_forecast import family_predictor
from tilecast.registry.models import load_version, model_name
from tilecast.registry.tracking import ensure_experiment

log = logging.getLogger(__name__)

FORECASTER_NAME = "tilecast-forecaster"
FORECASTER_EXPERIMENT = "tilecast-forecaster"  # runs that register a forecaster outside promote
BUNDLE_TAG = "tilecast.bundle"  # version tag: JSON family -> "tilecast-<family> v<n>"
INPUT_COLUMNS = ("model", "gpu", "batch", "seq_len", "mode")
OUTPUT_COLUMNS = ("model", "gpu", "batch", "seq_len", "mode", "parallel", "fused", *SUMMARY_KEYS, "error")
#: forecaster name -> how to get a FamilyPredictor and the versions it uses
SOURCES = ("registry", "roofline")


def predictors_from_versions(versions: Mapping[str, str]) -> dict[str, KernelPredictor]:
    """Load ``tilecast-<family>`` version ``v`` for each ``family -> v`` (cached per process)."""
    return {fam: load_version(f"models:/{model_name(fam)}/{v}") for fam, v in versions.items()}


def as_family_predictor(predictors: Mapping[str, KernelPredictor]) -> FamilyPredictor:
    """A FamilyPredictor over one predictor per family (no calibration: spec sheet only)."""

    def predict(family: str, rows: pd.DataFrame, gpu) -> np.ndarray:
        if family not in predictors:
            raise KeyError(f"no predictor for family {family!r}; have: {', '.join(predictors)}")
        return np.asarray(predictors[family].predict_ms(rows, gpu), dtype=float)

    return predict


def predictor_source(source: str = "registry", alias: str = "champion", calibrate: bool = True
                     ) -> tuple[FamilyPredictor, dict[str, str]]:
    """``registry``: ``tilecast-<family>@<alias>`` (champion falls back to challenger; stored per-GPU
    calibrations applied when ``calibrate``); ``roofline``: the spec-sheet roofline (no versions)."""
    if source == "roofline":
        return roofline_predictor, {}
    if source == "registry":
        return family_predictor(alias, calibrate=calibrate)
    raise ValueError(f"unknown forecaster {source!r}; known: {', '.join(SOURCES)}")


def _optional(value: Any, default: Any) -> Any:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value == "":
        return default
    return value


def _flag(value: Any) -> bool:
    """A yes/no cell: JSON booleans, ``"true"`` / ``"false"`` strings, 0 / 1; missing is False."""
    value = _optional(value, False)
    if isinstance(value, str):
        if value.strip().lower() in ("true", "1", "yes"):
            return True
        if value.strip().lower() in ("false", "0", "no", "nan", "none", "null"):
            return False
        raise ValueError(f"fused={value!r} is not true or false")
    return bool(value)


def forecast_rows(rows: pd.DataFrame, predict: FamilyPredictor) -> pd.DataFrame:
    """One output row (:data:`OUTPUT_COLUMNS`) per input row; failures leave their reason in ``error``."""
    out = []
    for rec in rows.to_dict("records"):
        base = {k: rec.get(k) for k in INPUT_COLUMNS}
        base["parallel"] = _optional(rec.get("parallel"), None)
        base["fused"] = False
        try:
            base["fused"] = _flag(rec.get("fused"))
            missing = [k for k in INPUT_COLUMNS if _optional(rec.get(k), None) is None]
            if missing:
                raise ValueError(f"missing {', '.join(missing)} (each row needs {', '.join(INPUT_COLUMNS)})")
            fc = forecast(str(rec["model"]), str(rec["gpu"]), int(rec["batch"]), int(rec["seq_len"]),
                          str(rec["mode"]), base["parallel"], base["fused"], predict)
            values = {k: getattr(fc, k) for k in ("e2e_ms", "fw_ms", "bw_ms", "acc_ms")}
            values.update({f"ms_{g}": v for g, v in fc.by_group_ms.items()})
            out.append({**base, **values, "error": ""})
        except Exception as exc:  # one bad row must not fail the others
            out.append({**base, **dict.fromkeys(SUMMARY_KEYS, np.nan), "error": f"{type(exc).__name__}: {exc}"})
    return pd.DataFrame(out, columns=list(OUTPUT_COLUMNS))


class ForecasterModel(mlflow.pyfunc.PythonModel):
    """Pyfunc: rows ``model, gpu, batch, seq_len, mode[, parallel, fused]`` -> step-time forecasts."""

    def __init__(self, versions: Mapping[str, str]) -> None:
        self.versions = dict(versions)
        self.predictors: dict[str, KernelPredictor] = {}

    def __getstate__(self) -> dict[str, Any]:  # the predictors are artifacts, never pickled
        return {**self.__dict__, "predictors": {}}

    def load_context(self, context) -> None:
        self.predictors = {fam: mlflow.pyfunc.load_model(context.artifacts[f"family_{fam}"])
                           .unwrap_python_model().predictor for fam in self.versions}

    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        return forecast_rows(pd.DataFrame(model_input), as_family_predictor(self.predictors))


def _signature() -> ModelSignature:
    inputs = Schema([ColSpec("string", "model"), ColSpec("string", "gpu"), ColSpec("long", "batch"),
                     ColSpec("long", "seq_len"), ColSpec("string", "mode"),
                     ColSpec("string", "parallel", required=False),
                     # a string column: MLflow casts an optional boolean column with gaps to True
                     ColSpec("string", "fused", required=False)])
    outputs = Schema([ColSpec("string", c) if c in ("model", "gpu", "mode", "parallel", "error")
                      else ColSpec("boolean", c) if c == "fused"
                      else ColSpec("long", c) if c in ("batch", "seq_len") else ColSpec("double", c)
                      for c in OUTPUT_COLUMNS])
    return ModelSignature(inputs=inputs, outputs=outputs)


def _requirements() -> list[str]:
    reqs = []
    for dist in ("mlflow", "numpy", "pandas", "pyarrow", "xgboost-cpu", "torch", "tilecast"):
        try:
            reqs.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return reqs


def bundle_of(versions: Mapping[str, str]) -> str:
    """Canonical JSON of a bundle (family -> version), used to find an existing forecaster version."""
    return json.dumps({f: str(v) for f, v in sorted(versions.items())}, sort_keys=True)


def find_forecaster(versions: Mapping[str, str], client: MlflowClient | None = None) -> str | None:
    """The ``tilecast-forecaster`` version that bundles exactly ``versions``, if one is registered."""
    client = client or MlflowClient()
    try:
        found = client.search_model_versions(f"name = '{FORECASTER_NAME}'")
    except MlflowException:
        return None
    wanted = bundle_of(versions)
    matches = [mv for mv in found if mv.tags.get(BUNDLE_TAG) == wanted]
    return str(max(int(mv.version) for mv in matches)) if matches else None


def register_forecaster(versions: Mapping[str, str], alias: str = "champion", reason: str = "",
                        metrics: Mapping[str, float] | None = None, experiment_id: str | None = None) -> str:
    """Register (or reuse) the forecaster bundling ``tilecast-<family>`` ``versions`` and move ``@alias`` to it.

    Logs a run in ``experiment_id`` (default: the active run's experiment, else ``tilecast-forecaster``, never
    the store's Default experiment, whose artifacts would land in ``./mlruns`` of the working directory)
    with each family's model directory as an artifact. Returns the forecaster version.
    """
    client = MlflowClient()
    version = find_forecaster(versions, client)
    if version is None:
        if experiment_id is None:
            active = mlflow.active_run()
            experiment_id = active.info.experiment_id if active else ensure_experiment(FORECASTER_EXPERIMENT)
        with tempfile.TemporaryDirectory() as tmp, \
                mlflow.start_run(experiment_id=experiment_id, run_name="forecaster", nested=True):
            artifacts = {}
            for fam, v in sorted(versions.items()):
                path = Path(tmp) / fam
                mlflow.artifacts.download_artifacts(f"models:/{model_name(fam)}/{v}", dst_path=str(path))
                artifacts[f"family_{fam}"] = str(path)
            mlflow.set_tags({f"tilecast.version.{f}": str(v) for f, v in versions.items()})
            example = pd.DataFrame([{"model": "gpt2_large", "gpu": "l4", "batch": 1, "seq_len": 128,
                                     "mode": "inference", "parallel": "", "fused": "false"}])
            info = mlflow.pyfunc.log_model(name="forecaster", python_model=ForecasterModel(versions),
                                           artifacts=artifacts, signature=_signature(), input_example=example,
                                           pip_requirements=_requirements(), registered_model_name=FORECASTER_NAME,
                                           metadata={"tilecast_bundle": bundle_of(versions)})
            version = str(info.registered_model_version)
        client.set_model_version_tag(FORECASTER_NAME, version, BUNDLE_TAG, bundle_of(versions))
        for fam, v in versions.items():
            client.set_model_version_tag(FORECASTER_NAME, version, f"tilecast.version.{fam}", str(v))
    current = client.get_registered_model(FORECASTER_NAME).aliases.get(alias)
    if str(current) != version:
        move_alias(FORECASTER_NAME, alias, version, reason=reason or f"bundles {bundle_of(versions)}",
                   metrics=dict(metrics or {}), client=client)
    return version


def forecast_record(fc, versions: Mapping[str, str], source: str, alias: str,
                    notes: Iterable[str] = ()) -> dict[str, Any]:
    """The predict job's JSON: the forecast (``e2e_ms``, phases, ``ms_per_group``) and what produced it."""
    return {**fc.to_dict(), "forecaster": source, "alias": alias if source == "registry" else None,
            "versions": {f: str(v) for f, v in versions.items()}, "notes": list(notes)}


def predict_workload(model, gpu, batch: int, seq_len: int, mode: str, parallel: str | None = None,
                     fused: bool = False, source: str = "registry", alias: str = "champion",
                     calibrate: bool = True, dtype: str = "fp32") -> tuple[Any, dict[str, Any]]:
    """Forecast one workload with the chosen predictors: (``Forecast``, JSON-ready record)."""
    predict, versions = predictor_source(source, alias, calibrate)
    fc = forecast(model, gpu, batch, seq_len, mode, parallel, fused, predict, dtype=dtype)
    notes = list(getattr(predict, "notes", []))
    used = getattr(predict, "used_calibrations", {})
    notes += [f"calibration {label} applied" for label in used.values()]
    return fc, forecast_record(fc, versions, source, alias, notes)


def predict_serve(sw, gpu, source: str = "registry", alias: str = "champion", calibrate: bool = True,
                  pricing: Any = None) -> tuple[Any, dict[str, Any]]:
    """Forecast one serve workload (:class:`tilecast.forecast.serve.ServeWorkload`): (``ServeForecast``, JSON
    record with the cost per 1M output tokens when ``pricing`` prices the GPU)."""
    from tilecast.forecast.serve import forecast_serve

    predict, versions = predictor_source(source, alias, calibrate)
    fc = forecast_serve(sw, gpu, predict)
    record = {**fc.to_dict(), "forecaster": source, "alias": alias if source == "registry" else None,
              "versions": {f: str(v) for f, v in versions.items()}, "notes": list(getattr(predict, "notes", []))}
    if pricing is not None:
        usd_h = pricing.usd_per_gpu_hour(fc.gpu)
        record["usd_per_gpu_hour"] = usd_h
        record["usd_per_1m_output_tokens"] = usd_h / 3600.0 / fc.tokens_per_s_per_gpu * 1e6
    return fc, record
