"""The command line before Hydra parses it: joined overrides split, catalog names normalised, what-ifs checked,
group options checked against ``conf/<group>/``, Hydra's directories placed under ``$TILECAST_HOME``.

``conf/gpu`` and ``conf/model`` are Hydra config groups, so ``gpu=l4`` composes ``conf/gpu/l4.yaml``
into the job's config. People also name GPUs by device name (``gpu="NVIDIA L4"``) or label
directory (``gpu=NVIDIA_L4``): :func:`catalog_argv` rewrites those to catalog keys before Hydra
parses the command line (every element of a sweep ``gpu=l4,tesla_t4`` too), and turns an unknown name
into an error that lists the closest ones."""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shlex
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tilecast.cli.overrides import WHAT_IF_GROUPS
from tilecast.paths import CONF_DIR, STATE_ROOT
from tilecast.specs import GpuSpec, SpecError, get_gpu, get_model
from tilecast.specs.whatif import GPU_IDENTITY, MODEL_FIELDS

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

