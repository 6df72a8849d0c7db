"""Versioned save format of predictors and tile choosers: every ``meta.json`` / ``chooser.json`` carries
``format_version`` (an integer); loading checks it before reading anything else.

A file without ``format_version`` that has every key of the first layout is read as version 1 (the
layout written before versions existed); anything else is a :class:`ModelFormatError` naming what was
found and what this tilecast reads. The registry turns that into an error naming the registered model,
its version and the command that replaces it (``tilecast.registry.models.IncompatibleModelError``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tilecast.errors import UserError

FORMAT_KEY = "format_version"


class ModelFormatError(UserError):
    """A saved predictor or tile chooser in a format this tilecast cannot read (old, newer, or damaged).

    ``found``: the file's format version (None: none recorded and not the version-1 layout);
    ``supported``: the versions this code reads; ``detail``: what exactly is wrong.
    """

    def __init__(self, kind: str, path: Path, found: int | None, supported: Iterable[int], detail: str = "") -> None:
        self.kind, self.path, self.found, self.supported = kind, Path(path), found, tuple(supported)
        self.detail = detail
        super().__init__(self.describe())

    def found_text(self) -> str:
        """``format version 3`` or ``no format version``."""
        return "no format version" if self.found is None else f"format version {self.found}"

    def supported_text(self) -> str:
        """``format version 1`` / ``format versions 1, 2`` (``no format of it``: a kind this code does not know)."""
        if not self.supported:
            return "no format of it"
        plural = "s" if len(self.supported) > 1 else ""
        return f"format version{plural} {', '.join(map(str, self.supported))}"

    def describe(self) -> str:
        """One line: what was found where, and what this code reads."""
        extra = f" ({self.detail})" if self.detail else ""
        return (f"{self.kind} saved in {self.path} has {self.found_text()}{extra}; this tilecast reads "
                f"{self.supported_text()}")


def write_meta(path: Path, meta: dict[str, Any], version: int) -> None:
    """Write ``meta`` as JSON to ``path`` with ``format_version`` set (the directory is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({FORMAT_KEY: int(version), **meta}, indent=2))


def read_meta(path: Path, kind: str, supported: Iterable[int], v1_keys: Iterable[str]) -> dict[str, Any]:
    """The JSON at ``path`` once its format version is one of ``supported``.

    No ``format_version`` but every key of ``v1_keys``: the unversioned first layout, read as version 1.
    A missing or unreadable file, or any other version, raises :class:`ModelFormatError`.
    """
    path, supported = Path(path), tuple(supported)
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelFormatError(kind, path, None, supported, f"{path.name} is missing") from None
    except (OSError, ValueError) as exc:
        raise ModelFormatError(kind, path, None, supported, f"{path.name} is unreadable: {exc}") from None
    if not isinstance(meta, dict):
        raise ModelFormatError(kind, path, None, supported, f"{path.name} is not a JSON object")
    found = meta.get(FORMAT_KEY)
    if found is None:
        missing = [k for k in v1_keys if k not in meta]
        if missing:
            raise ModelFormatError(kind, path, None, supported,
                                   f"an unversioned layout without {', '.join(map(repr, missing))}")
        found = 1
    integer = isinstance(found, int) and not isinstance(found, bool)
    if not integer or found not in supported:
        raise ModelFormatError(kind, path, found if integer else None, supported,
                               "" if integer else f"{FORMAT_KEY}={found!r} is not an integer")
    return meta


META_FILE = "meta.json"  # a predictor's meta file, next to its native model files


def write_predictor_meta(directory: Path, meta: dict[str, Any], version: int) -> None:
    """Write a predictor's ``meta.json`` (with ``format_version``) into ``directory``."""
    write_meta(Path(directory) / META_FILE, meta, version)


def read_predictor_meta(directory: Path, name: str, supported: Iterable[int], v1_keys: Iterable[str]
                        ) -> dict[str, Any]:
    """A predictor's ``meta.json`` checked for format version and predictor ``name`` (see :func:`read_meta`)."""
    path = Path(directory) / META_FILE
    meta = read_meta(path, f"{name} predictor", supported, v1_keys)
    if meta.get("name", name) != name:
        raise ModelFormatError(f"{name} predictor", path, meta.get(FORMAT_KEY), supported,
                               f"it holds a {meta['name']!r} predictor")
    return meta
