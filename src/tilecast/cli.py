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
Used as the decorator under ``@hydra.main`` it first checks the command line's overrides against the job's
conf files (:func:`check_overrides`): a value of another type than the setting's default (``val_fraction=abc``,
``rollback=maybe``), a new key (``+bogus=1``) or a deleted group or setting (``~mlflow``) is refused by name, and
a key the job misses after a deletion inside a section (``~mlflow.experiment``) is named too.
A config Hydra cannot compose (an unknown key or config group option, a missing mandatory group, an
unparsable override) is reported the same way by :func:`with_catalog_args` (:func:`hydra_error_line`).

:func:`main` is the ``tilecast`` console script: ``tilecast <job> key=value ...`` runs ``jobs/<job>.py``
with the same arguments from any directory; ``tilecast --help`` lists the jobs.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import logging
import os
import re
import runpy
import shlex
import signal
import sys
import uuid
from collections.abc import Callable, Mapping
from functools import wraps
from pathlib import Path
from typing import Any

from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    InterpolationResolutionError,
    MissingMandatoryValue,
    OmegaConfBaseException,
)

from tilecast.errors import UserError, one_line
from tilecast.paths import CONF_DIR, ROOT, STATE_ROOT, is_writable, resolve
from tilecast.signals import install as install_signal_handlers
from tilecast.specs import GpuSpec, ModelSpec, SpecError, get_gpu, get_model
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


def config_groups() -> tuple[str, ...]:
    """The config groups under ``conf/`` (``matrix``, ``pricing``, ...): each a folder of ``<option>.yaml``."""
    return tuple(sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))))


