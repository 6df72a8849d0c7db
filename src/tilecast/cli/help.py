"""Help: ``tilecast --help`` (the jobs), ``<job> --help`` (the job's options with their comments, first) and
``tilecast list gpus|models|prices`` (the catalogs, never in a job's help)."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml

from tilecast.cli.args import HOME_ENV, group_options, tilecast_home
from tilecast.cli.overrides import _defaults_list, _load_yaml
from tilecast.cli.schema import schema_defaults
from tilecast.paths import CONF_DIR, ROOT
from tilecast.specs import SpecError

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


def _flow(value: Any) -> str:
    """A default as one line of YAML (``[l4, a100_pcie_80gb]``, ``{usable_fraction: 1.0, ...}``, ``null``)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


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
    schema = schema_defaults(config_name)
    if schema:  # the settings' defaults, from the job's schema (tilecast.cli.schema), as --cfg job shows them
        lines += ["", f"settings and their defaults (the schema; conf/{config_name}.yaml above overrides them):"]
        lines += [f"  {key}: {_flow(value)}" for key, value in schema.items()]
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
