"""Command-line glue shared by the Hydra jobs, and the ``tilecast`` command.

``conf/gpu`` and ``conf/model`` are Hydra config groups, so ``gpu=l4`` composes ``conf/gpu/l4.yaml``
into the job's config. People also name GPUs by device name (``gpu="NVIDIA L4"``) or label
directory (``gpu=NVIDIA_L4``): :func:`catalog_argv` rewrites those to catalog keys before Hydra
parses the command line (every element of a sweep ``gpu=l4,tesla_t4`` too), and turns an unknown name
into an error that lists the closest ones.

:func:`with_catalog_args` is how every job's ``__main__`` starts Hydra. Before Hydra parses ``sys.argv`` it

- splits one argument holding several overrides (``mlflow run -P overrides="a=1 b=2"`` passes them
  quoted as one) and drops empty ones (an empty ``overrides`` parameter): :func:`split_joined`;
- normalises catalog names (:func:`catalog_argv`) and, for jobs that take them, what-if overrides
  ``gpu.<field>=<value>`` / ``model.config.<key>=<value>`` (applied by :func:`gpu_from_cfg` and
  :func:`model_from_cfg`, see :mod:`tilecast.specs.whatif`); other jobs refuse them;
- puts Hydra's run and sweep directories under ``$TILECAST_HOME`` (default: the repository root), one
  directory per job run even when two start in the same second (:func:`hydra_dir_args`), never in the
  caller's working directory.

:func:`user_errors` is how every job reports a mistake a person fixes (a bad name or value, a missing
file, alias or registered model, a model saved in a format this code cannot read): one line
``error: ...`` on stderr and exit status 2, no traceback. Anything else is a bug and keeps its traceback.

:func:`main` is the ``tilecast`` console script: ``tilecast <job> key=value ...`` runs ``jobs/<job>.py``
with the same arguments from any directory; ``tilecast --help`` lists the jobs.
"""
from __future__ import annotations

import ast
import dataclasses
import logging
import os
import re
import runpy
import shlex
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any

from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue

from tilecast.paths import ROOT
from tilecast.specs import GpuSpec, ModelSpec, SpecError, UnknownSpecError, get_gpu, get_model
from tilecast.specs.whatif import (
    GPU_IDENTITY,
    MODEL_FIELDS,
    changed_fields,
    model_with_config,
    same_value,
    with_overrides,
)

log = logging.getLogger("tilecast.cli")

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


#: prefixes of a Hydra override: ``+key=`` adds, ``++key=`` adds or overrides, ``~key`` deletes
_OVERRIDE = re.compile(r"^(?P<prefix>\+\+|\+|~)?(?P<name>[A-Za-z_][\w.\-/@]*)(?:(?P<sep>=)(?P<value>.*))?$", re.S)
#: Hydra sweep functions whose arguments are not plain names (passed to Hydra untouched)
_SWEEP_CALL = re.compile(r"^(?P<fn>[a-z_]+)\((?P<args>.*)\)$", re.S)


def _is_override(token: str) -> bool:
    """Whether ``token`` reads as one Hydra override or flag (``a=1``, ``+a=1``, ``~a``, ``-m``)."""
    m = _OVERRIDE.match(token)
    return token.startswith("-") or bool(m and (m["sep"] or m["prefix"] == "~"))


def split_joined(argv: list[str]) -> list[str]:
    """Split an argument that holds several overrides into them, shell-style; drop empty arguments.

    ``mlflow run . -P overrides="model=gpt2_large gpu=l4"`` runs ``jobs/x.py 'model=gpt2_large gpu=l4'``: one
    argument. It is split only when every piece is an override or flag, so one value with spaces
    (``gpu=NVIDIA L4``, ``families=[bmm, linear]``) stays whole; quotes group as in a shell
    (``overrides='gpu="NVIDIA L4" batch=4'``).
    """
    out: list[str] = []
    for arg in argv:
        if not arg.strip():
            continue
        if any(c.isspace() for c in arg.strip()):
            try:
                parts = shlex.split(arg)
            except ValueError:  # unbalanced quotes: a value, not a list of overrides
                parts = [arg]
            if len(parts) > 1 and all(_is_override(p) for p in parts):
                out.extend(parts)
                continue
        out.append(arg)
    return out


def _split_sweep(value: str) -> list[str]:
    """The elements of a Hydra choice sweep ``a,b,"c d"`` (commas inside quotes or brackets do not split)."""
    items, depth, quote, cur = [], 0, "", ""
    for ch in value:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        cur += ch
    return [*items, cur]


def _unquote(item: str) -> str:
    item = item.strip()
    return item[1:-1] if len(item) >= 2 and item[0] == item[-1] and item[0] in "\"'" else item


