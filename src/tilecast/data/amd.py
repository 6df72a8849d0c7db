"""NeuSight's AMD kernel rows: ``{test,train}/collect/<op>/<torch version>/<Device>.csv`` -> ``kernels/<op>``.

The tables have the NVIDIA kernel tables' columns (``data/neusight/kernels``) in their order, then
``Source``: ``test`` for the model-shaped bmm/linear rows of ``test/collect``, ``train`` for the
vector-op rows of ``train/collect``. Columns the AMD files lack are null, except ``Torch Version``,
which the folder name gives (``p2.4.1``). Rows are ordered by Device, then source order.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from functools import partial
from pathlib import Path

from tilecast.data.columns import ColumnType, one_of
from tilecast.data.rows import Reject, SchemaError, arrow_table, read_rows, require_columns, type_rows
from tilecast.data.schema import KERNEL_REQUIRED, KERNEL_TYPES, kernel_dims
from tilecast.data.tables import TableJob, TableResult, rel

DEVICES = ("AMD Instinct MI100", "AMD Instinct MI210")
#: source split folder -> the ``Source`` label of its rows.
SPLITS: dict[str, str] = {"test": "test", "train": "train"}
#: the NVIDIA kernel tables' columns before the dims (``Kernels`` is kept: every AMD file has it).
BASE_COLUMNS = ("OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name", "Warps per SM",
                "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z", "CUDA Version",
                "Kernels")
#: columns of the NVIDIA tables the AMD files lack (null; ``Torch Version`` comes from the folder name).
ABSENT = ("Torch Version", "CUDNN Version", "Warps per SM", "Blocks per SM", "CUDA Version")
#: KERNEL_TYPES with the absent columns nullable, and the AMD devices.
AMD_TYPES: dict[str, ColumnType] = {
    **{c: replace(t, nullable=True) if c in ABSENT else t for c, t in KERNEL_TYPES.items()},
    "Device": one_of(DEVICES),
}
DEVICE_CONFIGS = "train/device_configs"
#: numeric spec fields every device config must carry (positive).
DEVICE_FIELDS = ("Dev_Mem", "Mem_Bw", "Num_Sm", "Core_Per_SM", "Freq", "SingleFLOPsMM", "SingleFLOPsVEC", "L2Cache")


def _files(source: Path) -> dict[str, list[tuple[str, Path]]]:
    """op -> [(Source label, file)], split order then path order."""
    found: dict[str, list[tuple[str, Path]]] = defaultdict(list)
    for split, label in SPLITS.items():
        for path in sorted((source / split / "collect").glob("*/*/*.csv")):
            found[path.parent.parent.name].append((label, path))
    return found


def _kernel_table(op: str, files: list[tuple[str, Path]], source: Path) -> TableResult:
    columns = [*BASE_COLUMNS, *kernel_dims(op)]
    values: dict[str, list] = {c: [] for c in [*columns, "Source"]}
    rejects: list[Reject] = []
    for label, path in files:
        shown = rel(path, source)
        src = read_rows(path, shown)
        require_columns(src.header, [*KERNEL_REQUIRED, *kernel_dims(op)], shown)
        typed, lines, bad = type_rows(src, shown, AMD_TYPES, columns)
        rejects += bad
        keep = []
        for i, (device, line) in enumerate(zip(typed["Device"], lines, strict=True)):
            if device != path.stem:
                rejects.append(Reject(shown, line, f"Device: {device!r} is not the file's device {path.stem!r}"))
            else:
                keep.append(i)
        if "Torch Version" not in src.header:
            typed["Torch Version"] = [path.parent.name] * len(lines)
        for c in columns:
            values[c] += [typed[c][i] for i in keep]
        values["Source"] += [label] * len(keep)
    order = sorted(range(len(values["Device"])), key=values["Device"].__getitem__)
    values = {c: [v[i] for i in order] for c, v in values.items()}
    rejects.sort(key=lambda r: (r.file, r.line))
    return TableResult(f"kernels/{op}", arrow_table(values, AMD_TYPES), rejects, [rel(p, source) for _, p in files])


def plan_amd(source: Path) -> list[TableJob]:
    """One ``kernels/<op>`` job per op folder found under ``{test,train}/collect``."""
    found = sorted(_files(source).items())
    return [TableJob(f"kernels/{op}", partial(_kernel_table, op, files)) for op, files in found]


def check_device_config(path: Path, shown: str) -> None:
    """A device config is a JSON object naming a known AMD device, its file named after it, with positive specs."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{shown}: not JSON ({exc})") from None
    if not isinstance(spec, dict) or spec.get("Device") not in DEVICES:
        raise SchemaError(f"{shown}: 'Device' must be one of {list(DEVICES)}")
    if path.stem != spec["Device"].replace(" ", "_"):
        raise SchemaError(f"{shown}: file name does not match its Device {spec['Device']!r}")
    for field in DEVICE_FIELDS:
        try:
            ok = float(spec[field]) > 0
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise SchemaError(f"{shown}: {field} must be a positive number, got {spec.get(field)!r}")

