"""What-if specs: a catalog GPU or model with some fields changed, named so no output mistakes it for the real one.

``gpu=l4 gpu.mem_bw_gbs=600`` asks for an L4 with twice its bandwidth. :func:`with_overrides` validates every
changed field with the checks the catalog applies to ``conf/gpu/*.yaml`` and returns a new :class:`GpuSpec`
whose ``key`` says what changed (``l4+mem_bw_gbs=600``) and whose ``device_name`` says it is hypothetical,
so predict output, JSON records and score tables all show it, and no measured data, stored calibration or
lookup by device name joins with it. :func:`model_with_config` does the same for a model's Hugging Face
config (``model.config.n_layer=12`` -> ``gpt2_large+n_layer=12``).

Pure: no file I/O; the fields are read from the dataclass, so fields added to GpuSpec are covered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import yaml

from tilecast.specs.catalog import _holds, _is_float_field, invalid
from tilecast.specs.errors import SpecError
from tilecast.specs.gpu import _CHECKS as GPU_CHECKS
from tilecast.specs.gpu import GpuSpec, get_gpu
from tilecast.specs.model import FAMILIES, ModelSpec, config_fields

#: GpuSpec fields that name the GPU rather than describe it: pick another GPU instead of changing them
GPU_IDENTITY = ("key", "device_name", "aliases")
#: marks a what-if key: ``<catalog key>+<field>=<value>[+...]``
SEPARATOR = "+"


def _norm(value: Any) -> Any:
    """A value as compared across YAML, Hydra and the dataclass: numbers as floats, sequences as tuples."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (list, tuple)):  # empty is "none", as a catalog file's ``aliases: null`` loads
        return tuple(_norm(v) for v in value) or None
    if isinstance(value, Mapping):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    return value


def same_value(a: Any, b: Any) -> bool:
    """Whether two field values are the same spec value (``300 == 300.0``, ``[a] == (a,)``; ``True != 1``)."""
    return type(_norm(a)) is type(_norm(b)) and _norm(a) == _norm(b)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return format(value, "g")
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_fmt(v) for v in value) + "]"
    return str(value)


def what_if_label(changes: Mapping[str, Any]) -> str:
    """``field=value`` pairs joined by ``+``, sorted by field: the suffix of a what-if key."""
    return SEPARATOR.join(f"{k}={_fmt(v)}" for k, v in sorted(changes.items()))


def is_what_if(key: str) -> bool:
    """Whether a spec key names a what-if spec rather than a catalog entry."""
    return SEPARATOR in key


def what_if_gpu(key: str, lookup: Callable[[str], GpuSpec] = get_gpu) -> GpuSpec:
    """The GPU a what-if key names (``l4+mem_bw_gbs=600``: the catalog L4 with ``mem_bw_gbs=600``), so a key a
    forecast printed can be forecast again; a plain catalog name is that GPU. Values are read as YAML scalars."""
    base, *changes = key.split(SEPARATOR)
    overrides: dict[str, Any] = {}
    for change in changes:
        name, sep, text = change.partition("=")
        if not sep or not name:
            raise SpecError(f"what-if GPU {key!r}: {change!r} is not <field>=<value>")
        try:
            overrides[name] = yaml.safe_load(text) if text else None
        except yaml.YAMLError:
            overrides[name] = text
    return with_overrides(lookup(base), overrides)


def changed_fields(spec: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``values`` (a composed config node as a dict) that differ from ``spec``'s fields,
    plus any entry naming no field (so :func:`with_overrides` can refuse it)."""
    names = {f.name for f in dataclasses.fields(spec)}
    return {k: v for k, v in values.items() if k not in names or not same_value(getattr(spec, k), v)}


def with_overrides(spec: GpuSpec, overrides: Mapping[str, Any]) -> GpuSpec:
    """``spec`` with ``overrides`` (field -> value) applied: a hypothetical GPU, or ``spec`` itself when nothing
    changes. Every value passes the catalog's check for its field; an unknown field, a bad value or a change
    of the GPU's name raises :class:`SpecError` naming the field and the value."""
    where = f"gpu={spec.key}"
    fields = {f.name: f for f in dataclasses.fields(spec)}
    values: dict[str, Any] = {}
    for name, value in overrides.items():
        if name not in fields:
            raise SpecError(f"{where}: unknown field {name!r} (value {value!r}) in gpu.{name}={_fmt(value)}; "
                            f"known fields: {', '.join(sorted(n for n in fields if n not in GPU_IDENTITY))}")
        if name in GPU_IDENTITY:
            raise SpecError(f"{where}: field {name!r} names the GPU and cannot be changed (value {value!r}); "
                            f"choose another GPU with gpu=<key|device name>")
        f = fields[name]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        check = GPU_CHECKS.get(name)
        if value is None:
            if required:
                raise invalid(where, name, value, check or "a value")
        elif check is not None and not _holds(check, value):
            raise invalid(where, name, value, check)
        if _is_float_field(f) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, list):
            value = tuple(value)
        values[name] = value
    changes = {k: v for k, v in values.items() if not same_value(getattr(spec, k), v)}
    if not changes:
        return spec
    label = what_if_label(changes)
    names = {"aliases": ()} if "aliases" in fields else {}  # the catalog GPU's other names are not this one's
    return dataclasses.replace(spec, key=f"{spec.key}{SEPARATOR}{label}",
                               device_name=f"{spec.device_name} (what-if {label})", **names, **changes)


#: top-level fields of a model catalog file; only ``config.<key>`` may change in a what-if
MODEL_FIELDS = ("key", "family", "source", "config")


def model_with_config(spec: ModelSpec, config_overrides: Mapping[str, Any]) -> ModelSpec:
    """``spec`` with Hugging Face config keys changed (validated as the catalog validates a model file), keyed
    ``<key>+<config key>=<value>``; ``spec`` itself when nothing changes. A key the catalog config lacks is
    accepted only if the family reads it (it changes the spec); otherwise :class:`SpecError` lists the config."""
    where = f"model={spec.key}"
    changes = {k: v for k, v in config_overrides.items() if k not in spec.config or
               not same_value(spec.config[k], v)}
    if not changes:
        return spec
    cfg = {**spec.config, **changes}
    fields = config_fields(spec.family, cfg, where)
    unread = [k for k in changes if k not in spec.config and k not in FAMILIES[spec.family].builder_keys]
    derived = {k: v for k, v in fields.items() if getattr(spec, k) != v}
    if unread and not derived:
        raise SpecError(f"{where}: config key {unread[0]!r} (value {changes[unread[0]]!r}) is not in the model's "
                        f"config and changes nothing tilecast reads from a {spec.family} config; "
                        f"config keys: {', '.join(sorted(spec.config))}")
    return dataclasses.replace(spec, key=f"{spec.key}{SEPARATOR}{what_if_label(changes)}",
                               config=MappingProxyType(cfg), **fields)
