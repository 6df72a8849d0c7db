"""Per-family predictors in the MLflow registry: log + register, resolve an alias, load (cached).

A registered model ``tilecast-<family>`` holds one version per training run. Each version is a
servable pyfunc (:class:`TilePredictorModel`) whose artifact is the predictor's own ``save()``
directory; ``load_predictor`` hands back the underlying :class:`KernelPredictor`.
Serving it elsewhere (``mlflow models serve``) needs the ``tilecast`` package importable.

Loading never runs code from the store: tilecast reads a version's predictor from its data files only
(``meta.json``, XGBoost JSON, ``.npz``, the MLP's tensor file), never through MLflow's pyfunc loader (which
would run the stored ``pyfunc_entry.py`` or unpickle a ``python_model.pkl``). At registration the sha256 of
every file of the logged model (``MLmodel``, the entry file, the predictor directory) is recorded in the
version tag :data:`MANIFEST_TAG` with the predictor name, family and save-format version; loading copies
the files out of the store into a private temporary directory (nothing is written into the store),
checks them against that manifest and refuses a version whose files changed, appeared or went missing,
or that has no manifest (:class:`ModelIntegrityError`, a user error: jobs exit 2 with one line).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import shutil
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
from mlflow.store.artifact.models_artifact_repo import REGISTERED_MODEL_META_FILE_NAME
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

from tilecast.errors import UserError, UserLookupError
from tilecast.predictors import PREDICTORS, KernelPredictor, ModelFormatError
from tilecast.predictors.format import FORMAT_KEY, META_FILE
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FAMILIES, FAMILY_DIMS, FAMILY_OPTIONAL, TENSOR_FAMILIES

log = logging.getLogger(__name__)

MODEL_PREFIX = "tilecast-"
DEFAULT_ALIAS = "champion"
FALLBACK_ALIAS = {"champion": "challenger"}  # alias asked for -> alias used when it is not set yet
ENTRY_FILE = Path(__file__).with_name("pyfunc_entry.py")
TRAIN_COMMAND = "python jobs/train.py families=[{family}]"
#: version tag: JSON manifest of the logged model's files (sha256 each), written at registration
MANIFEST_TAG = "tilecast.manifest"
MANIFEST_VERSION = 1
#: where ``log_model(artifacts={"predictor": dir})`` puts the predictor inside a model's artifact directory
PREDICTOR_ARTIFACT = "artifacts/predictor"

#: distribution that provides each predictor's runtime (for the model's pip requirements)
_PREDICTOR_DIST = {"xgboost": "xgboost-cpu", "mlp": "torch"}
_BASE_DISTS = ("mlflow", "numpy", "pandas", "pyarrow")


class RegistryError(UserLookupError):
    """Nothing registered where a forecast needs it; the message names the command that fixes it."""


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


class ModelIntegrityError(RegistryError):
    """A registered version whose files are not what was registered (changed, added, missing), or that has
    no manifest to check them against; nothing of it is loaded. The message names model, version, file and fix."""

    def __init__(self, model: str, version: str, detail: str, alias: str | None = None) -> None:
        self.model, self.version, self.detail, self.alias = model, str(version), detail, alias
        family = model.removeprefix(MODEL_PREFIX)
        fix = train_command(family) if family in FAMILIES else "python jobs/train.py"
        where = f"{model} v{version}" + (f" (@{alias})" if alias else "")
        super().__init__(f"{where} refused, nothing of it was loaded: {detail}; register a new version with "
                         f"`{fix}` (or restore the store from a copy)")


def file_sha256(path: Path) -> str:
    """sha256 (hex) of a file's bytes."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files_of(directory: Path) -> dict[str, Path]:
    """Every entry under ``directory`` by POSIX relative path (directories left out), except MLflow's
    ``registered_model_meta`` at the top: MLflow's own loader writes it into a local store's model directory
    (``mlflow.pyfunc.load_model("models:/...")``), and tilecast never reads it."""
    return {rel: p for p in sorted(Path(directory).rglob("*")) if not p.is_dir() or p.is_symlink()
            if (rel := p.relative_to(directory).as_posix()) != REGISTERED_MODEL_META_FILE_NAME}


