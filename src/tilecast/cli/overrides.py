"""The command line's overrides checked against the job's settings (:func:`check_overrides`) where Hydra's own
schema checks (:mod:`tilecast.cli.schema`) do not reach: a new key (``+bogus=1``), a deleted group or setting
(``~mlflow``), and the value types of the jobs whose conf files are their only schema."""
from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from tilecast.paths import CONF_DIR
from tilecast.specs import SpecError

#: the config groups whose fields a what-if may change (``gpu.<field>=``, ``model.config.<key>=``)
WHAT_IF_GROUPS = ("gpu", "model")

def _load_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    return node if isinstance(node, dict) else {}


def _defaults_list(primary: Mapping[str, Any]) -> dict[str, Any]:
    """``{group: option}`` of a conf file's defaults list (``_self_`` and plain config names left out)."""
    out: dict[str, Any] = {}
    for item in primary.get("defaults") or []:
        if isinstance(item, dict):
            out.update({str(k).lstrip("+"): v for k, v in item.items()})
    return out


def conf_defaults(config_name: str, choices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The job's settings as its schema and conf files give them, before any override: the job's schema
    (:mod:`tilecast.cli.schema`, if it has one) under ``conf/<config_name>.yaml``, with each config group of its
    defaults list (the option in ``choices``, else the file's default) merged in, the primary file's values winning
    (``_self_`` comes last in every job). ``hydra`` is left out."""
    from tilecast.cli.schema import group_defaults, schema_defaults

    primary = _load_yaml(CONF_DIR / f"{config_name}.yaml")
    groups = _defaults_list(primary)
    mine = {k: v for k, v in primary.items() if k not in ("defaults", "hydra")}
    out: dict[str, Any] = OmegaConf.to_container(OmegaConf.merge(schema_defaults(config_name), mine), resolve=False)
    for group, default in groups.items():
        option = (choices or {}).get(group, default)
        node = _load_yaml(CONF_DIR / group / f"{option}.yaml") if isinstance(option, str) and option != "???" else {}
        node.pop("defaults", None)
        if node is not None and group_defaults(group):  # a group with a schema: its defaults under the option's file
            node = OmegaConf.to_container(OmegaConf.merge(group_defaults(group), node), resolve=False)
        mine = out.get(group)
        out[group] = OmegaConf.to_container(OmegaConf.merge(node, mine), resolve=False) \
            if isinstance(mine, dict) else (node if mine is None else mine)
    return out


_ABSENT = object()


def _lookup(tree: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return _ABSENT
        tree = tree[part]
    return tree


def _open_mapping(defaults: Mapping[str, Any], key: str) -> bool:
    """Whether ``key`` falls under a mapping the conf files leave empty (``train.params: {}``: its keys are
    another object's fields, checked by the code that reads them) or under no mapping of the files at all."""
    node: Any = defaults
    for part in key.split(".")[:-1]:
        if not isinstance(node, dict) or part not in node:
            break
        node = node[part]
    return not isinstance(node, dict) or not node


def check_fields(section: str, cls: type, values: Mapping[str, Any]) -> None:
    """Check a config section meant as keyword arguments of dataclass ``cls`` (``nightly``'s ``train:`` ->
    ``TrainSpec``): an unknown key, or a value of another type than a boolean / numeric field's default, is a
    :class:`SpecError` naming ``<section>.<key>``."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in values.items():
        if key not in fields:
            raise SpecError(f"{section}.{key}={value}: {cls.__name__} has no field {key!r}; known: "
                            f"{', '.join(fields)}")
        default = fields[key].default
        problem = _type_problem(default, value) if not isinstance(default, dict) else None
        if problem:
            raise SpecError(f"{section}.{key}={value}: {problem} (the default is {_yaml_value(default)}), "
                            f"got {_kind(value)}")


def _did_you_mean(config_name: str, key: str) -> str:
    """``; did you mean 'val_fraction'?`` for a key close to a known one (same level), else ``""``."""
    if not config_name:
        return ""
    parent, _, leaf = key.rpartition(".")
    node = _lookup(conf_defaults(config_name), parent) if parent else conf_defaults(config_name)
    if not isinstance(node, dict):
        return ""
    close = difflib.get_close_matches(leaf, [str(k) for k in node], n=3)
    prefix = f"{parent}." if parent else ""
    return f"; did you mean {' or '.join(repr(prefix + c) for c in close)}?" if close else ""


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the text {value!r}"
    return f"{type(value).__name__} {value!r}"


def _type_problem(default: Any, value: Any) -> str | None:
    """Why ``value`` cannot stand where the conf file has ``default`` (None: it can). Only typed defaults are
    checked: a boolean, an integer, a number, a mapping; null, ``???`` and text defaults take anything here
    (the job validates those)."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "expected true or false"
    if isinstance(default, int):
        return None if value is None or (isinstance(value, int) and not isinstance(value, bool)) else \
            "expected an integer"
    if isinstance(default, float):
        return None if value is None or (isinstance(value, int | float) and not isinstance(value, bool)) else \
            "expected a number"
    if isinstance(default, dict):
        return None if isinstance(value, Mapping) else "expected a mapping {key: value, ...}"
    return None


def check_overrides(cfg: DictConfig) -> None:
    """Check the command line's overrides of a composed job config against the job's conf files
    (:func:`conf_defaults`), before the job reads any of them:

    - a value must have the type of the setting's default: a boolean takes ``true`` / ``false`` only (not
      ``maybe`` or ``no``), an integer an integer, a number a number, a mapping a mapping (else the job
      would read ``bool('no')`` as true or fail deep inside with a traceback);
    - a list setting given one value takes it as a one-element list (``families=softmax``);
    - ``+key=`` may not add a setting the job does not have (it would be ignored), except under a mapping the
      conf files leave empty (``+train.params.rounds=50``); ``~key`` may not delete a group or top-level setting
      (every job reads all of its own); a part of one may go (``~matrix.serve``).

    ``hydra.*``, config group choices (``predictor=mlp``) and what-if fields (``gpu.*``, ``model.*``: validated
    as specs) pass. Outside a Hydra run (no :class:`HydraConfig`) nothing is checked."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not HydraConfig.initialized():
        return
    hc = HydraConfig.get()
    choices = dict(hc.runtime.choices)
    defaults = conf_defaults(hc.job.config_name, choices)
    for ov in OverridesParser.create().parse_overrides(_task_overrides()):
        key = ov.key_or_group
        if re.split(r"[./]", key)[0] in ("hydra", *WHAT_IF_GROUPS) or (key in choices and not ov.is_delete()):
            continue
        if ov.is_delete():
            if "." not in key:  # a whole group or top-level setting: every job reads each of its own
                raise SpecError(f"{ov.input_line}: a setting of this job cannot be deleted; give it a value instead "
                                f"({key}=<value>, or {key}=null where null is allowed)")
            continue  # a part of one (~matrix.serve: an optional section); a key the job then misses is named
        default = _lookup(defaults, key)
        if default is _ABSENT:
            if (ov.is_add() or ov.is_force_add()) and not _open_mapping(defaults, key):
                raise SpecError(f"{ov.input_line}: this job has no setting {key!r} (it would be ignored)"
                                f"{_did_you_mean(hc.job.config_name, key)}")
            continue
        try:
            value = OmegaConf.select(cfg, key)
        except OmegaConfBaseException as exc:  # an interpolation that does not resolve
            why = str(getattr(exc, "msg", None) or exc).split("full_key:")[0].strip()
            raise SpecError(f"{ov.input_line}: {why}") from None
        if isinstance(default, list) and value is not None and not OmegaConf.is_config(value):
            OmegaConf.update(cfg, key, [value], merge=False)
            continue
        problem = _type_problem(default, value)
        if problem:
            raise SpecError(f"{ov.input_line}: {problem} (the default is {_yaml_value(default)}), got {_kind(value)}")


def _deletions() -> list[str]:
    """The ``~key`` overrides of the current Hydra run (none outside one)."""
    return [o for o in _task_overrides() if o.startswith("~")]


def _task_overrides() -> list[str]:
    """The command line's overrides of the current Hydra run as typed (``${...}`` unresolved); none outside one."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    return [str(o) for o in OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)]


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return f"a mapping of {', '.join(map(str, value))}"
    return repr(value)


