"""The one base class of the errors a person fixes, and how one is shown.

:class:`UserError` is raised for a mistake in a command, a config, a file, a registry or a store: a bad name
or value, a missing file, alias or registered model, a model saved in a format this code cannot read. Every
job turns it into one line ``error: ...`` on stderr and exit status 2 (:class:`tilecast.cli.user_errors`).
Anything else, a bare ``ValueError`` included, is a bug and keeps its traceback: a bug must never become a
silent exit 2. Every named error class of the project derives from it (``SpecError``, ``RegistryError``,
``PricingError``, ``MatrixError``, ...); each name is used once.

It subclasses ``ValueError`` so that callers that caught a ``ValueError`` from validation keep working.
"""

from __future__ import annotations

import re

from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException


class UserError(ValueError):
    """A mistake a person fixes in their command, config, files, registry or store (jobs: exit 2, one line)."""


class UserLookupError(UserError, LookupError):
    """A user error about something looked up and not found (a run, an alias, a registered model)."""

    def __str__(self) -> str:  # a KeyError / LookupError would quote its message; people read this one
        return str(self.args[0]) if self.args else ""


#: the ``[12:00:00] /path/src/file.cc:123: `` prefix of a message from a native library (XGBoost's C++ core)
_NATIVE_FRAME = re.compile(r"\[\d\d:\d\d:\d\d\] \S+?:\d+: ")


def one_line(exc: BaseException) -> str:
    """The error's message on one line (a KeyError's message unquoted; an OmegaConf error's prefixed with the
    setting it is about)."""
    key = getattr(exc, "full_key", None) if isinstance(exc, OmegaConfBaseException) else None
    if key and isinstance(exc, MissingMandatoryValue):
        return f"{key}=<value> is required (it has no default)"
    text = str(exc.args[0]) if isinstance(exc, KeyError) and len(exc.args) == 1 else str(exc)
    if key and getattr(exc, "msg", None):
        text = f"{key}: {str(exc.msg).split('full_key:')[0].strip()}"  # without OmegaConf's full_key / object_type
    if type(exc).__module__.startswith("xgboost"):
        text = "XGBoost: " + _NATIVE_FRAME.sub("", text.split("Stack trace:", 1)[0])
    return " ".join(part.strip() for part in text.splitlines() if part.strip()) or type(exc).__name__