def predictor_manifest(directory: Path, predictor_name: str, family: str) -> dict[str, Any]:
    """What :data:`MANIFEST_TAG` records of a logged model ``directory``: sha256 of every file, the predictor,
    family and save-format version (``format_version`` of the predictor's ``meta.json``, None if unreadable)."""
    directory = Path(directory)
    try:
        fmt = json.loads((directory / PREDICTOR_ARTIFACT / META_FILE).read_text()).get(FORMAT_KEY)
    except (OSError, ValueError, AttributeError):
        fmt = None
    return {"manifest": MANIFEST_VERSION, "predictor": predictor_name, "family": family, "format_version": fmt,
            "files": {rel: file_sha256(p) for rel, p in _files_of(directory).items()}}


def sub_manifest(manifest: dict[str, Any], subpath: str = PREDICTOR_ARTIFACT) -> dict[str, Any]:
    """``manifest`` of the files under ``subpath`` only, relative to it (a bundle stores the predictor part)."""
    prefix = f"{subpath.rstrip('/')}/"
    files = {rel[len(prefix):]: h for rel, h in manifest["files"].items() if rel.startswith(prefix)}
    return {**manifest, "files": files}


def verify_files(directory: Path, manifest: dict[str, Any]) -> str | None:
    """What differs between the files under ``directory`` and ``manifest`` (None: every file as recorded)."""
    recorded: dict[str, str] = manifest.get("files") or {}
    found = _files_of(directory)
    links = [rel for rel, p in found.items() if p.is_symlink() or not p.is_file()]
    if links:
        return f"{links[0]} is not a plain file"
    missing = sorted(set(recorded) - set(found))
    if missing:
        return f"{missing[0]} is missing from its artifacts"
    extra = sorted(set(found) - set(recorded))
    if extra:
        return f"{extra[0]} was added to its artifacts after registration"
    for rel in sorted(recorded):
        digest = file_sha256(found[rel])
        if digest != recorded[rel]:
            return f"{rel} has sha256 {digest[:12]}..., not {recorded[rel][:12]}... as registered"
    return None


