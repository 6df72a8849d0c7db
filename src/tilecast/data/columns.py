"""Typed columns: how one source cell (a string) becomes a checked value, or a reason it cannot.

A :class:`ColumnType` pairs an Arrow type with a parser. Parsers return the value (``None`` for an
empty cell where the column allows it) or raise :class:`CellError` with a reason a person can act
on. Floats are parsed with Python's ``float`` (exact round trip of the source's text).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tilecast.errors import UserError
from tilecast.specs import UnknownSpecError, get_gpu


class CellError(UserError):
    """One cell cannot be used; the message is the reason (without file and line)."""


@dataclass(frozen=True)
class ColumnType:
    """Arrow type of a column and the parser that checks one source cell."""

    arrow: pa.DataType
    parse: Callable[[str], Any]
    nullable: bool = False

    def cell(self, column: str, text: str) -> Any:
        """Parse ``text`` of ``column``; raise :class:`CellError` naming the column and value."""
        if text == "" or text is None:
            if self.nullable:
                return None
            raise CellError(f"{column}: empty")
        try:
            return self.parse(text)
        except CellError as exc:
            raise CellError(f"{column}: {exc}") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise CellError(f"not a number {text!r}") from None
    if not math.isfinite(value):
        raise CellError(f"not a finite number {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise CellError(f"must be positive, got {text!r}")
    return value


def _nonneg_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise CellError(f"must be non-negative, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise CellError(f"not an integer {text!r}") from None
    if not value.is_integer():
        raise CellError(f"not an integer {text!r}")
    return int(value)


def _nonneg_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise CellError(f"must be non-negative, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = _int(text)
    if value <= 0:
        raise CellError(f"must be positive, got {text!r}")
    return value


_BOOLS = {"True": True, "False": False, "true": True, "false": False, "1": True, "0": False}


def _bool(text: str) -> bool:
    try:
        return _BOOLS[text]
    except KeyError:
        raise CellError(f"not a boolean {text!r}") from None


#: GPUs whose measurements are held back from this project (H100 SXM, H200, GB300): no table under data/ may
#: carry a row of theirs, nor anything that reconstructs one (the paper's per-cell errors with the roofline would
#: give back the H100's latencies). Their spec sheets are in the catalog (spec-only forecasts).
HELD_BACK_GPUS = ("h100_sxm_80gb", "h200_sxm", "gb300")


def _name_key(text: str) -> str:
    return " ".join(str(text).replace("_", " ").replace("-", " ").lower().split())


@functools.lru_cache(maxsize=1)
def held_back_names() -> frozenset[str]:
    """Every name a held-back GPU goes by (catalog key, device name, label directory, aliases), normalised."""
    names = set()
    for key in HELD_BACK_GPUS:
        spec = get_gpu(key)
        names.update(_name_key(n) for n in (key, spec.device_name, spec.label_dir, *spec.aliases))
    return frozenset(names)


def is_held_back(text: str) -> bool:
    """Whether a device name, label directory, system or catalog name is a held-back GPU (:data:`HELD_BACK_GPUS`)."""
    return _name_key(text) in held_back_names()


@functools.lru_cache(maxsize=256)
def device_name(text: str) -> str:
    """The exact catalog device name ``text`` stands for (a device name or a label-directory name)."""
    try:
        spec = get_gpu(text)
    except UnknownSpecError as exc:
        raise CellError(str(exc).replace("unknown GPU", "unknown device", 1)) from None
    if text not in (spec.device_name, spec.label_dir):
        raise CellError(f"unknown device {text!r} (a catalog key, not a device name; "
                        f"did you mean {spec.device_name!r}?)")
    return spec.device_name


def _device(text: str) -> str:
    name = device_name(text)
    if name != text:
        raise CellError(f"unknown device {text!r}; the exact device name is {name!r}")
    return name


STRING = ColumnType(pa.string(), str, nullable=True)
REQUIRED_STRING = ColumnType(pa.string(), str)
FLOAT = ColumnType(pa.float64(), _float)
NONNEG_FLOAT = ColumnType(pa.float64(), _nonneg_float)
LATENCY = ColumnType(pa.float64(), _positive_float)
INT = ColumnType(pa.int64(), _int)
NULLABLE_NONNEG_INT = ColumnType(pa.int64(), _nonneg_int, nullable=True)
POSITIVE_INT = ColumnType(pa.int64(), _positive_int)
DIM = ColumnType(pa.int64(), _nonneg_int)
BOOL = ColumnType(pa.bool_(), _bool)
DEVICE = ColumnType(pa.string(), _device)


def one_of(values: tuple[str, ...] | frozenset[str], nullable: bool = False) -> ColumnType:
    """A string column whose cells must be one of ``values`` (a typo or unknown name is a reject)."""
    known = tuple(sorted(values))

    def _parse(text: str) -> str:
        if text not in known:
            raise CellError(f"unknown value {text!r}; known: {', '.join(known)}")
        return text

    return ColumnType(pa.string(), _parse, nullable=nullable)

