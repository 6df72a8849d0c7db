"""One schema per job: each job's settings dataclasses registered as the job's Hydra structured config.

A job whose settings are a dataclass of the code (``train``: :class:`~tilecast.training.train.TrainSpec`,
``promote``: :class:`~tilecast.training.promotion.PromotionPolicy`, ``evaluate``: ``EvaluationSettings``,
``score`` / ``nightly``:
``ScoreSettings`` with its ``FitPolicy``, the nightly bootstrap's ``train`` / ``promote`` sections) gets a schema built
from those dataclasses' fields (:func:`schema_of`): their types and defaults, written once, in the code. The schema is
stored in Hydra's ``ConfigStore`` as ``<job>_schema`` and is the first entry of ``conf/<job>.yaml``'s defaults list,
so the YAML holds only the config groups, the documentation of each setting and the values where the job differs from
the dataclass (the nightly bootstrap trains without leave-one-GPU-out: ``train.logo: false``).

A value of the wrong type (``val_fraction=abc``, ``rollback=maybe``) is then Hydra's own error, reported on one line
with exit 2 (:func:`tilecast.cli.run.hydra_error_line`); a list setting given one value (``families=softmax``) is read
as a one-element list (:func:`listify`), as it always was.

The schemas are registered lazily (:func:`register`): the dataclasses live beside heavy code, and a job imports only
its own (``with_catalog_args`` registers the job's before Hydra composes; ``register_all`` for tests and tools).
"""
from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Dict, List, Optional  # noqa: UP035 (OmegaConf reads these annotations)

#: the group slots of a schema: a config group composes a mapping there (``mlflow``, ``matrix``, ...)
GROUP = Any


def _scalar(tp: Any) -> Any:
    return tp if tp in (bool, int, float, str) else Any


