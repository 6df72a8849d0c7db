"""Errors of the collector; each names the value that is wrong and what would be right."""

from __future__ import annotations

from tilecast.errors import UserError


class CollectError(UserError):
    """A collection cannot start or continue (bad option, missing device, inconsistent output)."""


class NoGpuError(CollectError):
    """``device=cuda`` asked for on a machine where torch sees no CUDA GPU."""


class UnsupportedOpError(CollectError):
    """An op name the collector has no kernel recipe for."""


class CollectDtypeError(CollectError):
    """A dtype name the collector does not measure."""


class ShapeSourceError(CollectError):
    """A ``shapes=`` value that names no shape set, or a shape table without the needed columns."""
