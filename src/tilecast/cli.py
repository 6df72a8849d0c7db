"""Command-line glue shared by the Hydra jobs.

``conf/gpu`` and ``conf/model`` are Hydra config groups, so ``gpu=l4`` composes ``conf/gpu/l4.yaml``
into the job's config. People also name GPUs by device name (``gpu="NVIDIA L4"``) or label
directory (``gpu=NVIDIA_L4``): :func:`catalog_argv` rewrites those to catalog keys before Hydra
parses the command line, and turns an unknown name into an error that lists the closest ones.

:func:`user_errors` is how every job reports a mistake a person fixes (a bad name or value, a missing
file, alias or registered model, a model saved in a format this code cannot read): one line
``error: ...`` on stderr and exit status 2, no traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

from omegaconf.errors import MissingMandatoryValue

from tilecast.specs import GpuSpec, ModelSpec, SpecError, UnknownSpecError, get_gpu, get_model

#: exit status of a job stopped by a user error
USER_ERROR_EXIT = 2
#: set to 1 to get the traceback of a user error too (debugging)
TRACEBACK_ENV = "TILECAST_TRACEBACK"
#: user errors of every job (ValueError covers config validation and the other modules' value errors)
USER_ERRORS: tuple[type[BaseException], ...] = (SpecError, UnknownSpecError, ValueError, FileNotFoundError,
                                                 MissingMandatoryValue)
#: user errors of modules a job may not import: (module, class) looked up only once the module is loaded,
#: so this module stays cheap (Dask workers re-import the job files). ``RegistryError`` covers missing
#: aliases and models and ``IncompatibleModelError`` (an unloadable registered version).
LAZY_USER_ERRORS = (("tilecast.registry.models", "RegistryError"), ("tilecast.scoring.store", "RunNotFoundError"))


def is_user_error(exc: BaseException, extra: tuple[type[BaseException], ...] = ()) -> bool:
    """True for an error a person fixes in their command, config, files or registry (see :data:`USER_ERRORS`)."""
    if isinstance(exc, USER_ERRORS + extra):
        return True
    lazy = tuple(getattr(sys.modules[mod], name) for mod, name in LAZY_USER_ERRORS if mod in sys.modules)
    return isinstance(exc, lazy)


def one_line(exc: BaseException) -> str:
    """The error's message on one line (a KeyError's message unquoted)."""
    text = str(exc.args[0]) if isinstance(exc, KeyError) and len(exc.args) == 1 else str(exc)
    return " ".join(part.strip() for part in text.splitlines() if part.strip()) or type(exc).__name__


@contextmanager
def user_errors(*extra: type[BaseException]) -> Iterator[None]:
    """Turn a user error (:func:`is_user_error`, plus ``extra`` types) into ``error: <message>`` on stderr
    and exit status 2; other exceptions pass unchanged. Usable as ``with user_errors():`` or as a decorator
    (``@user_errors()`` right under ``@hydra.main``). ``TILECAST_TRACEBACK=1`` re-raises instead."""
    try:
        yield
    except Exception as exc:
        if not is_user_error(exc, extra) or os.environ.get(TRACEBACK_ENV) == "1":
            raise
        print(f"error: {one_line(exc)}", file=sys.stderr)
        raise SystemExit(USER_ERROR_EXIT) from None


def catalog_argv(argv: list[str]) -> list[str]:
    """Map ``gpu=<key|device name|label dir>`` to ``gpu=<key>``; check ``model=<key>``."""
    out = []
    for arg in argv:
        name, sep, value = arg.partition("=")
        if sep and value not in ("", "null"):
            if name == "gpu":
                arg = f"gpu={get_gpu(value).key}"
            elif name == "model":
                arg = f"model={get_model(value).key}"
        out.append(arg)
    return out


def with_catalog_args(main: Callable[[], Any]) -> Callable[[], Any]:
    """Wrap a ``@hydra.main`` function: normalise catalog arguments first, exit 2 on an unknown name."""

    @wraps(main)
    def run() -> Any:
        with user_errors():
            sys.argv[1:] = catalog_argv(sys.argv[1:])
        return main()

    return run


def gpu_from_cfg(node: Any) -> GpuSpec | None:
    """The validated :class:`GpuSpec` for a composed ``gpu`` group node (None when unset)."""
    return get_gpu(node["key"]) if node else None


def model_from_cfg(node: Any) -> ModelSpec | None:
    """The validated :class:`ModelSpec` for a composed ``model`` group node (None when unset)."""
    return get_model(node["key"]) if node else None