def hydra_type(tp: Any) -> Any:
    """The OmegaConf annotation for a settings field's type: tuples / sequences are lists, mappings are
    ``Dict[str, Any]``, paths are text, ``X | None`` is ``Optional[X]``, a dataclass a nested schema; anything
    else ``Any``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = hydra_type(args[0]) if len(args) == 1 else Any
        return inner if inner is Any else Optional[inner]  # noqa: UP045
    if origin in (tuple, list, Sequence) or tp in (tuple, list):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return List[_scalar(args[0]) if args else Any]  # noqa: UP006
    if origin in (dict, Mapping) or tp in (dict,):
        return Dict[str, Any]  # noqa: UP006
    if tp is Path:
        return str
    if dataclasses.is_dataclass(tp):
        return schema_of(tp)
    return _scalar(tp)


def _default(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Path):
        return str(value)
    return value


def _field(tp: Any, value: Any) -> dataclasses.Field:
    value = _default(value)
    if isinstance(value, list | dict) or dataclasses.is_dataclass(value):  # mutable: a fresh copy per instance
        return dataclasses.field(default_factory=lambda v=value: copy.deepcopy(v))
    return dataclasses.field(default=value)


def settings_fields(cls: type, drop: Sequence[str] = (), rename: Mapping[str, str] | None = None,
                    defaults: Mapping[str, Any] | None = None) -> list[tuple[str, Any, dataclasses.Field]]:
    """``(name, annotation, field)`` for each field of settings dataclass ``cls`` (but ``drop``), renamed as the conf
    files name it (``rename``: field -> key), its default from ``cls`` unless ``defaults`` names one."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name in drop:
            continue
        name = (rename or {}).get(f.name, f.name)
        tp = hydra_type(hints[f.name])
        if defaults and name in defaults:
            value = defaults[name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            value = "???"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            nested = schema_of(type(value))
            value = nested(**{k: _default(getattr(value, k)) for k in (g.name for g in dataclasses.fields(nested))})
        out.append((name, tp, _field(tp, value)))
    return out


_SCHEMAS: dict[type, type] = {}


def schema_of(cls: type, drop: Sequence[str] = (), rename: Mapping[str, str] | None = None,
              defaults: Mapping[str, Any] | None = None,
              extra: Sequence[tuple[str, Any, Any]] = (), name: str | None = None) -> type:
    """A Hydra structured config (a plain dataclass OmegaConf reads) with the fields of ``cls`` (see
    :func:`settings_fields`) and ``extra`` ``(key, annotation, default)`` settings the job adds."""
    key = cls if not (drop or rename or defaults or extra or name) else None
    if key is not None and key in _SCHEMAS:
        return _SCHEMAS[key]
    fields = settings_fields(cls, drop, rename, defaults)
    fields += [(k, tp, _field(tp, v)) for k, tp, v in extra]
    out = dataclasses.make_dataclass(name or f"{cls.__name__}Schema", fields)
    out.__doc__ = f"Schema of the settings {cls.__module__}.{cls.__qualname__} (fields, types and defaults)."
    if key is not None:
        _SCHEMAS[key] = out
    return out


def groups(*names: str) -> list[tuple[str, Any, Any]]:
    """Slots for config groups (``mlflow``, ``matrix``, ...): each composes its own mapping there."""
    return [(n, GROUP, None) for n in names]


# ---------------------------------------------------------------- the jobs' schemas


def _train() -> type:
    from tilecast.training.train import TrainSpec

    return schema_of(TrainSpec, drop=("predictor", "params", "experiment"), name="TrainSchema",
                     extra=[("workers", Optional[int], None), *groups("predictor", "mlflow")])  # noqa: UP045


def _promote() -> type:
    from tilecast.training.promotion import PromotionPolicy
    from tilecast.training.train import TrainSpec

    return schema_of(PromotionPolicy, name="PromoteSchema", extra=[
        ("families", List[str], TrainSpec.families),  # noqa: UP006 (what train.py trains by default)
        ("rollback", bool, False), ("labels_dir", Optional[str], None),  # noqa: UP045
        ("register_forecaster", bool, True), *groups("mlflow")])


def _evaluate() -> type:
    from tilecast.pipelines.evaluate import EvaluationSettings

    return schema_of(EvaluationSettings, drop=("experiment",), name="EvaluateSchema", extra=[
        (k, Optional[str], None) for k in ("serving", "training_runs", "output")] + groups("mlflow"))  # noqa: UP045


def _score() -> type:
    from tilecast.pipelines.score import ScoreSettings

    return schema_of(ScoreSettings, drop=("matrix", "pricing", "dask", "tracking_uri"),
                     rename={"predictor": "forecaster"}, defaults={"output_dir": "reports"}, name="ScoreSchema",
                     extra=groups("matrix", "pricing", "dask", "mlflow"))


def _nightly() -> type:
    from tilecast.pipelines.nightly import NightlySettings
    from tilecast.training.promotion import PromotionPolicy
    from tilecast.training.train import TrainSpec

    score = _score()
    bootstrap = schema_of(TrainSpec, drop=("families",), defaults={"predictor": "xgboost"}, name="BootstrapTrainSchema")
    return dataclasses.make_dataclass("NightlySchema", [
        (f.name, f.type, dataclasses.field(default=f.default) if f.default is not dataclasses.MISSING
         else dataclasses.field(default_factory=f.default_factory)) for f in dataclasses.fields(score)
    ] + [("experiment", str, dataclasses.field(default=NightlySettings.experiment)),
         ("train", bootstrap, dataclasses.field(default_factory=bootstrap)),
         ("promote", schema_of(PromotionPolicy), dataclasses.field(default_factory=schema_of(PromotionPolicy))),
         *[(n, GROUP, dataclasses.field(default=None)) for n in ("report", "fleet", "plans")]])


#: job (its ``conf/<job>.yaml``) -> the builder of its schema; the other jobs' conf files are their schema
JOB_SCHEMAS: dict[str, Callable[[], type]] = {
    "train": _train, "promote": _promote, "evaluate": _evaluate, "score": _score, "nightly": _nightly,
}

def _dask() -> type:
    from tilecast.scoring.cluster import DaskConfig

    return schema_of(DaskConfig, name="DaskSchema")


#: config group -> the builder of the schema every option of the group extends (``conf/<group>/<option>.yaml`` starts
#: ``defaults: [<group>_schema, _self_]`` and holds only its overrides)
GROUP_SCHEMAS: dict[str, Callable[[], type]] = {"dask": _dask}

_registered: dict[str, type] = {}


def schema_name(job: str) -> str:
    return f"{job}_schema"


def register(job: str) -> type | None:
    """Store ``job``'s schema in Hydra's ConfigStore (once) as ``<job>_schema``, and the config groups' schemas
    (:data:`GROUP_SCHEMAS`, every job may compose them); None for a job without one."""
    from hydra.core.config_store import ConfigStore

    for group, build in GROUP_SCHEMAS.items():
        if f"{group}/" not in _registered:
            _registered[f"{group}/"] = build()
            ConfigStore.instance().store(group=group, name=schema_name(group), node=_registered[f"{group}/"])
    if job not in JOB_SCHEMAS:
        return None
    if job not in _registered:
        _registered[job] = JOB_SCHEMAS[job]()
        ConfigStore.instance().store(name=schema_name(job), node=_registered[job])
    return _registered[job]


def register_all() -> None:
    for job in JOB_SCHEMAS:
        register(job)


def schema_defaults(job: str) -> dict[str, Any]:
    """The settings of ``job``'s schema with their defaults (group slots left out); empty for a job without one."""
    from omegaconf import OmegaConf

    schema = register(job)
    if schema is None:
        return {}
    node = OmegaConf.to_container(OmegaConf.structured(schema), resolve=False)
    return {k: v for k, v in node.items() if not (v is None and typing.get_type_hints(schema).get(k) is GROUP)}


def group_defaults(group: str) -> dict[str, Any]:
    """The defaults of config group ``group``'s schema (:data:`GROUP_SCHEMAS`); empty for a group without one."""
    from omegaconf import OmegaConf

    if group not in GROUP_SCHEMAS:
        return {}
    register("")
    return OmegaConf.to_container(OmegaConf.structured(_registered[f"{group}/"]), resolve=False)


def list_keys(job: str) -> set[str]:
    """The dotted keys of ``job``'s schema that hold a list (``families``, ``train.unseen_gpus``)."""
    schema = register(job)
    out: set[str] = set()

    def walk(cls: type, prefix: str) -> None:
        for name, tp in typing.get_type_hints(cls).items():
            if typing.get_origin(tp) in (list, List):  # noqa: UP006
                out.add(prefix + name)
            elif dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{name}.")

    if schema is not None:
        walk(schema, "")
    return out


def listify(job: str, argv: list[str]) -> list[str]:
    """``families=softmax`` as ``families=[softmax]`` for a list setting of ``job``'s schema (one value, not a
    sweep, a list, null or an interpolation)."""
    keys = list_keys(job)
    if not keys:
        return argv
    out = []
    for arg in argv:
        name, sep, value = arg.partition("=")
        bare = name.lstrip("+")
        v = value.strip()
        if sep and bare in keys and v and not v.startswith(("[", "${")) and v != "null" and "," not in v \
                and not v.endswith(")"):
            arg = f"{name}=[{value}]"
        out.append(arg)
    return out
