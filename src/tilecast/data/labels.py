"""Measured model labels: ``labels/<device_dir>/<tag>.json`` (end to end) and ``<tag>.csv`` (per node).

Both tables lead with ``device_dir`` (as in the source), ``device`` (exact catalog device name) and
``tag`` (file name without extension). ``e2e`` adds the parsed tag (``model`` = catalog key,
``model_raw`` = name in the file, ``mode``, ``seq_len``, ``batch``, ``variant``) and every json key;
``nodes`` adds ``row`` (0-based position in the source csv) and the csv columns.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from tilecast.data.columns import STRING, CellError, ColumnType, device_name
from tilecast.data.rows import Reject, SchemaError, arrow_table, read_rows, require_columns, type_rows
from tilecast.data.schema import NODE_FIRST, NODE_REQUIRED, NODE_TYPES
from tilecast.data.tables import TableJob, TableResult, rel
from tilecast.data.tags import Tag, parse_tag

E2E_NAME = "labels/e2e"
NODES_NAME = "labels/nodes"
#: json keys with their meaning: (arrow type, nullable, must be > 0).
E2E_KEYS: dict[str, tuple[pa.DataType, bool, bool]] = {
    "num_layer": (pa.int64(), True, False),
    "e2e_latency": (pa.float64(), False, True),
    "fw_latency": (pa.float64(), False, False),
    "bwall_latency": (pa.float64(), False, False),
}
_EXTRA_KEY = (pa.float64(), True, False)
_ROW = ColumnType(pa.int64(), int)  # any other json key: a non-negative number or null
_TAG_COLUMNS = {"device_dir": pa.string(), "device": pa.string(), "tag": pa.string(), "model": pa.string(),
                "model_raw": pa.string(), "mode": pa.string(), "seq_len": pa.int64(), "batch": pa.int64(),
                "variant": pa.string()}


def _label_files(source: Path, suffix: str) -> list[Path]:
    root = source / "labels"
    return sorted(p for d in sorted(root.glob("*")) if d.is_dir() for p in d.glob(f"*{suffix}"))


def _where(path: Path) -> tuple[str, str, Tag]:
    """(device_dir, device, tag) of a label file, or CellError with the reason."""
    try:
        device = device_name(path.parent.name)
    except CellError as exc:
        raise CellError(f"label directory {path.parent.name!r}: {exc}") from None
    try:
        tag = parse_tag(path.stem)
    except ValueError as exc:
        raise CellError(str(exc)) from None
    return path.parent.name, device, tag


def _line_of(text: str, key: str) -> int:
    needle = json.dumps(key)
    for i, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return i
    return 1


def _json_value(key: str, value: Any, spec: tuple[pa.DataType, bool, bool]) -> Any:
    arrow, nullable, positive = spec
    if value is None:
        if nullable:
            return None
        raise CellError(f"{key}: null")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CellError(f"{key}: not a finite number {value!r}")
    if positive and value <= 0:
        raise CellError(f"{key}: must be positive, got {value!r}")
    if value < 0:
        raise CellError(f"{key}: must be non-negative, got {value!r}")
    if pa.types.is_integer(arrow):
        if float(value) != int(value):
            raise CellError(f"{key}: not an integer {value!r}")
        return int(value)
    return float(value)


def build_e2e(source: Path) -> TableResult:
    """One row per label json; rejects name the file and the line of the offending key."""
    files = _label_files(source, ".json")
    if not files:
        raise SchemaError(f"{E2E_NAME}: no label json under labels/")
    records: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    extra: set[str] = set()
    for path in files:
        shown = rel(path, source)
        text = path.read_text(encoding="utf-8")
        try:
            device_dir, device, tag = _where(path)
            data = json.loads(text)
        except CellError as exc:
            rejects.append(Reject(shown, 1, str(exc)))
            continue
        except json.JSONDecodeError as exc:
            rejects.append(Reject(shown, exc.lineno, f"not valid json ({exc.msg})"))
            continue
        if not isinstance(data, dict):
            rejects.append(Reject(shown, 1, f"expected a json object, got {type(data).__name__}"))
            continue
        row: dict[str, Any] = {"device_dir": device_dir, "device": device, "tag": tag.tag, "model": tag.model,
                               "model_raw": tag.model_raw, "mode": tag.mode, "seq_len": tag.seq_len,
                               "batch": tag.batch, "variant": tag.variant}
        try:
            for key, spec in E2E_KEYS.items():
                if key not in data and not spec[1]:
                    raise CellError(f"{key}: missing key")
            for key, value in data.items():
                if key in _TAG_COLUMNS:
                    raise CellError(f"{key}: key clashes with the column derived from the file name")
                row[key] = _json_value(key, value, E2E_KEYS.get(key, _EXTRA_KEY))
        except CellError as exc:
            key = str(exc).split(":", 1)[0]
            rejects.append(Reject(shown, _line_of(text, key), str(exc)))
            continue
        extra |= set(data) - set(E2E_KEYS)
        records.append(row)
    types = _TAG_COLUMNS | {k: spec[0] for k, spec in E2E_KEYS.items()} | {k: _EXTRA_KEY[0] for k in sorted(extra)}
    columns = {c: pa.array([r.get(c) for r in records], type=t) for c, t in types.items()}
    aliases = _aliases_used(records)
    return TableResult(E2E_NAME, pa.table(columns), rejects, [rel(p, source) for p in files],
                       notes=[f"model aliases applied: {aliases}"] if aliases else [])


def _aliases_used(records: list[dict[str, Any]]) -> str:
    pairs = sorted({(r["model_raw"], r["model"]) for r in records if r["model_raw"] != r["model"]})
    return ", ".join(f"{a} -> {b}" for a, b in pairs)


def build_nodes(source: Path) -> TableResult:
    """Every per-node label csv, one row per traced node, columns united across files."""
    files = _label_files(source, ".csv")
    if not files:
        raise SchemaError(f"{NODES_NAME}: no per-node label csv under labels/")
    sources, rejects = [], []
    read = []
    for path in files:
        shown = rel(path, source)
        src = read_rows(path, shown)
        require_columns(src.header, NODE_REQUIRED, shown)
        read.append((path, shown, src))
        sources.append(shown)
    seen = [c for _, _, src in read for c in src.header]
    columns = [c for c in NODE_FIRST if c in seen]
    columns += [c for c in dict.fromkeys(seen) if c not in columns]
    types: dict[str, ColumnType] = {"device_dir": STRING, "device": STRING, "tag": STRING, "row": _ROW}
    types |= {c: NODE_TYPES.get(c, STRING) for c in columns}
    values: dict[str, list[Any]] = {c: [] for c in types}
    for path, shown, src in read:
        try:
            device_dir, device, tag = _where(path)
        except CellError as exc:
            rejects += src.rejects + [Reject(shown, line, str(exc)) for line in src.lines]
            continue
        typed, lines, bad = type_rows(src, shown, NODE_TYPES, columns)
        rejects += bad
        values["device_dir"] += [device_dir] * len(lines)
        values["device"] += [device] * len(lines)
        values["tag"] += [tag.tag] * len(lines)
        values["row"] += [line - 2 for line in lines]
        for c in columns:
            values[c] += typed[c]
    return TableResult(NODES_NAME, arrow_table(values, types), rejects, sources)


def plan_labels(source: Path) -> list[TableJob]:
    """The two label tables."""
    return [TableJob(E2E_NAME, build_e2e), TableJob(NODES_NAME, build_nodes)]
