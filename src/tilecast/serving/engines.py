"""The serving engines whose kernels the project knows, and the releases their kernels were measured at.

An engine is named as ``serving.csv``'s ``backend`` spells it: ``vllm``, ``sglang``, ``trtllm``
(:data:`ENGINES`). Its kernel tables (AIConfigurator's ``gemm_engines``, ``*_attention_engines`` and
``custom_allreduce``; vLLM's are the project's ``gemm`` / ``*_attention`` tables) were measured at a few
releases (:data:`MEASURED_VERSIONS`), each GPU at one release per engine: releases are confounded with GPUs,
so the kernel and all-reduce models are fitted per engine over all its measured releases, and a requested
release only has to resolve to a measured one (:func:`resolve_version`):

- ``None``: the newest measured release;
- a release of a measured line (``major.minor``): the newest measured release of that line not newer than it,
  else the line's oldest (``sglang 0.5.9`` -> ``0.5.10``, ``trtllm 1.3.0rc5`` -> ``1.3.0rc20``);
- a release between measured lines: the newest measured release not newer than it (``vllm 0.19.0`` ->
  ``0.14.0``);
- before the first or after the last measured line, or not a PEP 440 version (``nightly-dev``): an
  :class:`UnknownEngineVersionError` listing the measured releases.

An engine not listed is an :class:`UnknownEngineError` listing the known ones.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from tilecast.errors import UserError

#: the engines, as ``serving.csv``'s ``backend`` spells them; vLLM first: the harness of the project's tables
ENGINES: tuple[str, ...] = ("vllm", "sglang", "trtllm")
#: the engine the project's GEMM / attention predictors are trained under (its kernel factors are 1)
HARNESS_ENGINE = "vllm"
#: engine -> the releases its kernel and all-reduce tables were measured at (AIConfigurator @095f58a)
MEASURED_VERSIONS: dict[str, tuple[str, ...]] = {
    "vllm": ("0.14.0", "0.22.0", "0.24.0"),
    "sglang": ("0.5.10", "0.5.14"),
    "trtllm": ("1.0.0", "1.3.0rc20"),
}


class UnknownEngineError(UserError):
    """An engine name the project has no kernel tables for (the message lists the known ones)."""


class UnknownEngineVersionError(UserError):
    """A release of a known engine that resolves to no measured one (the message lists the measured ones)."""


def check_engine(engine: object) -> str:
    """``engine`` as a known engine name (case and surrounding blanks ignored); else :class:`UnknownEngineError`."""
    name = str(engine).strip().lower()
    if name not in ENGINES:
        raise UnknownEngineError(f"unknown serving engine {engine!r}; known: {', '.join(ENGINES)}")
    return name


def _line(v: Version) -> tuple[int, int]:
    return v.major, v.minor


def resolve_version(engine: str, version: object = None) -> str:
    """The measured release of ``engine`` that stands for ``version`` (rules in the module docstring)."""
    name = check_engine(engine)
    measured = sorted(MEASURED_VERSIONS[name], key=Version)
    if version is None or (isinstance(version, float) and version != version):  # None or NaN: the default
        return measured[-1]
    known = f"measured {name} releases: {', '.join(measured)}"
    try:
        want = Version(str(version).strip())
    except InvalidVersion:
        raise UnknownEngineVersionError(f"{name} version {version!r} is not a release number; {known}") from None
    parsed = [Version(v) for v in measured]
    lines = [_line(v) for v in parsed]
    if not lines[0] <= _line(want) <= lines[-1]:
        raise UnknownEngineVersionError(f"{name} {version} is outside the measured releases' span; {known}")
    same_line = [v for v in parsed if _line(v) == _line(want)]
    pool = same_line or parsed
    older = [v for v in pool if v <= want]
    chosen = max(older) if older else min(pool)
    return measured[parsed.index(chosen)]