def catalog_value(value: str, lookup: Callable[[str], Any]) -> str:
    """A ``gpu=`` / ``model=`` value with every name replaced by its catalog key: one name, a sweep
    ``a,b`` or ``choice(a,b)``. ``null``, interpolations and other sweeps (``glob(*)``, ``range(...)``) pass
    unchanged; an unknown name raises the lookup's error."""
    v = value.strip()
    if v in ("", "null") or v.startswith(("${", "[", "{")):
        return value
    call = _SWEEP_CALL.match(v)
    if call:
        if call["fn"] != "choice":
            return value
        return f"choice({','.join(lookup(_unquote(i)).key for i in _split_sweep(call['args']))})"
    return ",".join(lookup(_unquote(i)).key for i in _split_sweep(v))


def _gpu_field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(GpuSpec) if f.name not in GPU_IDENTITY]


#: the config groups whose fields a what-if may change
WHAT_IF_GROUPS = ("gpu", "model")


def _what_if_arg(prefix: str, name: str, value: str, what_if: tuple[str, ...]) -> str | None:
    """``gpu.<field>=v`` / ``model.config.<key>=v`` as ``++...`` (fields a catalog file leaves out may be set);
    None when ``name`` is no what-if. Unknown GPU fields, model fields other than ``config`` and groups the
    job takes no what-ifs for (not in ``what_if``) raise :class:`SpecError`."""
    group, _, field = name.partition(".")
    if group not in WHAT_IF_GROUPS or not field:
        return None
    arg = f"{prefix}{name}={value}"
    if group not in what_if:
        example = "gpu.<field>=" if group == "gpu" else "model.config.<key>="
        raise SpecError(f"{arg}: this job takes no {group} what-if overrides ({example}); forecast a hypothetical "
                        f"GPU or model with jobs/predict.py")
    if prefix == "~":
        raise SpecError(f"{arg}: a field of a catalog {group} cannot be deleted")
    if group == "gpu":
        known = _gpu_field_names()
        if field not in known:
            what = "names the GPU and cannot be changed" if field in GPU_IDENTITY else "is not a GPU field"
            raise SpecError(f"gpu.{field}={value}: {field!r} {what}; choose another GPU with gpu=<key>, "
                            f"or change one of: {', '.join(sorted(known))}")
    elif not field.startswith("config.") or field == "config.":
        raise SpecError(f"model.{field}={value}: a model's {', '.join(MODEL_FIELDS[:3])} cannot be changed; "
                        f"change its Hugging Face config with model.config.<key>=<value>, "
                        f"or choose another model with model=<key>")
    return f"++{name}={value}"


def catalog_argv(argv: list[str], what_if: tuple[str, ...] = ()) -> list[str]:
    """Map ``gpu=<key|device name|label dir>`` (and every element of a sweep) to catalog keys; check
    ``model=<key>``. For the groups in ``what_if`` pass ``gpu.<field>=`` / ``model.config.<key>=`` on as
    add-or-override arguments (checked first: an unknown GPU field lists the known ones); refuse the others'."""
    out = []
    for arg in argv:
        m = _OVERRIDE.match(arg)
        if m is None or arg.startswith("-"):
            out.append(arg)
            continue
        prefix, name, value = m["prefix"] or "", m["name"], m["value"] or ""
        if m["sep"] and name in ("gpu", "model") and prefix != "~":
            arg = f"{prefix}{name}={catalog_value(value, get_gpu if name == 'gpu' else get_model)}"
        elif m["sep"] or prefix == "~":
            arg = _what_if_arg(prefix, name, value, what_if) or arg
        out.append(arg)
    return out


#: where Hydra's run directories go: ``$TILECAST_HOME/outputs/<job>/...`` (default home: the repository root)
HOME_ENV = "TILECAST_HOME"


def tilecast_home() -> Path:
    """``$TILECAST_HOME``, else the repository root: the parent of Hydra's ``outputs/`` and ``multirun/``."""
    return Path(os.environ.get(HOME_ENV) or ROOT).expanduser().resolve()


def _hydra_quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def hydra_dir_args(argv: list[str], home: Path | None = None) -> list[str]:
    """``argv`` with ``hydra.run.dir`` / ``hydra.sweep.dir`` under :func:`tilecast_home` unless it sets them: one
    directory per job run, ``<job>/<date>_<time>_<6 hex>`` (two runs started in one second differ)."""
    home = home or tilecast_home()
    stamp = "${now:%Y-%m-%d_%H-%M-%S}_" + uuid.uuid4().hex[:6]
    given = {m["name"] for m in map(_OVERRIDE.match, argv) if m is not None}
    extra = [f"hydra.{kind}.dir=" + _hydra_quoted(f"{home / folder}/${{hydra.job.name}}/{stamp}")
             for kind, folder in (("run", "outputs"), ("sweep", "multirun")) if f"hydra.{kind}.dir" not in given]
    # Hydra's argparse reads the overrides as one block: insert beside the user's (before the first one)
    at = next((i for i, a in enumerate(argv) if not a.startswith("-") and _is_override(a)), 0)
    return [*argv[:at], *extra, *argv[at:]]


