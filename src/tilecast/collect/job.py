"""Config -> collection: the one function ``jobs/collect.py`` (Hydra) and ``python -m tilecast.collect`` call.

``what`` picks the task (a registry): ``kernels`` (kernel tables), ``e2e`` (a label JSON), ``spec``
(a ``conf/gpu`` draft). Every run of kernels / e2e appends a provenance record (config, device,
versions, git commit, start and end, what was written) to ``<output_dir>/provenance.jsonl``.
"""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tilecast.collect.e2e import E2eRequest, collect_e2e
from tilecast.collect.e2e import prepare as prepare_e2e
from tilecast.collect.environment import check_device, detect
from tilecast.collect.errors import CollectError
from tilecast.collect.kernels import KernelRequest, collect_kernels
from tilecast.collect.kernels import prepare as prepare_kernels
from tilecast.collect.spec_draft import check_draft, draft_spec, gather_facts, spec_key
from tilecast.collect.timing import TimingPlan
from tilecast.collect.writing import append_jsonl, write_text_atomic
from tilecast.paths import CONF_DIR, DATA_DIR, ROOT, resolve
from tilecast.specs import UnknownSpecError, get_gpu

log = logging.getLogger("tilecast.collect")

#: every config key the collector reads (conf/collect.yaml holds their defaults)
KEYS = frozenset({"what", "device", "output_dir", "dtype", "ops", "shapes", "budget_s", "limit", "shuffle", "seed",
                  "profile", "warmup", "repeats", "fastest", "data_root", "model", "batch", "seq_len", "mode",
                  "num_layers", "spec_path", "overwrite"})


def device_key(name: str) -> str:
    """The catalog key of a device name, else one derived from the name (``NVIDIA H200`` -> ``h200``)."""
    try:
        return get_gpu(name).key
    except UnknownSpecError:
        return spec_key(name)


def _ops(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.strip("[]").split(",") if v.strip()]
    return [str(v) for v in value or []]


def _plan(cfg: Mapping[str, Any]) -> TimingPlan:
    return TimingPlan(warmup=int(cfg["warmup"]), repeats=int(cfg["repeats"]), fastest=int(cfg["fastest"]))


def _output_dir(cfg: Mapping[str, Any]) -> Path:
    if cfg.get("output_dir"):
        return resolve(str(cfg["output_dir"]))
    name = detect(cfg["device"]).name
    return DATA_DIR / "collected" / (device_key(name) if cfg["device"] == "cuda" else "cpu")


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def run_kernels(cfg: Mapping[str, Any]) -> dict[str, Any]:
    request = KernelRequest(ops=_ops(cfg["ops"]), shapes=str(cfg["shapes"]), dtype=str(cfg["dtype"]),
                            plan=_plan(cfg), profile=bool(cfg["profile"]),
                            budget_s=None if cfg["budget_s"] is None else float(cfg["budget_s"]),
                            limit=None if cfg["limit"] is None else int(cfg["limit"]), shuffle=bool(cfg["shuffle"]),
                            seed=int(cfg["seed"]), data_root=cfg.get("data_root"))
    prepare_kernels(request, cfg["device"])  # every check before the output dir is touched
    out = _output_dir(cfg)
    started = _now()
    summaries = collect_kernels(request, cfg["device"], out)
    result = {"output_dir": str(out), "ops": [asdict(s) for s in summaries]}
    append_jsonl(out / "provenance.jsonl", {"what": "kernels", "started_utc": started, "finished_utc": _now(),
                                            "device": detect(cfg["device"]).as_dict(), "git_commit": _git_commit(),
                                            "config": dict(cfg), "result": result})
    return result


def run_e2e(cfg: Mapping[str, Any]) -> dict[str, Any]:
    model = cfg.get("model")
    model = model.get("key") if isinstance(model, Mapping) else model  # Hydra composes the model group
    if not model:
        raise CollectError("what=e2e needs model=<catalog key>")
    request = E2eRequest(model=str(model), batch=int(cfg["batch"]), seq_len=int(cfg["seq_len"]),
                         mode=str(cfg["mode"]), dtype=str(cfg["dtype"]), plan=_plan(cfg),
                         num_layers=None if cfg["num_layers"] is None else int(cfg["num_layers"]))
    prepare_e2e(request, cfg["device"])
    out = _output_dir(cfg)
    started = _now()
    path = collect_e2e(request, cfg["device"], out)
    result = {"output_dir": str(out), "label": str(path)}
    append_jsonl(out / "provenance.jsonl", {"what": "e2e", "started_utc": started, "finished_utc": _now(),
                                            "device": detect(cfg["device"]).as_dict(), "git_commit": _git_commit(),
                                            "config": dict(cfg), "result": result})
    return result


def spec_destination(device_name: str, key: str, valid: bool, spec_path: str | None = None,
                     output_dir: str | None = None) -> Path:
    """Where a spec draft goes: ``spec_path`` if given; else ``<output_dir>/gpu_spec_draft.yaml`` if
    an output_dir is given; else, for a GPU the catalog has, ``data/collected/<catalog key>/
    gpu_spec_draft.yaml`` (never a second catalog file with the same device name), and for a new
    GPU ``conf/gpu/<key>.yaml`` (``.yaml.draft`` while required numbers are missing, so the
    catalog keeps loading)."""
    if spec_path:
        return resolve(spec_path)
    if output_dir:
        return resolve(output_dir) / "gpu_spec_draft.yaml"
    try:
        return DATA_DIR / "collected" / get_gpu(device_name).key / "gpu_spec_draft.yaml"
    except UnknownSpecError:
        return CONF_DIR / "gpu" / (f"{key}.yaml" if valid else f"{key}.yaml.draft")


def run_spec(cfg: Mapping[str, Any]) -> dict[str, Any]:
    check_device(cfg["device"])
    if cfg["device"] != "cuda":
        raise CollectError("what=spec reads a GPU: run it with device=cuda on the GPU machine")
    facts = gather_facts()
    key = spec_key(facts.name)
    if cfg.get("spec_path") and resolve(str(cfg["spec_path"])).parent == CONF_DIR / "gpu":
        key = Path(str(cfg["spec_path"])).name.split(".")[0]  # a catalog file's key is its name
    text = draft_spec(facts, key)
    try:
        check_draft(text, key)
        problem = ""
    except CollectError as exc:
        problem = str(exc)
    path = spec_destination(facts.name, key, not problem, cfg.get("spec_path"), cfg.get("output_dir"))
    if path.exists() and not cfg.get("overwrite"):
        raise CollectError(f"{path} exists; pass spec_path=<new file> or overwrite=true")
    if problem:
        log.warning("%s; fill in the missing values before using %s as conf/gpu/%s.yaml", problem, path, key)
    write_text_atomic(path, text)
    log.info("wrote the spec draft %s", path)
    return {"spec": str(path), "valid": not problem, "text": text}


#: what= -> task
TASKS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "kernels": run_kernels, "e2e": run_e2e, "spec": run_spec,
}


def run(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Run the collection ``cfg`` describes (keys as in conf/collect.yaml); returns what was written."""
    cfg = {k: v for k, v in cfg.items() if k != "hydra"}
    unknown = sorted(set(cfg) - KEYS)
    if unknown:
        raise CollectError(f"unknown option {unknown[0]!r}; known: {', '.join(sorted(KEYS))}")
    what = cfg.get("what")
    if what not in TASKS:
        raise CollectError(f"what={what!r} is not a collection task; use one of: {', '.join(TASKS)}")
    return TASKS[what](cfg)
