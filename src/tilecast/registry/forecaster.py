"""The servable end-to-end forecaster: registered model ``tilecast-forecaster``, an MLflow pyfunc.

One version bundles one predictor version per family (the champions when promotion registers it)
and the graph builder (the ``tilecast`` package), so

    mlflow models serve -m models:/tilecast-forecaster@champion --env-manager local

answers POSTed rows ``model, gpu, batch, seq_len, mode`` (optional ``parallel``, ``fused``) with
``e2e_ms``, ``fw_ms``, ``bw_ms``, ``acc_ms``, ``ms_<group>`` and the prediction interval of ``e2e_ms``:
``pred_lo_ms``, ``pred_hi_ms`` and ``interval_note`` (what it rests on, why it is wide: a new architecture,
another vendor), the same as ``predict.py``'s (:func:`tilecast.forecast.intervals.record_interval`), at
:data:`~tilecast.forecast.intervals.DEFAULT_LEVEL` unless the request's ``params`` ask for another
``interval_level`` (one outside [0.5, 0.99] is refused: HTTP 400). A row that cannot be forecast (an
unknown model or GPU, a workload that cannot be built) gets its reason in ``error`` and ``null`` in
every number and interval field (the answer is strict JSON: never a bare ``NaN``); the other rows still answer.

One request is forecast as a batch: identical rows once, each distinct workload's graph built once
(for every GPU it is asked on), and one kernel prediction per family and GPU for all of them
(:func:`forecast_rows`). A request of more than :data:`MAX_ROWS_ENV` rows (default
:data:`DEFAULT_MAX_ROWS`, read when the server starts) is refused whole with HTTP 400 naming the cap.

The bundled predictors are stored as their data files with the manifest of each family version;
loading checks them against it and runs no code from the bundle's artifacts (the forecaster itself is
MLflow's pickled pyfunc, which ``mlflow models serve`` needs; tilecast's jobs never load it).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
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
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.types.schema import ColSpec, ParamSchema, ParamSpec, Schema

from tilecast.errors import UserError
from tilecast.forecast import (
    GROUPS,
    SUMMARY_KEYS,
    FamilyPredictor,
    forecast,
    forecast_frame,
    op_latency_ms,
    stack_frames,
    summarise_many,
    workload_frame,
)
from tilecast.forecast.intervals import DEFAULT_LEVEL, IntervalTable, check_level, load_intervals, record_interval
from tilecast.forecast.workload import check_gpu_dtype
from tilecast.graph.parallel import parse_parallel
from tilecast.predictors import PREDICTORS, KernelPredictor
from tilecast.predictors.sources import FORECASTERS
from tilecast.registry.aliases import move_alias
from tilecast.registry.models import (
    PREDICTOR_ARTIFACT,
    ModelIntegrityError,
    RegistryError,
    fetch_version_files,
    load_version,
    model_name,
    sub_manifest,
    verify_files,
    version_manifest,
)
from tilecast.registry.tracking import ensure_experiment
from tilecast.specs import get_gpu, get_model

log = logging.getLogger(__name__)

FORECASTER_NAME = "tilecast-forecaster"
FORECASTER_EXPERIMENT = "tilecast-forecaster"  # runs that register a forecaster outside promote
BUNDLE_TAG = "tilecast.bundle"  # version tag: JSON family -> "tilecast-<family> v<n>"
INPUT_COLUMNS = ("model", "gpu", "batch", "seq_len", "mode")
#: the prediction interval of ``e2e_ms`` every answered row carries (null where the row failed)
INTERVAL_COLUMNS = ("pred_lo_ms", "pred_hi_ms", "interval_note")
OUTPUT_COLUMNS = ("model", "gpu", "batch", "seq_len", "mode", "parallel", "fused", *SUMMARY_KEYS,
                  *INTERVAL_COLUMNS, "error")
#: the forecasters a request can name (one list: :data:`tilecast.predictors.sources.FORECASTERS`)
SOURCES = FORECASTERS
#: environment variable of the server's row cap per request, and its default
MAX_ROWS_ENV, DEFAULT_MAX_ROWS = "TILECAST_SERVE_MAX_ROWS", 10_000


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


def predictor_source(source: str = "registry", alias: str = "champion", calibrate: bool = True,
                     dtypes: Iterable[str] = ("fp32",), models: Iterable[Any] = ()
                     ) -> tuple[FamilyPredictor, dict[str, str]]:
    """The predictors of the families a workload of ``dtypes`` uses, and only those
    (:func:`tilecast.predictors.sources.resolve_predictors`: ``registry`` champion, falling back to challenger, with the
    stored per-GPU calibrations when ``calibrate``; ``roofline``: the spec sheet, no versions)."""
    from tilecast.predictors.sources import resolve_predictors
    from tilecast.scoring.predictors import families_for

    resolved = resolve_predictors(source, alias, families_for(dtypes, models), calibrate)
    return resolved.predict, resolved.versions


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
        raise UserError(f"fused={value!r} is not true or false")
    return bool(value)


def _integer(key: str, value: Any) -> int:
    """A whole number (``4``, ``4.0``, ``"4"``); ``2.7`` or ``"x"`` is refused by name, never truncated."""
    if isinstance(value, bool):
        raise UserError(f"{key}={value!r} is not an integer")
    if isinstance(value, (int, np.integer)):
        return int(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{key}={value!r} is not an integer") from None
    if not number.is_integer():
        raise UserError(f"{key}={value!r} is not an integer")
    return int(number)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _memo(cache: dict, key: Any, make, *args: Any) -> Any:
    """``make(*args)`` once per key; an exception is remembered and re-raised for every row that asks again."""
    if key not in cache:
        try:
            cache[key] = (True, make(*args))
        except Exception as exc:  # noqa: BLE001 - one bad row must not fail the others
            cache[key] = (False, exc)
    ok, value = cache[key]
    if not ok:
        raise value
    return value


def _workloads(rows: pd.DataFrame) -> tuple[list[dict[str, Any]], list[tuple | str]]:
    """Each row's echoed inputs and either its workload key ``(model, gpu, batch, seq_len, mode, parallel,
    fused)`` (normalised: identical workloads share one) or the error that stops it."""
    bases, keys = [], []
    for rec in rows.to_dict("records"):
        base = {k: rec.get(k) for k in INPUT_COLUMNS}
        base["parallel"] = _optional(rec.get("parallel"), None)
        base["fused"] = False
        try:
            base["fused"] = _flag(rec.get("fused"))
            missing = [k for k in INPUT_COLUMNS if _optional(rec.get(k), None) is None]
            if missing:
                raise UserError(f"missing {', '.join(missing)} (each row needs {', '.join(INPUT_COLUMNS)})")
            key = (str(rec["model"]), str(rec["gpu"]), _integer("batch", rec["batch"]),
                   _integer("seq_len", rec["seq_len"]), str(rec["mode"]), base["parallel"], base["fused"])
        except Exception as exc:  # noqa: BLE001 - the row carries its reason
            key = _error_text(exc)
        bases.append(base)
        keys.append(key)
    return bases, keys


def forecast_workloads(keys: Iterable[tuple], predict: FamilyPredictor) -> dict[tuple, dict[str, float] | str]:
    """Summary (:data:`SUMMARY_KEYS`) or error text of each distinct workload key (see :func:`_workloads`).

    Checks run in :func:`tilecast.forecast.forecast`'s order (model, GPU, parallelism, dtype, graph), each
    once per distinct value; every GPU's workloads are stacked into one frame, so each family is predicted
    once per GPU for all of them. Should that batch fail, each workload is forecast alone, so an error stays
    with the row that causes it. Results equal :func:`~tilecast.forecast.forecast`'s per row."""
    models, gpus, pars, graphs, dtypes = {}, {}, {}, {}, {}
    out: dict[tuple, dict[str, float] | str] = {}
    by_gpu: dict[str, dict[tuple, pd.DataFrame]] = {}
    for key in dict.fromkeys(keys):
        model, gpu_name, batch, seq_len, mode, parallel, fused = key
        try:
            spec = _memo(models, model, get_model, model)
            gpu = _memo(gpus, gpu_name, get_gpu, gpu_name)
            par = _memo(pars, parallel, parse_parallel, parallel)
            _memo(dtypes, gpu.key, check_gpu_dtype, gpu, "fp32")
            graph_key = (spec.key, batch, seq_len, mode, par.tag if par else None, fused)
            frame = _memo(graphs, graph_key, workload_frame, spec, batch, seq_len, mode, par, fused)
        except Exception as exc:  # noqa: BLE001 - the row carries its reason
            out[key] = _error_text(exc)
            continue
        by_gpu.setdefault(gpu.key, {})[key] = frame
    for gpu_key, frames in by_gpu.items():
        gpu = get_gpu(gpu_key)
        try:
            stacked = stack_frames(dict(enumerate(frames.values())))
            table = summarise_many(stacked, op_latency_ms(stacked, gpu, predict))
            for i, key in enumerate(frames):
                out[key] = {k: float(table.at[i, k]) for k in SUMMARY_KEYS}
        except Exception:  # noqa: BLE001 - alone, each workload says whether it is the one that fails
            log.debug("batched forecast on %s failed; forecasting workload by workload", gpu_key, exc_info=True)
            for key, frame in frames.items():
                try:
                    out[key] = dict(forecast_frame(frame, gpu, predict)[0])
                except Exception as exc:  # noqa: BLE001
                    out[key] = _error_text(exc)
    return out