def with_catalog_args(main: Callable[[], Any], what_if: tuple[str, ...] = ()) -> Callable[[], Any]:
    """Wrap a ``@hydra.main`` function: split joined overrides, normalise catalog arguments, place Hydra's
    directories (:func:`hydra_dir_args`); exit 2 on an unknown name. ``what_if`` names the groups (``gpu``,
    ``model``) the job reads through :func:`gpu_from_cfg` / :func:`model_from_cfg`, which take field
    overrides; what-ifs of other groups are refused (a job that drops them must not accept them)."""

    @wraps(main)
    def run() -> Any:
        with user_errors():
            sys.argv[1:] = hydra_dir_args(catalog_argv(split_joined(sys.argv[1:]), what_if=tuple(what_if)))
        if not _HELP_FLAGS & set(sys.argv[1:]):
            return main()
        try:
            return main()
        except ConfigCompositionException as exc:  # Hydra composes the config for --help outside its error report
            print(f"error: {one_line(exc)} (--help shows the composed config: give the mandatory groups too)",
                  file=sys.stderr)
            raise SystemExit(USER_ERROR_EXIT) from None

    return run


_HELP_FLAGS = {"--help", "-h", "--hydra-help"}


def _plain(node: Any) -> dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)


def gpu_from_cfg(node: Any) -> GpuSpec | None:
    """The validated :class:`GpuSpec` for a composed ``gpu`` group node (None when unset). Fields that differ
    from the catalog (``gpu=l4 gpu.mem_bw_gbs=600``) give a what-if GPU keyed ``l4+mem_bw_gbs=600``
    (:func:`tilecast.specs.whatif.with_overrides`; bad values raise :class:`SpecError`)."""
    if not node:
        return None
    data = _plain(node)
    if not data.get("key"):
        raise SpecError(f"{', '.join(f'gpu.{k}={v}' for k, v in data.items())} changes a catalog GPU: "
                        f"name it with gpu=<key|device name>")
    catalog = get_gpu(str(data["key"]))
    spec = with_overrides(catalog, changed_fields(catalog, data))
    if spec is not catalog:
        log.warning("what-if GPU %s (not the catalog %s: no measured data or stored calibration applies)",
                    spec.key, catalog.key)
    return spec


def model_from_cfg(node: Any) -> ModelSpec | None:
    """The validated :class:`ModelSpec` for a composed ``model`` group node (None when unset). Config keys that
    differ from the catalog (``model.config.n_layer=12``) give a what-if model keyed ``<key>+n_layer=12``
    (:func:`tilecast.specs.whatif.model_with_config`)."""
    if not node:
        return None
    data = _plain(node)
    if not data.get("key"):
        raise SpecError("model.config.<key>= changes a catalog model: name it with model=<key>")
    spec = get_model(str(data["key"]))
    for name in MODEL_FIELDS[1:3]:
        if name in data and data[name] != getattr(spec, name):
            raise SpecError(f"model.{name}={data[name]}: a model's {name} cannot be changed; choose another "
                            f"model with model=<key>")
    config = data.get("config") or {}
    changed = {k: v for k, v in config.items() if k not in spec.config or not same_value(spec.config[k], v)}
    if changed:
        spec = model_with_config(spec, changed)
        log.warning("what-if model %s (not the catalog %s)", spec.key, data["key"])
    return spec


def _job_files() -> dict[str, Path]:
    return {p.stem: p for p in sorted((ROOT / "jobs").glob("*.py")) if not p.stem.startswith("_")}


def _summary(path: Path) -> str:
    """The first clause of a job's docstring (``Forecast one workload``)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    return first.split(":")[0].split(" (")[0].rstrip(".")


def usage() -> str:
    """``tilecast --help``: how to call it and one line per job."""
    jobs = _job_files()
    width = max((len(n) for n in jobs), default=0)
    lines = ["usage: tilecast <job> [key=value ...]   (Hydra overrides, as python jobs/<job>.py takes them)",
             "       tilecast <job> --help            (the job's options and defaults)", "", "jobs:"]
    lines += [f"  {name:<{width}}  {_summary(path)}" for name, path in jobs.items()]
    lines += ["", f"jobs and configs: {ROOT / 'jobs'}, {ROOT / 'conf'}; Hydra run directories under "
                  f"{HOME_ENV} (now {tilecast_home()})/outputs"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """The ``tilecast`` command: ``tilecast <job> [overrides...]`` runs ``jobs/<job>.py`` as
    ``python jobs/<job>.py [overrides...]`` would, from any working directory."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return
    jobs = _job_files()
    if not jobs:
        print(f"error: no jobs under {ROOT / 'jobs'}: tilecast runs from a source checkout "
              f"(python3 -m pip install -e <checkout>) or set TILECAST_ROOT=<checkout>", file=sys.stderr)
        raise SystemExit(USER_ERROR_EXIT)
    name = args[0].removesuffix(".py")
    if name not in jobs:
        print(f"error: unknown job {args[0]!r}; jobs: {', '.join(jobs)} (tilecast --help)", file=sys.stderr)
        raise SystemExit(USER_ERROR_EXIT)
    sys.argv = [str(jobs[name]), *args[1:]]
    runpy.run_path(str(jobs[name]), run_name="__main__")
