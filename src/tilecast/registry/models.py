"""Per-family predictors in the MLflow registry: log + register, resolve an alias, load (cached).

A registered model ``tilecast-<family>`` holds one version per training run. Each version is a
servable pyfunc (:class:`TilePredictorModel`) whose artifact is the predictor's own ``save()``
directory; ``load_predictor`` hands back the underlying :class:`KernelPredictor`.
Serving it elsewhere (``mlflow models serve``) needs the ``tilecast`` package importable.
"""

from __future__ import annotations

import importlib.metadata
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import mlflow
import numpy as np
import pandas as pd
from mlflow import MlflowClient
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

from tilecast.predictors import PREDICTORS, KernelPredictor, ModelFormatError
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FAMILIES, FAMILY_DIMS, TENSOR_FAMILIES

log = logging.getLogger(__name__)

MODEL_PREFIX = "tilecast-"
DEFAULT_ALIAS = "champion"
FALLBACK_ALIAS = {"champion": "challenger"}  # alias asked for -> alias used when it is not set yet
ENTRY_FILE = Path(__file__).with_name("pyfunc_entry.py")
TRAIN_COMMAND = "python jobs/train.py families=[{family}]"

#: distribution that provides each predictor's runtime (for the model's pip requirements)
_PREDICTOR_DIST = {"xgboost": "xgboost-cpu", "mlp": "torch"}
_BASE_DISTS = ("mlflow", "numpy", "pandas", "pyarrow")


class RegistryError(LookupError):
    """Nothing registered where a forecast needs it; the message names the command that fixes it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IncompatibleModelError(RegistryError):
    """A registered version whose saved predictor this tilecast cannot read (an old or newer save format).

    The message names the model, version (and alias when known), the format found and the formats read,
    and the command that registers a loadable version.
    """

    def __init__(self, model: str, version: str, cause: ModelFormatError, alias: str | None = None) -> None:
        self.model, self.version, self.cause, self.alias = model, str(version), cause, alias
        super().__init__(self.describe())

    @property
    def fix(self) -> str:
        """The command that registers a loadable version of this model."""
        family = self.model.removeprefix(MODEL_PREFIX)
        return train_command(family) if family in FAMILIES else "python jobs/train.py"

    def describe(self) -> str:
        where = f"{self.model} v{self.version}" + (f" (@{self.alias})" if self.alias else "")
        return (f"{where} cannot be loaded: its {self.cause.kind} has {self.cause.found_text()}"
                + (f" ({self.cause.detail})" if self.cause.detail else "")
                + f", this tilecast reads {self.cause.supported_text()}; retrain it with `{self.fix}`")

    def at_alias(self, alias: str) -> IncompatibleModelError:
        """The same error naming the alias the version was reached through."""
        return IncompatibleModelError(self.model, self.version, self.cause, alias)


def model_name(family: str) -> str:
    """Registered model name of a family: ``tilecast-<family>``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    return f"{MODEL_PREFIX}{family}"


def train_command(family: str, alias: str = DEFAULT_ALIAS) -> str:
    """The command that registers a version of ``family`` carrying ``alias`` (or the challenger it falls back to)."""
    command = TRAIN_COMMAND.format(family=family)
    return command if alias in ("challenger", *FALLBACK_ALIAS) else f"{command} alias={alias}"


class TilePredictorModel(mlflow.pyfunc.PythonModel):
    """Servable wrapper: ``predict(rows, params={"gpu": key})`` -> a ``pred_ms`` column.

    Rows are in the data's kernel schema; without ``gpu`` each row's ``Device`` names its GPU. The
    predictor name and family come from ``model_config``; the artifact ``predictor`` is its save() directory.
    """

    predictor: KernelPredictor | None = None

    def load_context(self, context) -> None:
        name = context.model_config["predictor"]
        directory = Path(context.artifacts["predictor"])
        if name not in PREDICTORS:
            raise ModelFormatError("predictor", directory, None, (),
                                   f"unknown predictor {name!r}; known: {', '.join(sorted(PREDICTORS))}")
        self.predictor = PREDICTORS[name].load(directory)

    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        gpu = (params or {}).get("gpu") or None
        pred = self.predictor.predict_ms(pd.DataFrame(model_input), get_gpu(gpu) if gpu else None)
        return pd.DataFrame({"pred_ms": np.asarray(pred, dtype=float)})


def _signature(family: str) -> ModelSignature:
    cols = [ColSpec("string", "OPName"), *(ColSpec("long", d, required=d != "Hkv") for d in FAMILY_DIMS[family]),
            ColSpec("string", "Device", required=False)]
    if family in TENSOR_FAMILIES:  # absent: fp32, as every kernel row without a dtype
        cols.append(ColSpec("string", "dtype", required=False))
        if family.startswith("attn_"):
            cols.append(ColSpec("string", "kv_dtype", required=False))
    return ModelSignature(Schema(cols), Schema([ColSpec("double", "pred_ms")]),
                          ParamSchema([ParamSpec("gpu", "string", "")]))


def _requirements(predictor_name: str) -> list[str]:
    dists = [*_BASE_DISTS, *([_PREDICTOR_DIST[predictor_name]] if predictor_name in _PREDICTOR_DIST else [])]
    reqs = []
    for dist in dists:
        try:
            reqs.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            reqs.append(dist)
    return reqs