def workload_interval(key: tuple, summary: Mapping[str, float], level: float | None = None,
                      table: IntervalTable | None = None) -> dict[str, Any]:
    """:data:`INTERVAL_COLUMNS` of one forecast workload (key as :func:`_workloads`'; fp32), from its ``e2e_ms``
    and kernel time per group: :func:`~tilecast.forecast.intervals.record_interval`, as ``predict.py``'s."""
    record = {"mode": key[4], "dtype": "fp32", "e2e_ms": summary["e2e_ms"],
              "ms_per_group": {g: summary[f"ms_{g}"] for g in GROUPS}}
    got = record_interval(record, key[1], level, table)
    return {c: got[c] for c in INTERVAL_COLUMNS}


def forecast_rows(rows: pd.DataFrame, predict: FamilyPredictor, interval_level: float | None = None
                  ) -> pd.DataFrame:
    """One output row (:data:`OUTPUT_COLUMNS`) per input row, its interval at ``interval_level`` (default
    :data:`~tilecast.forecast.intervals.DEFAULT_LEVEL`); failures leave their reason in ``error`` (and missing
    values in the numbers and interval fields). Identical rows are forecast once and the rest as one batch
    (:func:`forecast_workloads`)."""
    level = check_level(interval_level)
    bases, keys = _workloads(rows)
    results = forecast_workloads([k for k in keys if isinstance(k, tuple)], predict)
    table = load_intervals() if any(isinstance(v, dict) for v in results.values()) else None
    for key, got in results.items():  # once per distinct workload
        if isinstance(got, dict):
            try:
                got.update(workload_interval(key, got, level, table))
            except Exception as exc:  # noqa: BLE001 - the row carries its reason
                results[key] = _error_text(exc)
    failed = {**dict.fromkeys(SUMMARY_KEYS, np.nan), "pred_lo_ms": np.nan, "pred_hi_ms": np.nan,
              "interval_note": None}
    out = []
    for base, key in zip(bases, keys, strict=True):
        got = results[key] if isinstance(key, tuple) else key
        if isinstance(got, str):
            out.append({**base, **failed, "error": got})
        else:
            out.append({**base, **got, "error": ""})
    return pd.DataFrame(out, columns=list(OUTPUT_COLUMNS))


