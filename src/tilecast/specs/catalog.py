"""Shared YAML-catalog mechanics: load a folder of ``<key>.yaml`` files into frozen specs."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tilecast.specs.errors import SpecError, UnknownSpecError

T = TypeVar("T")

#: A field check: a predicate whose docstring says what it expects ("a positive number").
Check = Callable[[Any], bool]


def read_yaml(path: Path) -> dict[str, Any]:
    """Read one catalog file as a mapping, or raise :class:`SpecError` naming the file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of fields, got {type(data).__name__} {data!r}")
    return data


def invalid(path: Path, name: str, value: Any, check: Check | str) -> SpecError:
    """The error for field ``name`` of file ``path`` holding ``value`` that fails ``check``."""
    expected = check if isinstance(check, str) else (check.__doc__ or check.__name__)
    return SpecError(f"{path}: field {name!r} has invalid value {value!r} (expected {expected})")


def build_dataclass(cls: type[T], data: dict[str, Any], path: Path, checks: dict[str, Check]) -> T:
    """Build frozen dataclass ``cls`` from ``data``; every problem names file, field and value.

    ``checks`` maps a field name to a predicate that must hold for its value. Required fields (no
    default) must be present and not null; optional ones may be null. Integers given for ``float``
    fields become floats, so a spec compares and serialises the same however its file spelled them.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SpecError(f"{path}: unknown field {unknown[0]!r} (value {data[unknown[0]]!r}); "
                        f"known fields: {', '.join(sorted(fields))}")
    values = dict(data)
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in values:
            raise SpecError(f"{path}: missing field {name!r}")
        if name not in values:
            continue
        value = values[name]
        check = checks.get(name)
        if value is None:
            if required:
                raise invalid(path, name, value, check or "a value")
            continue
        if check is not None and not _holds(check, value):
            raise invalid(path, name, value, check)
        if _is_float_field(f) and isinstance(value, int) and not isinstance(value, bool):
            values[name] = float(value)
    return cls(**values)


def _holds(check: Check, value: Any) -> bool:
    try:
        return bool(check(value))
    except (TypeError, ValueError):
        return False


def _is_float_field(f: dataclasses.Field) -> bool:
    return f.type in (float, "float", "float | None")


def positive(x: Any) -> bool:
    """a positive finite number"""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def positive_int(x: Any) -> bool:
    """a positive integer"""
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def nonempty_str(x: Any) -> bool:
    """a non-empty string"""
    return isinstance(x, str) and x.strip() != ""


def one_of(*allowed: Any) -> Check:
    """A check that the value is one of ``allowed``."""

    def check(x: Any) -> bool:
        return any(x == a and type(x) is type(a) for a in allowed)

    check.__doc__ = "one of " + ", ".join(repr(a) for a in allowed)
    return check


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.lower())


def unknown_error(kind: str, wanted: str, known: Iterable[str] | Mapping[str, Iterable[str]],
                  n: int = 5) -> UnknownSpecError:
    """An error for an unknown ``kind`` naming the ``n`` closest known names, then all of them.

    ``known`` is the catalog keys, or a mapping key -> other names of it (a GPU's device name and
    label directory); a key is as close as its closest name, compared case- and separator-blind,
    and names that contain the wanted one (or that it contains) come first.
    """
    aliases = {k: list(v) for k, v in known.items()} if isinstance(known, Mapping) else {k: [] for k in known}
    target = _norm(wanted)

    def closeness(key: str) -> tuple[bool, float]:  # one name inside the other first, then similarity
        names = [_norm(a) for a in [key, *aliases[key]]]
        return (any(target in a or a in target for a in names),
                max(difflib.SequenceMatcher(None, target, a).ratio() for a in names))

    if not aliases:
        return UnknownSpecError(f"unknown {kind} {wanted!r}; none are known")
    ranked = sorted(aliases, key=closeness, reverse=True)[:n]
    shown = [f"{k} ({aliases[k][0]})" if aliases[k] else k for k in ranked]
    return UnknownSpecError(f"unknown {kind} {wanted!r}; closest known: {', '.join(shown)}; "
                            f"all known: {', '.join(sorted(aliases))}")