def log_predictor(predictor: KernelPredictor, input_example: pd.DataFrame,
                  tags: dict[str, str] | None = None) -> ModelVersion:
    """Log ``predictor`` as a pyfunc in the active run and register it as a new ``tilecast-<family>`` version.

    ``input_example``: a few rows in the family's kernel schema (with ``Device``). Version tags:
    ``tags`` plus the predictor name. Returns the registered :class:`ModelVersion` (no alias set).
    """
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "predictor"
        directory.mkdir()
        predictor.save(directory)
        return log_saved_predictor(directory, predictor.name, predictor.family, input_example, tags)


def log_saved_predictor(directory: Path, predictor_name: str, family: str, input_example: pd.DataFrame,
                        tags: dict[str, str] | None = None) -> ModelVersion:
    """Log a predictor's ``save()`` ``directory`` as a pyfunc in the active run, registered as a new
    ``tilecast-<family>`` version (what :func:`log_predictor` does after saving). Nothing is checked:
    loading the version reads the directory."""
    name = model_name(family)
    example = input_example[[c for c in _signature(family).inputs.input_names() if c in input_example]]
    info = mlflow.pyfunc.log_model(
        name="model", python_model=str(ENTRY_FILE), artifacts={"predictor": str(directory)},
        model_config={"predictor": predictor_name, "family": family},
        signature=_signature(family), input_example=example.reset_index(drop=True),
        pip_requirements=_requirements(predictor_name), registered_model_name=name)
    version = str(info.registered_model_version)
    client = MlflowClient()
    for key, value in {"tilecast.predictor": predictor_name, **(tags or {})}.items():
        client.set_model_version_tag(name, version, key, str(value))
    return client.get_model_version(name, version)


@dataclass(frozen=True)
class Resolved:
    """An alias resolved to a version; ``alias`` is the one used (differs from ``requested`` on fallback)."""

    family: str
    requested: str
    alias: str
    version: ModelVersion

    @property
    def uri(self) -> str:
        return f"models:/{self.version.name}/{self.version.version}"

    @property
    def fell_back(self) -> bool:
        return self.alias != self.requested

    def describe(self) -> str:
        text = f"{self.version.name} v{self.version.version} (@{self.alias})"
        return f"{text}, no @{self.requested} yet" if self.fell_back else text


def resolve_alias(family: str, alias: str = DEFAULT_ALIAS, client: MlflowClient | None = None) -> Resolved:
    """Version behind ``tilecast-<family>@<alias>``; ``champion`` falls back to ``challenger`` (logged).

    Raises :class:`RegistryError` naming the train command when nothing fits.
    """
    client = client or MlflowClient()
    name = model_name(family)
    fix = train_command(family, alias)
    try:
        aliases = client.get_registered_model(name).aliases
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        raise RegistryError(f"no registered model {name!r} in {mlflow.get_tracking_uri()}; create it with "
                            f"`{fix}`") from None
    used = alias
    if alias not in aliases and FALLBACK_ALIAS.get(alias) in aliases:
        used = FALLBACK_ALIAS[alias]
        log.warning("%s has no @%s yet: using @%s (v%s) instead", name, alias, used, aliases[used])
    if used not in aliases:
        known = ", ".join(f"@{a}=v{v}" for a, v in sorted(aliases.items())) or "none"
        raise RegistryError(f"{name} has no alias @{alias} (aliases: {known}); create it with `{fix}`")
    return Resolved(family, alias, used, client.get_model_version(name, str(aliases[used])))


class LoadedPredictor(NamedTuple):
    """A predictor loaded from the registry with the version and alias it came from."""

    predictor: KernelPredictor
    version: ModelVersion
    resolved: Resolved


_CACHE: dict[tuple[str, str], KernelPredictor] = {}


def load_version(uri: str, alias: str | None = None) -> KernelPredictor:
    """Load ``models:/<name>/<version>`` once per process (cache keyed by tracking URI and model URI).

    A version saved in a format this code cannot read raises :class:`IncompatibleModelError` (naming
    ``alias`` when given).
    """
    key = (mlflow.get_tracking_uri(), uri)
    if key not in _CACHE:
        try:
            _CACHE[key] = mlflow.pyfunc.load_model(uri).unwrap_python_model().predictor
        except ModelFormatError as exc:
            name, _, version = uri.removeprefix("models:/").partition("/")
            raise IncompatibleModelError(name, version, exc, alias or _aliases_of(name, version)) from None
    return _CACHE[key]


def _aliases_of(name: str, version: str) -> str | None:
    """``challenger`` / ``challenger, @xgboost``: the aliases on a version, for messages (None: none or unknown)."""
    try:
        aliases = MlflowClient().get_model_version(name, version).aliases
    except MlflowException:
        return None
    return ", @".join(sorted(aliases)) or None


def load_predictor(family: str, alias: str = DEFAULT_ALIAS) -> LoadedPredictor:
    """The predictor behind ``tilecast-<family>@<alias>`` (champion falls back to challenger)."""
    resolved = resolve_alias(family, alias)
    return LoadedPredictor(load_version(resolved.uri, resolved.alias), resolved.version, resolved)