def json_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every missing or non-finite number as None, so it serialises to strict JSON (``null``)."""
    out = frame.astype(object)
    numeric = frame.select_dtypes(include="number")
    bad = pd.DataFrame(False, index=frame.index, columns=frame.columns)
    bad[numeric.columns] = ~np.isfinite(numeric.to_numpy(dtype=float))
    return out.mask(bad | frame.isna(), None)


def max_rows(environ: Mapping[str, str] = os.environ) -> int:
    """The server's row cap per request: :data:`MAX_ROWS_ENV`, else :data:`DEFAULT_MAX_ROWS`."""
    text = environ.get(MAX_ROWS_ENV)
    if text is None or not text.strip():
        return DEFAULT_MAX_ROWS
    try:
        cap = int(text)
    except ValueError:
        cap = 0
    if cap < 1:
        raise UserError(f"{MAX_ROWS_ENV}={text!r} must be a whole number of rows >= 1")
    return cap


class ForecasterModel(mlflow.pyfunc.PythonModel):
    """Pyfunc: rows ``model, gpu, batch, seq_len, mode[, parallel, fused]`` -> step-time forecasts."""

    def __init__(self, versions: Mapping[str, str], manifests: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.versions = dict(versions)
        self.manifests = dict(manifests or {})
        self.predictors: dict[str, KernelPredictor] = {}
        self.max_rows = DEFAULT_MAX_ROWS

    def __getstate__(self) -> dict[str, Any]:  # the predictors are artifacts, never pickled
        return {**self.__dict__, "predictors": {}}

    def load_context(self, context) -> None:
        """Each family's predictor from its data files, checked against the manifest of its version."""
        manifests = getattr(self, "manifests", None) or {}
        self.predictors = {}
        for fam, v in self.versions.items():
            name = model_name(fam)
            if fam not in manifests:
                raise ModelIntegrityError(name, v, "this forecaster version was registered without its manifest; "
                                                   "register a new one with `python jobs/promote.py`")
            directory = Path(context.artifacts[f"family_{fam}"])
            problem = verify_files(directory, manifests[fam])
            if problem:
                raise ModelIntegrityError(name, v, f"in {FORECASTER_NAME}: {problem}")
            self.predictors[fam] = PREDICTORS[manifests[fam]["predictor"]].load(directory)
        self.max_rows = max_rows()
        load_intervals()  # no interval quantiles: the server fails when it starts, not on every request

    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        """The answer rows (:func:`forecast_rows`, :func:`json_ready`); ``params``: optional ``interval_level``."""
        rows = pd.DataFrame(model_input)
        cap = getattr(self, "max_rows", DEFAULT_MAX_ROWS)
        if len(rows) > cap:
            raise MlflowException(f"{len(rows)} rows in one request; at most {cap} ({MAX_ROWS_ENV} when the "
                                  f"server starts): split the request", error_code=INVALID_PARAMETER_VALUE)
        try:
            level = check_level((params or {}).get("interval_level"))
        except ValueError as exc:
            raise MlflowException(str(exc), error_code=INVALID_PARAMETER_VALUE) from None
        return json_ready(forecast_rows(rows, as_family_predictor(self.predictors), level))


def _signature() -> ModelSignature:
    inputs = Schema([ColSpec("string", "model"), ColSpec("string", "gpu"), ColSpec("long", "batch"),
                     ColSpec("long", "seq_len"), ColSpec("string", "mode"),
                     ColSpec("string", "parallel", required=False),
                     # a string column: MLflow casts an optional boolean column with gaps to True
                     ColSpec("string", "fused", required=False)])
    outputs = Schema([ColSpec("string", c) if c in ("model", "gpu", "mode", "parallel", "interval_note", "error")
                      else ColSpec("boolean", c) if c == "fused"
                      else ColSpec("long", c) if c in ("batch", "seq_len") else ColSpec("double", c)
                      for c in OUTPUT_COLUMNS])
    params = ParamSchema([ParamSpec("interval_level", "double", DEFAULT_LEVEL)])
    return ModelSignature(inputs=inputs, outputs=outputs, params=params)


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
            artifacts, manifests = {}, {}
            for fam, v in sorted(versions.items()):  # each family's predictor files, as registered
                mv = client.get_model_version(model_name(fam), str(v))
                manifest = version_manifest(mv)
                path = fetch_version_files(mv, Path(tmp) / fam)
                problem = verify_files(path, manifest)
                if problem:
                    raise ModelIntegrityError(mv.name, v, problem)
                manifests[fam] = sub_manifest(manifest, PREDICTOR_ARTIFACT)
                artifacts[f"family_{fam}"] = str(path / PREDICTOR_ARTIFACT)
            mlflow.set_tags({f"tilecast.version.{f}": str(v) for f, v in versions.items()})
            example = pd.DataFrame([{"model": "gpt2_large", "gpu": "l4", "batch": 1, "seq_len": 128,
                                     "mode": "inference", "parallel": "", "fused": "false"}])
            info = mlflow.pyfunc.log_model(name="forecaster", python_model=ForecasterModel(versions, manifests),
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
                     calibrate: bool = True, dtype: str = "fp32", interval_level: float | None = None
                     ) -> tuple[Any, dict[str, Any]]:
    """Forecast one workload with the chosen predictors: (``Forecast``, JSON-ready record with ``pred_lo_ms`` /
    ``pred_hi_ms`` at ``interval_level``, default :data:`tilecast.forecast.intervals.DEFAULT_LEVEL`)."""
    level = check_level(interval_level)  # a bad level is refused before any forecast
    predict, versions = predictor_source(source, alias, calibrate, dtypes=(dtype,), models=(model,))
    fc = forecast(model, gpu, batch, seq_len, mode, parallel, fused, predict, dtype=dtype)
    notes = list(getattr(predict, "notes", []))
    used = getattr(predict, "used_calibrations", {})
    notes += [f"calibration {label} applied" for label in used.values()]
    record = forecast_record(fc, versions, source, alias, notes)
    record.update(record_interval(record, gpu, level))
    return fc, record


def predict_serve(sw, gpu, source: str = "registry", alias: str = "champion", calibrate: bool = True,
                  pricing: Any = None, interval_level: float | None = None, engine: str = "vllm",
                  engine_version: str | None = None, policy: Any = None) -> tuple[Any, dict[str, Any]]:
    """Forecast one serve workload (:class:`tilecast.forecast.serve.ServeWorkload`) as ``engine`` serves it:
    (``ServeForecast``, JSON record with the cost per 1M output tokens when ``pricing`` prices the GPU, and TTFT /
    TPOT intervals)."""
    from tilecast.forecast.serve import forecast_serve

    level = check_level(interval_level)
    predict, versions = predictor_source(source, alias, calibrate, dtypes=(sw.dtype,), models=(sw.model,))
    fc = forecast_serve(sw, gpu, predict, engine, engine_version, policy)
    record = {**fc.to_dict(), "forecaster": source, "alias": alias if source == "registry" else None,
              "versions": {f: str(v) for f, v in versions.items()}, "notes": list(getattr(predict, "notes", []))}
    record.update(record_interval(record, gpu, level))
    if pricing is not None:
        usd_h = pricing.usd_per_gpu_hour(fc.gpu)
        record["usd_per_gpu_hour"] = usd_h
        record["price_estimate"] = pricing.price(fc.gpu).estimate
        # no cost for a configuration that does not fit: it cannot run
        record["usd_per_1m_output_tokens"] = usd_h / 3600.0 / fc.tokens_per_s_per_gpu * 1e6 if fc.memory.fits \
            else None
        if note := pricing.note(fc.gpu):
            record["notes"].append(note)
    return fc, record


def export_forecaster(alias: str, dst: Path, client: MlflowClient | None = None) -> tuple[Path, str]:
    """Copy ``tilecast-forecaster@<alias>``'s model directory out of the store into ``dst``: ``(directory,
    version)``. The copy is self-contained (the family predictors are its artifacts, checked against the
    manifests recorded at registration when it loads): serving it reads nothing else of the store and writes
    nothing into it, whatever the store is (a copy, a moved or read-only one, a server)."""
    client = client or MlflowClient()
    try:
        version = client.get_registered_model(FORECASTER_NAME).aliases.get(alias)
    except MlflowException:
        version = None
    if version is None:
        raise RegistryError(f"no {FORECASTER_NAME}@{alias} in {mlflow.get_tracking_uri()}: promote a champion first "
                            f"(`python jobs/promote.py`, or `python jobs/nightly.py` on an empty store)")
    mv = client.get_model_version(FORECASTER_NAME, str(version))
    return fetch_version_files(mv, Path(dst) / "forecaster"), str(version)
