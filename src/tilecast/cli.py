"""Command-line glue shared by the Hydra jobs.

``conf/gpu`` and ``conf/model`` are Hydra config groups, so ``gpu=l4`` composes ``conf/gpu/l4.yaml``
into the job's config. People also name GPUs by device name (``gpu="NVIDIA L4"``) or label
directory (``gpu=NVIDIA_L4``): :func:`catalog_argv` rewrites those to catalog keys before Hydra
parses the command line, and turns an unknown name into an error that lists the closest ones.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

from tilecast.specs import GpuSpec, ModelSpec, UnknownSpecError, get_gpu, get_model


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
        try:
            sys.argv[1:] = catalog_argv(sys.argv[1:])
        except UnknownSpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        return main()

    return run


def gpu_from_cfg(node: Any) -> GpuSpec | None:
    """The validated :class:`GpuSpec` for a composed ``gpu`` group node (None when unset)."""
    return get_gpu(node["key"]) if node else None


def model_from_cfg(node: Any) -> ModelSpec | None:
    """The validated :class:`ModelSpec` for a composed ``model`` group node (None when unset)."""
    return get_model(node["key"]) if node else None