def model_name(family: str) -> str:
    """Registered model name of a family: ``tilecast-<family>``."""
    if family not in FAMILIES:
        raise UserError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
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
    cols += [ColSpec(kind, name, required=False) for name, kind in FAMILY_OPTIONAL.get(family, ())]
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
    ``tilecast-<family>`` version (what :func:`log_predictor` does after saving). The format is not checked
    (loading the version reads it); the version is created with its tags, :data:`MANIFEST_TAG` among them,
    in one registry call, so no version exists without the manifest its files are checked against."""
    name = model_name(family)
    example = input_example[[c for c in _signature(family).inputs.input_names() if c in input_example]]
    info = mlflow.pyfunc.log_model(
        name="model", python_model=str(ENTRY_FILE), artifacts={"predictor": str(directory)},
        model_config={"predictor": predictor_name, "family": family},
        signature=_signature(family), input_example=example.reset_index(drop=True),
        pip_requirements=_requirements(predictor_name))
    with tempfile.TemporaryDirectory(prefix="tilecast-logged-") as tmp:  # the files as the store holds them
        location = mlflow.get_logged_model(info.model_id).artifact_location
        logged = fetch_location(location, Path(tmp) / "model", what=f"logged model {info.model_id}'s artifact")
        manifest = predictor_manifest(logged, predictor_name, family)
    version_tags = {"tilecast.predictor": predictor_name, **(tags or {}),
                    MANIFEST_TAG: json.dumps(manifest, sort_keys=True)}
    mv = mlflow.register_model(info.model_uri, name, tags={k: str(v) for k, v in version_tags.items()})
    return MlflowClient().get_model_version(name, str(mv.version))


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
    """Load ``models:/<name>/<version>`` once per process (cache keyed by tracking URI and model URI), from
    its data files checked against its manifest (:func:`load_verified`); no stored code runs.

    A version saved in a format this code cannot read raises :class:`IncompatibleModelError`, one whose
    files are not as registered :class:`ModelIntegrityError` (both naming ``alias`` when given).
    """
    key = (mlflow.get_tracking_uri(), uri)
    if key not in _CACHE:
        name, _, version = uri.removeprefix("models:/").partition("/")
        try:
            _CACHE[key] = load_verified(name, version)
        except ModelFormatError as exc:
            raise IncompatibleModelError(name, version, exc, alias or _aliases_of(name, version)) from None
        except ModelIntegrityError as exc:
            raise ModelIntegrityError(name, version, exc.detail, alias or _aliases_of(name, version)) from None
    return _CACHE[key]


def version_manifest(mv: ModelVersion) -> dict[str, Any]:
    """The manifest recorded on a version (:data:`MANIFEST_TAG`); :class:`ModelIntegrityError` when absent or
    unreadable."""
    text = (mv.tags or {}).get(MANIFEST_TAG)
    if not text:
        raise ModelIntegrityError(mv.name, mv.version, f"it has no {MANIFEST_TAG} tag (the checksums of its files, "
                                                       "recorded at registration), so its files cannot be checked")
    try:
        manifest = json.loads(text)
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("manifest") != MANIFEST_VERSION \
            or not isinstance(manifest.get("files"), dict):
        raise ModelIntegrityError(mv.name, mv.version, f"its {MANIFEST_TAG} tag is not a manifest this tilecast reads "
                                                       f"(manifest version {MANIFEST_VERSION})")
    return manifest


def fetch_location(location: str, dst: Path, subpath: str = "", what: str = "") -> Path:
    """Copy the artifact directory at ``location`` (or its ``subpath``) into ``dst`` (created) and return where
    the files are; nothing is written into the store. A local store is read in place (a moved read-only one
    through :func:`tilecast.registry.local_store.local_path`), a server's is downloaded as plain artifacts."""
    from tilecast.registry.local_store import local_path

    dst = Path(dst)
    local = local_path(location, mlflow.get_tracking_uri())
    if local is not None:
        src = local / subpath if subpath else local
        if not src.is_dir():
            raise FileNotFoundError(f"{what or 'artifact'} directory {src} does not exist")
        shutil.copytree(src, dst, symlinks=True)
        return dst
    uri = f"{location.rstrip('/')}/{subpath}" if subpath else location
    got = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(dst)))
    return got if got.is_dir() else dst


def fetch_version_files(mv: ModelVersion, dst: Path, subpath: str = "") -> Path:
    """A registered version's artifact directory (or its ``subpath``) copied out of the store into ``dst``."""
    location = MlflowClient().get_model_version_download_uri(mv.name, str(mv.version)) or ""
    try:
        return fetch_location(location, dst, subpath, f"{mv.name} v{mv.version}'s artifact")
    except FileNotFoundError as exc:
        raise ModelIntegrityError(mv.name, mv.version, f"{exc} (a store moved or copied by hand, or artifacts "
                                                       "deleted)") from None


def load_verified(name: str, version: str, client: MlflowClient | None = None) -> KernelPredictor:
    """``name`` version ``version`` read from its data files once they match the manifest recorded at
    registration; raises :class:`ModelIntegrityError` (not as registered) or ``ModelFormatError``."""
    mv = (client or MlflowClient()).get_model_version(name, str(version))
    manifest = version_manifest(mv)
    predictor_name, family = manifest.get("predictor"), manifest.get("family")
    if predictor_name not in PREDICTORS:
        raise ModelIntegrityError(name, version, f"its manifest names predictor {predictor_name!r}; known: "
                                                 f"{', '.join(sorted(PREDICTORS))}")
    if name != f"{MODEL_PREFIX}{family}":
        raise ModelIntegrityError(name, version, f"its manifest is of family {family!r}, not of {name}")
    with tempfile.TemporaryDirectory(prefix="tilecast-load-") as tmp:
        directory = fetch_version_files(mv, Path(tmp) / "model")
        problem = verify_files(directory, manifest)
        if problem:
            raise ModelIntegrityError(name, version, problem)
        predictor = PREDICTORS[predictor_name].load(directory / PREDICTOR_ARTIFACT)
    if predictor.family != family:
        raise ModelIntegrityError(name, version, f"it holds a {predictor.family} predictor, registered as {family}")
    return predictor


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
