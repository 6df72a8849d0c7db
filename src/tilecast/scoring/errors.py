"""Errors a person fixes in their config or registry: jobs print them and exit 2, without a traceback."""

from __future__ import annotations

import sys

from tilecast.scoring.matrix import MatrixError
from tilecast.scoring.pricing import PricingError
from tilecast.scoring.store import RunNotFoundError
from tilecast.specs import SpecError, UnknownSpecError

_ALWAYS: tuple[type[BaseException], ...] = (MatrixError, PricingError, SpecError, UnknownSpecError, RunNotFoundError)


def is_user_error(exc: BaseException) -> bool:
    """True for a bad name, value or missing registry entry (not for a bug).

    The registry's error class is looked up only when the registry was imported (it cannot have
    been raised otherwise), so importing this module stays cheap for spawned Dask workers.
    """
    if isinstance(exc, _ALWAYS):
        return True
    registry = sys.modules.get("tilecast.registry.models")
    return registry is not None and isinstance(exc, registry.RegistryError)
