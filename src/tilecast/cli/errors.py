"""User errors of every job: one line ``error: ...`` on stderr and exit status 2, no traceback (:class:`user_errors`).

A person's mistake (a bad name or value, a missing file, alias or registered model, a model saved in a format this
code cannot read) is a :class:`tilecast.errors.UserError` (or one of :data:`USER_ERRORS`); anything else is a bug and
keeps its traceback. Used as the decorator under ``@hydra.main`` it first checks the command line's overrides
(:func:`tilecast.cli.overrides.check_overrides`)."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

from omegaconf import DictConfig
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, InterpolationResolutionError, MissingMandatoryValue

from tilecast.cli.overrides import _deletions, check_overrides
from tilecast.errors import UserError, one_line
from tilecast.specs import SpecError

USER_ERROR_EXIT = 2
#: set to 1 to get the traceback of a user error too (debugging)
TRACEBACK_ENV = "TILECAST_TRACEBACK"
#: user errors of every job: :class:`tilecast.errors.UserError` (every named error class of the project derives
#: from it), a missing file or one this user may not write (a folder made read-only while the job ran), and a
#: setting of the composed config without a value or with an interpolation ``${...}`` that does not resolve. A bare
#: ``ValueError`` is not one: it is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, FileNotFoundError, PermissionError,
                                                 MissingMandatoryValue,
                                                 InterpolationResolutionError)


def is_user_error(exc: BaseException, extra: tuple[type[BaseException], ...] = ()) -> bool:
    """True for an error a person fixes in their command, config, files or registry (see :data:`USER_ERRORS`)."""
    return isinstance(exc, USER_ERRORS + extra)


def _report(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(USER_ERROR_EXIT) from None


class user_errors:  # noqa: N801 (used as ``with user_errors():`` and ``@user_errors()``, like a contextmanager)
    """Turn a user error (:func:`is_user_error`, plus ``extra`` types) into ``error: <message>`` on stderr
    and exit status 2; other exceptions pass unchanged. Usable as ``with user_errors():`` or as a decorator
    (``@user_errors()`` right under ``@hydra.main``: the job's config is checked first, :func:`check_overrides`).
    ``TILECAST_TRACEBACK=1`` re-raises instead."""

    def __init__(self, *extra: type[BaseException]) -> None:
        self.extra = extra

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if not isinstance(exc, Exception) or not is_user_error(exc, self.extra) or os.environ.get(TRACEBACK_ENV) == "1":
            return False
        _report(one_line(exc))
        return False  # not reached

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                if args and isinstance(args[0], DictConfig):
                    check_overrides(args[0])
                try:
                    return fn(*args, **kwargs)
                except (ConfigAttributeError, ConfigKeyError) as exc:  # a key the job reads is missing: a bug,
                    deleted = _deletions()  # unless the command line deleted something
                    if not deleted:
                        raise
                    raise SpecError(f"{one_line(exc)}: the job reads it, and {' '.join(deleted)} deleted it or "
                                    f"what holds it") from None

        return run