def group_options(group: str) -> list[str]:
    """The options of config group ``group``: the stems of ``conf/<group>/*.yaml``."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def check_group_value(group: str, value: str, typed: str) -> None:
    """A config group option is a catalog name (``matrix=smoke``), never a path: ``matrix=../score`` or
    ``matrix=../../somewhere/outside`` would compose a YAML outside ``conf/<group>/``. Sweeps (``a,b``,
    ``choice(a,b)``), ``null`` and interpolations pass; anything else not in the catalog raises
    :class:`SpecError` repeating what was typed and listing the options."""
    v = value.strip()
    if v in ("", "null") or v.startswith("${"):
        return
    call = _SWEEP_CALL.match(v)
    items = _split_sweep(call["args"]) if call and call["fn"] == "choice" else [] if call else _split_sweep(v)
    known = group_options(group)
    for item in map(_unquote, items):
        if item not in known:
            close = difflib.get_close_matches(item, known, n=3)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            path = "; a group option is a name from that folder, not a path" if "/" in item or ".." in item else ""
            where = " (or a price file: pricing=<path>.yaml)" if group == "pricing" else ""
            raise SpecError(f"{typed}: {item!r} is not a {group} config{path}; known: {', '.join(known)}{where}{hint}")


def _is_file_value(value: str) -> bool:
    """``pricing=<path>``: a value naming a YAML file rather than a catalog option."""
    v = _unquote(value.strip())
    return v.endswith((".yaml", ".yml")) and not v.startswith("${")


def price_file(value: str) -> str:
    """The absolute path of ``pricing=<path>.yaml`` (a file of the user's own prices); a missing file is a
    :class:`SpecError` naming it."""
    path = Path(_unquote(value.strip())).expanduser()
    path = path if path.is_absolute() else (Path.cwd() / path)
    if not path.is_file():
        raise SpecError(f"pricing={value}: no such file {path}; give a YAML file laid out like "
                        f"{CONF_DIR / 'pricing' / 'default.yaml'}, or a name of conf/pricing/")
    return _hydra_quoted(str(path.resolve()))


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
        elif m["sep"] and name == "pricing" and prefix != "~" and _is_file_value(value):
            arg = f"pricing.file={price_file(value)}"  # a price file of the user's own (conf/pricing/default.yaml)
        elif m["sep"] and name in config_groups() and prefix != "~":
            check_group_value(name, value, arg)
        elif m["sep"] or prefix == "~":
            arg = _what_if_arg(prefix, name, value, what_if) or arg
        out.append(arg)
    return out


#: where Hydra's run directories go: ``$TILECAST_HOME/outputs/<job>/...`` (default home: the repository root)
HOME_ENV = "TILECAST_HOME"


def tilecast_home() -> Path:
    """``$TILECAST_HOME``, else the repository root: the parent of Hydra's ``outputs/`` and ``multirun/``."""
    return Path(os.environ.get(HOME_ENV) or STATE_ROOT).expanduser().resolve()


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
    directories (:func:`hydra_dir_args`); exit 2 on an unknown name or a config Hydra cannot compose
    (:func:`hydra_error_line`). ``what_if`` names the groups (``gpu``, ``model``) the job reads through
    :func:`gpu_from_cfg` / :func:`model_from_cfg`, which take field overrides; what-ifs of other groups are
    refused (a job that drops them must not accept them)."""

    @wraps(main)
    def run() -> Any:
        with user_errors():
            sys.argv[1:] = hydra_dir_args(catalog_argv(split_joined(sys.argv[1:]), what_if=tuple(what_if)))
        # Hydra prints a composition error itself (several lines, exit 1) unless HYDRA_FULL_ERROR is set: then it
        # raises, and the error is reported here on one line. A job's own bugs keep their (whole) traceback.
        os.environ.setdefault(HYDRA_FULL_ERROR_ENV, "1")
        if {"--help", "-h"} & set(sys.argv[1:]):  # the job's own options first (Hydra's: --hydra-help, --cfg job)
            print(job_help(_config_name(main)))
            return None
        install_signal_handlers()  # SIGTERM / SIGINT: like a crash at any step, never inside a step that must be whole
        try:
            return main()
        except KeyboardInterrupt as exc:  # SIGINT / SIGTERM (tilecast.signals.Terminated): open runs closed FAILED
            if os.environ.get(TRACEBACK_ENV) == "1":
                raise
            signum = getattr(exc, "signum", signal.SIGINT)
            print(f"error: interrupted by {signal.Signals(signum).name}: stopped; what was recorded is whole "
                  f"(open MLflow runs closed FAILED, no alias moved halfway)", file=sys.stderr)
            raise SystemExit(128 + int(signum)) from None
        except HydraException as exc:
            if os.environ.get(TRACEBACK_ENV) == "1":
                raise
            help_note = (" (--help shows the composed config: give the mandatory groups too)"
                         if _HELP_FLAGS & set(sys.argv[1:]) else "")
            _report(hydra_error_line(exc, sys.argv[1:], _config_name(main)) + help_note)

    return run


_HELP_FLAGS = {"--help", "-h", "--hydra-help"}
HYDRA_FULL_ERROR_ENV = "HYDRA_FULL_ERROR"


def _config_name(main: Callable[..., Any]) -> str:
    """The job's primary config: ``conf/<job>.yaml`` for ``jobs/<job>.py``."""
    import inspect

    return Path(inspect.unwrap(main).__code__.co_filename).stem


def _override_of(argv: list[str], key: str) -> str:
    """The command-line override that sets ``key`` (``key=value``, ``+key=...``), else ``key``."""
    for arg in argv:
        m = _OVERRIDE.match(arg)
        if m and m["name"] == key:
            return arg
    return key


def _options(text: str) -> str:
    """The tab-indented option names Hydra lists after ``Available options...:``."""
    text = text.split("Config search path:", 1)[0]
    block = text.split("Available options", 1)[1] if "Available options" in text else ""
    return ", ".join(line.strip() for line in block.splitlines()[1:] if line.startswith("\t"))


def hydra_error_line(exc: HydraException, argv: list[str], config_name: str = "") -> str:
    """One line for a config Hydra could not compose from ``argv``, naming the override and what is known."""
    text = str(exc)
    cause = exc.__cause__
    bad = re.match(r"Could not override '(?P<key>[^']+)'\.(?P<rest>.*)", text, re.S)
    if bad:
        key = bad["key"]
        arg = _override_of(argv, key)
        if "No match in the defaults list" in bad["rest"]:
            return f"{arg}: this job has no config group or setting {key!r}{_did_you_mean(config_name, key)}"
        if cause is not None and "not in struct" in str(cause):
            return (f"{arg}: unknown setting {key!r} (not in conf/{config_name}.yaml or its groups)"
                    f"{_did_you_mean(config_name, key)}")
        return f"{arg}: {one_line(cause) if cause is not None else one_line(exc)}"
    missing = re.search(r"Could not find '(?P<group>[^'/]*)/(?P<option>[^']*)'", text)
    if isinstance(exc, MissingConfigException) and missing:
        group, option = missing["group"], missing["option"]
        known = _options(text)
        what = f"no config conf/{group}/{option}.yaml" if option else "no option given"
        return f"{group}={option}: {what}" + (f"; available: {known}" if known else "")
    mandatory = re.match(r"You must specify '(?P<group>[^']+)'", text)
    if mandatory:
        known = _options(text)
        return (f"You must specify '{mandatory['group']}' ({mandatory['group']}=<option>)"
                + (f"; available: {known}" if known else ""))
    if isinstance(exc, OverrideParseException):
        first = text.splitlines()[0] if text else type(exc).__name__
        return f"cannot parse the command line: {first} (override syntax: key=value, see " \
               "https://hydra.cc/docs/advanced/override_grammar/basic)"
    return one_line(ValueError(text.split("Config search path:")[0]))


# ---------------------------------------------------------------- the overrides against the job's conf files


def _load_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    return node if isinstance(node, dict) else {}


def _defaults_list(primary: Mapping[str, Any]) -> dict[str, Any]:
    """``{group: option}`` of a conf file's defaults list (``_self_`` and plain config names left out)."""
    out: dict[str, Any] = {}
    for item in primary.get("defaults") or []:
        if isinstance(item, dict):
            out.update({str(k).lstrip("+"): v for k, v in item.items()})
    return out


def conf_defaults(config_name: str, choices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The job's settings as its conf files give them, before any override: ``conf/<config_name>.yaml`` with
    each config group of its defaults list (the option in ``choices``, else the file's default) merged in,
    the primary file's values winning (``_self_`` comes last in every job). ``hydra`` is left out."""
    primary = _load_yaml(CONF_DIR / f"{config_name}.yaml")
    groups = _defaults_list(primary)
    out: dict[str, Any] = {k: v for k, v in primary.items() if k not in ("defaults", "hydra")}
    for group, default in groups.items():
        option = (choices or {}).get(group, default)
        node = _load_yaml(CONF_DIR / group / f"{option}.yaml") if isinstance(option, str) and option != "???" else {}
        node.pop("defaults", None)
        mine = out.get(group)
        out[group] = OmegaConf.to_container(OmegaConf.merge(node, mine), resolve=False) \
            if isinstance(mine, dict) else (node if mine is None else mine)
    return out


_ABSENT = object()


def _lookup(tree: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return _ABSENT
        tree = tree[part]
    return tree


def _open_mapping(defaults: Mapping[str, Any], key: str) -> bool:
    """Whether ``key`` falls under a mapping the conf files leave empty (``train.params: {}``: its keys are
    another object's fields, checked by the code that reads them) or under no mapping of the files at all."""
    node: Any = defaults
    for part in key.split(".")[:-1]:
        if not isinstance(node, dict) or part not in node:
            break
        node = node[part]
    return not isinstance(node, dict) or not node


def check_fields(section: str, cls: type, values: Mapping[str, Any]) -> None:
    """Check a config section meant as keyword arguments of dataclass ``cls`` (``nightly``'s ``train:`` ->
    ``TrainSpec``): an unknown key, or a value of another type than a boolean / numeric field's default, is a
    :class:`SpecError` naming ``<section>.<key>``."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in values.items():
        if key not in fields:
            raise SpecError(f"{section}.{key}={value}: {cls.__name__} has no field {key!r}; known: "
                            f"{', '.join(fields)}")
        default = fields[key].default
        problem = _type_problem(default, value) if not isinstance(default, dict) else None
        if problem:
            raise SpecError(f"{section}.{key}={value}: {problem} (the default is {_yaml_value(default)}), "
                            f"got {_kind(value)}")


def _did_you_mean(config_name: str, key: str) -> str:
    """``; did you mean 'val_fraction'?`` for a key close to a known one (same level), else ``""``."""
    if not config_name:
        return ""
    parent, _, leaf = key.rpartition(".")
    node = _lookup(conf_defaults(config_name), parent) if parent else conf_defaults(config_name)
    if not isinstance(node, dict):
        return ""
    close = difflib.get_close_matches(leaf, [str(k) for k in node], n=3)
    prefix = f"{parent}." if parent else ""
    return f"; did you mean {' or '.join(repr(prefix + c) for c in close)}?" if close else ""


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the text {value!r}"
    return f"{type(value).__name__} {value!r}"


def _type_problem(default: Any, value: Any) -> str | None:
    """Why ``value`` cannot stand where the conf file has ``default`` (None: it can). Only typed defaults are
    checked: a boolean, an integer, a number, a mapping; null, ``???`` and text defaults take anything here
    (the job validates those)."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "expected true or false"
    if isinstance(default, int):
        return None if value is None or (isinstance(value, int) and not isinstance(value, bool)) else \
            "expected an integer"
    if isinstance(default, float):
        return None if value is None or (isinstance(value, int | float) and not isinstance(value, bool)) else \
            "expected a number"
    if isinstance(default, dict):
        return None if isinstance(value, Mapping) else "expected a mapping {key: value, ...}"
    return None


def check_overrides(cfg: DictConfig) -> None:
    """Check the command line's overrides of a composed job config against the job's conf files
    (:func:`conf_defaults`), before the job reads any of them:

    - a value must have the type of the setting's default: a boolean takes ``true`` / ``false`` only (not
      ``maybe`` or ``no``), an integer an integer, a number a number, a mapping a mapping (else the job
      would read ``bool('no')`` as true or fail deep inside with a traceback);
    - a list setting given one value takes it as a one-element list (``families=softmax``);
    - ``+key=`` may not add a setting the job does not have (it would be ignored), except under a mapping the
      conf files leave empty (``+train.params.rounds=50``); ``~key`` may not delete a group or top-level setting
      (every job reads all of its own); a part of one may go (``~matrix.serve``).

    ``hydra.*``, config group choices (``predictor=mlp``) and what-if fields (``gpu.*``, ``model.*``: validated
    as specs) pass. Outside a Hydra run (no :class:`HydraConfig`) nothing is checked."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not HydraConfig.initialized():
        return
    hc = HydraConfig.get()
    choices = dict(hc.runtime.choices)
    defaults = conf_defaults(hc.job.config_name, choices)
    for ov in OverridesParser.create().parse_overrides(_task_overrides()):
        key = ov.key_or_group
        if re.split(r"[./]", key)[0] in ("hydra", *WHAT_IF_GROUPS) or (key in choices and not ov.is_delete()):
            continue
        if ov.is_delete():
            if "." not in key:  # a whole group or top-level setting: every job reads each of its own
                raise SpecError(f"{ov.input_line}: a setting of this job cannot be deleted; give it a value instead "
                                f"({key}=<value>, or {key}=null where null is allowed)")
            continue  # a part of one (~matrix.serve: an optional section); a key the job then misses is named
        default = _lookup(defaults, key)
        if default is _ABSENT:
            if (ov.is_add() or ov.is_force_add()) and not _open_mapping(defaults, key):
                raise SpecError(f"{ov.input_line}: this job has no setting {key!r} (it would be ignored)"
                                f"{_did_you_mean(hc.job.config_name, key)}")
            continue
        try:
            value = OmegaConf.select(cfg, key)
        except OmegaConfBaseException as exc:  # an interpolation that does not resolve
            why = str(getattr(exc, "msg", None) or exc).split("full_key:")[0].strip()
            raise SpecError(f"{ov.input_line}: {why}") from None
        if isinstance(default, list) and value is not None and not OmegaConf.is_config(value):
            OmegaConf.update(cfg, key, [value], merge=False)
            continue
        problem = _type_problem(default, value)
        if problem:
            raise SpecError(f"{ov.input_line}: {problem} (the default is {_yaml_value(default)}), got {_kind(value)}")


def _deletions() -> list[str]:
    """The ``~key`` overrides of the current Hydra run (none outside one)."""
    return [o for o in _task_overrides() if o.startswith("~")]


def _task_overrides() -> list[str]:
    """The command line's overrides of the current Hydra run as typed (``${...}`` unresolved); none outside one."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    return [str(o) for o in OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)]


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return f"a mapping of {', '.join(map(str, value))}"
    return repr(value)


#: the largest integer a workload setting (batch, seq_len, isl, osl, tp, concurrency, ...) may take: the
#: forecast multiplies them in 64-bit arithmetic, and far larger values overflow (OverflowError) deep inside
MAX_INT_SETTING = 2**31 - 1


def int_setting(cfg: Any, key: str) -> int:
    """An integer setting of a composed config, in ``[1, MAX_INT_SETTING]``; ``2.7``, ``"x"``, ``true``, 0 or
    ``10**30`` is refused by name, never truncated or passed on to overflow."""
    value = cfg.get(key) if hasattr(cfg, "get") else cfg[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"{key} must be an integer, got {value!r}")
    if not 1 <= value <= MAX_INT_SETTING:
        raise UserError(f"{key}={value}: must be between 1 and {MAX_INT_SETTING}")
    return value


# ---------------------------------------------------------------- output paths


def output_file(value: Any, key: str = "output", from_root: bool = True) -> Path | None:
    """The path of a file setting (``output=``), None when unset: resolved by :func:`tilecast.paths.resolve`, or
    as given (relative to the working directory) with ``from_root=False``. An existing directory, or a parent
    that is a file, is refused naming the setting (before the job does any work)."""
    if value is None or value == "":
        return None
    path = resolve(str(value)) if from_root else Path(str(value)).expanduser()
    if path.is_dir():
        raise UserError(f"{key}={value}: {path} is a directory; give a file path (e.g. {key}={value}/<name>)")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{key}={value}: {parent} is a file, not a directory")
            break
    return path


def output_directory(value: Any, key: str = "output_dir") -> Path:
    """The resolved path of a directory setting (``output_dir=``), checked before the job does any work: a
    filesystem root or the home directory itself (a job would write its folders into it), an existing file there
    (or above it), or a directory this process cannot write (a read-only mount, a ``chmod a-w`` folder) is
    refused naming the setting and the path."""
    path = resolve(str(value))
    home = Path.home().resolve()
    if path.resolve() == Path(path.anchor) or path.resolve() == home:
        what = "the home directory" if path.resolve() == home else "the root of the file system"
        raise UserError(f"{key}={value}: {path} is {what}; give a folder of its own (e.g. {key}={path / 'reports'})")
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise UserError(f"{key}={value}: {p} is a file, not a directory")
            if not is_writable(p):
                raise UserError(f"{key}={value}: {p} is read-only for this user (a read-only mount or no write "
                                f"permission); choose a writable folder")
            break
    return path


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


#: the catalogs ``tilecast list <name>`` prints, and the config group each one is
CATALOGS = {"gpus": "gpu", "models": "model", "prices": "pricing"}


def _yaml_body(text: str) -> list[str]:
    """A job's conf file without its ``defaults:`` list and its ``hydra:`` section (comments kept)."""
    out, skip = [], False
    for line in text.splitlines():
        top = line[:1] not in (" ", "#", "") and not line.startswith("-")
        if top:
            skip = line.startswith(("defaults:", "hydra:"))
        if not skip:
            out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def job_help(config_name: str) -> str:
    """``<job> --help``: how to call the job, its own options with the comments of its conf file (first), its config
    groups with where their catalogs are listed; never a catalog itself (``tilecast list gpus|models|prices``)."""
    path = CONF_DIR / f"{config_name}.yaml"
    body = _yaml_body(path.read_text(encoding="utf-8"))
    job = ROOT / "jobs" / f"{config_name}.py"
    lines = [f"usage: tilecast {config_name} key=value ...   (or python jobs/{config_name}.py key=value ...)"]
    if job.exists():
        lines.append(_summary(job))
    lines += ["", f"options ({path.relative_to(ROOT)}: the default, then what it means; key=value changes one):"]
    lines += [f"  {line}" if line.strip() else "" for line in body]
    groups = _defaults_list(_load_yaml(path))
    if groups:
        lines += ["", "config groups (group=option):"]
        for group, default in groups.items():
            options = group_options(group)
            catalog = next((f"; tilecast list {c}" for c, g in CATALOGS.items() if g == group), "")
            extra = ", or pricing=<your file>.yaml" if group == "pricing" else ""
            shown = ", ".join(options) if len(options) <= 6 else f"{len(options)} options"
            given = f"default: {default}" if default not in (None, "???") else "required: none by default"
            lines.append(f"  {group}: {shown} ({given}){extra}{catalog}")
    lines += ["", "what-ifs: gpu.<field>=<value>, model.config.<key>=<value> (predict, predict_kernels, graph)"
              if config_name in ("predict", "predict_kernels", "graph") else "",
              "the composed config: --cfg job; Hydra's own help: --hydra-help"]
    return "\n".join(line for line in lines if line is not None)


def list_catalog(name: str) -> str:
    """``tilecast list gpus|models|prices``: one line per entry of a catalog."""
    if name == "gpus":
        from tilecast.specs import all_gpus

        rows = [(g.key, g.device_name, g.vendor, g.architecture, f"{g.mem_gb:g} GB",
                 ", ".join(d for d in g.dtypes)) for g in all_gpus().values()]
        head = ("key", "device name", "vendor", "architecture", "memory", "dtypes")
    elif name == "models":
        from tilecast.specs import all_models

        rows = [(m.key, m.family, ", ".join(m.aliases[:2])) for m in all_models().values()]
        head = ("key", "family", "also known as")
    elif name == "prices":
        from tilecast.scoring.pricing import load_pricing

        pricing = load_pricing(_load_yaml(CONF_DIR / "pricing" / "default.yaml"))
        rows = [(p.gpu, f"{p.usd_per_gpu_hour:.2f}", p.basis, p.date, p.formula or p.source)
                for p in pricing.prices.values()]
        head = ("gpu", "USD/h", "basis", "date", "source or formula")
    else:
        raise SpecError(f"unknown catalog {name!r}; known: {', '.join(CATALOGS)}")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head) - 1)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    return "\n".join(fmt.format(*r) for r in [head, *sorted(rows)])


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
             "       tilecast <job> --help            (the job's options and defaults)",
             "       tilecast list gpus|models|prices (the catalogs)", "", "jobs:"]
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
    if args[0] == "list":
        with user_errors():
            print(list_catalog(args[1] if len(args) > 1 else ""))
        return
    jobs = _job_files()
    if not jobs:
        print(f"error: no jobs under {ROOT / 'jobs'}: reinstall tilecast (python3 -m pip install <checkout>) or set "
              f"TILECAST_ROOT=<checkout>", file=sys.stderr)
        raise SystemExit(USER_ERROR_EXIT)
    name = args[0].removesuffix(".py")
    if name not in jobs:
        print(f"error: unknown job {args[0]!r}; jobs: {', '.join(jobs)} (tilecast --help)", file=sys.stderr)
        raise SystemExit(USER_ERROR_EXIT)
    sys.argv = [str(jobs[name]), *args[1:]]
    runpy.run_path(str(jobs[name]), run_name="__main__")
