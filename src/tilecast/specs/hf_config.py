"""Reading a Hugging Face ``config.json``: typed getters whose failures name the config key.

:class:`BadConfig` carries the key, the value found (:data:`MISSING` where absent) and what was expected; the
catalog turns it into a :class:`~tilecast.specs.SpecError` naming the file and ``config.<key>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilecast.specs.catalog import nonempty_str, positive_int

MISSING = object()


class BadConfig(Exception):
    """A config key that is missing or holds a value of the wrong kind (turned into a SpecError)."""

    def __init__(self, key: str, value: Any, expected: str) -> None:
        super().__init__(key, value, expected)
        self.key, self.value, self.expected = key, value, expected


def get(c: Mapping[str, Any], key: str, default: Any = MISSING) -> Any:
    """``c[key]``; ``default`` where absent or null; neither -> :class:`BadConfig`."""
    value = c.get(key)
    if value is None:
        if default is MISSING:
            raise BadConfig(key, None if key in c else MISSING, "a value")
        return default
    return value


def get_int(c: Mapping[str, Any], key: str, default: Any = MISSING) -> int:
    """A positive integer from config key ``key``."""
    value = get(c, key, default)
    if not positive_int(value):
        raise BadConfig(key, value, "a positive integer")
    return value


def get_count(c: Mapping[str, Any], key: str, default: Any = MISSING) -> int:
    """A non-negative integer from config key ``key`` (a count that may be zero: dense layers, shared experts)."""
    value = get(c, key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadConfig(key, value, "a non-negative integer")
    return value


def get_str(c: Mapping[str, Any], key: str, default: Any = MISSING) -> str:
    """A non-empty string from config key ``key``."""
    value = get(c, key, default)
    if not nonempty_str(value):
        raise BadConfig(key, value, "a non-empty string")
    return value


def get_bool(c: Mapping[str, Any], key: str, default: bool) -> bool:
    """``true`` / ``false`` from config key ``key``."""
    value = get(c, key, default)
    if not isinstance(value, bool):
        raise BadConfig(key, value, "true or false")
    return value


def get_number(c: Mapping[str, Any], key: str, default: Any = MISSING) -> float:
    """A finite non-negative number from config key ``key``."""
    value = get(c, key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0 or value == float("inf"):
        raise BadConfig(key, value, "a non-negative number")
    return float(value)


def get_list(c: Mapping[str, Any], key: str, default: Any = MISSING) -> list:
    """A list from config key ``key``."""
    value = get(c, key, default)
    if not isinstance(value, (list, tuple)):
        raise BadConfig(key, value, "a list")
    return list(value)
