"""Reading a composed job config: bounded integers, output paths checked before any work, what-if GPUs and models."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tilecast.errors import UserError
from tilecast.paths import is_writable, resolve
from tilecast.specs import GpuSpec, ModelSpec, SpecError, get_gpu, get_model
from tilecast.specs.whatif import MODEL_FIELDS, changed_fields, model_with_config, same_value, with_overrides

log = logging.getLogger("tilecast.cli")

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

