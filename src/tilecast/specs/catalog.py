"""Shared YAML-catalog mechanics: load a folder of ``<key>.yaml`` files into frozen specs."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tilecast.specs.errors import SpecError, UnknownSpecError

T = TypeVar("T")


def read_yaml(path: Path) -> dict[str, Any]:
    """Read one catalog file as a mapping, or raise :class:`SpecError` naming the file."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    return data


def build_dataclass(cls: type[T], data: dict[str, Any], path: Path, checks: dict[str, Callable]) -> T:
    """Build frozen dataclass ``cls`` from ``data``; every problem names file, field and value.

    ``checks`` maps a field name to a predicate that must hold for a present, non-null value.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SpecError(f"{path}: unknown field {unknown[0]!r} (value {data[unknown[0]]!r}); "
                        f"known fields: {', '.join(sorted(fields))}")
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in data:
            raise SpecError(f"{path}: missing field {name!r}")
    for name, check in checks.items():
        value = data.get(name)
        if value is None:
            continue
        ok = False
        try:
            ok = bool(check(value))
        except TypeError:
            ok = False
        if not ok:
            raise SpecError(f"{path}: field {name!r} has invalid value {value!r}")
    return cls(**data)


def positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def nonempty_str(x: Any) -> bool:
    return isinstance(x, str) and x.strip() != ""


def unknown_error(kind: str, wanted: str, known: Iterable[str], n: int = 5) -> UnknownSpecError:
    """An error for an unknown ``kind`` that lists the closest known names."""
    known = sorted(set(known))
    close = difflib.get_close_matches(wanted, known, n=n, cutoff=0.3)
    if not close:
        close = difflib.get_close_matches(wanted.lower(), [k.lower() for k in known], n=n, cutoff=0.0)
        close = [k for k in known if k.lower() in close]
    hint = f"closest known: {', '.join(close)}" if close else f"known: {', '.join(known)}"
    return UnknownSpecError(f"unknown {kind} {wanted!r}; {hint}")
