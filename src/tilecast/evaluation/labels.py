"""End-to-end labels as a table: from a directory laid out like the data's labels, or the shipped Parquet.

A label directory holds ``<device dir>/<model>-<inf|train>-<seq>-<batch>[-<variant>].json`` with an
``e2e_latency`` (ms); ``<device dir>`` is a device name with ``_`` for spaces (``NVIDIA_L4``), or any
name the GPU catalog knows. Variants: none (plain), ``fusion``, and any parallel tag (``dp4``, ``tp8``,
``pp4_1``). A file that cannot be used is reported with the reason and skipped; the rest are read.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tilecast.data import load_e2e_labels, load_node_labels, parse_tag
from tilecast.errors import UserError
from tilecast.graph.parallel import ParallelismError, parse_parallel
from tilecast.metrics import MAX_MEASURED_MS
from tilecast.specs import UnknownSpecError, get_gpu, get_model

LABEL_COLUMNS = ["device", "gpu", "tag", "model", "mode", "seq_len", "batch", "variant", "parallel", "fused",
                 "label_ms"]
LATENCY_KEY = "e2e_latency"


NODE_COLUMNS = ("Name", "fw_latency")


@dataclass
class LabelSet:
    """Labels (:data:`LABEL_COLUMNS`, one row per file), the files skipped as ``(path, reason)``, and the
    per-node labels found beside them (``device``, ``tag`` + the csv columns; None: not looked for)."""

    labels: pd.DataFrame
    skipped: list[tuple[str, str]] = field(default_factory=list)
    source: str = ""
    nodes: pd.DataFrame | None = None


def parse_variant(variant: str) -> tuple[str | None, bool]:
    """``plain`` -> (None, False), ``fusion`` -> (None, True), ``dp4`` / ``pp4_1`` ... -> (tag, False)."""
    if variant in ("", "plain"):
        return None, False
    if variant in ("fusion", "fused"):
        return None, True
    try:
        par = parse_parallel(variant)
    except ParallelismError:
        raise UserError(f"variant {variant!r} is not fusion or a parallel tag (dp4, tp4, pp4_1)") from None
    return par.tag, False


def label_record(device_dir: str, stem: str, latency_ms: object) -> dict:
    """One label row from a device directory name, a file stem and its latency; ValueError says why not."""
    try:
        gpu = get_gpu(device_dir)
    except UnknownSpecError as exc:
        raise UserError(f"device directory {device_dir!r}: {exc}") from None
    tag = parse_tag(stem)
    try:
        model = get_model(tag.model)
    except UnknownSpecError as exc:
        raise UserError(str(exc)) from None
    parallel, fused = parse_variant(tag.variant)
    if isinstance(latency_ms, bool) or not isinstance(latency_ms, (int, float)) or not math.isfinite(latency_ms) \
            or latency_ms <= 0:
        raise UserError(f"{LATENCY_KEY} must be a positive number of ms, got {latency_ms!r}")
    if latency_ms > MAX_MEASURED_MS:
        raise UserError(f"{LATENCY_KEY}={latency_ms:g} ms is absurd (above {MAX_MEASURED_MS:g} ms, the ceiling of "
                        f"every measurement: a unit slip or a corrupt file?)")
    return {"device": gpu.device_name, "gpu": gpu.key, "tag": stem, "model": model.key, "mode": tag.mode,
            "seq_len": tag.seq_len, "batch": tag.batch, "variant": tag.variant, "parallel": parallel,
            "fused": fused, "label_ms": float(latency_ms)}


def _frame(records: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(records, columns=LABEL_COLUMNS)
    return df.astype({"seq_len": "int64", "batch": "int64", "fused": bool, "label_ms": float}) if len(df) else df


def read_label_dir(root: str | os.PathLike) -> LabelSet:
    """Every ``<device dir>/*.json`` under ``root``, sorted by path; unusable files skipped with a reason."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"labels directory {str(root)!r} does not exist or is not a directory")
    records, skipped = [], []
    for path in sorted(p for d in sorted(root.iterdir()) if d.is_dir() for p in d.glob("*.json")):
        shown = str(path.relative_to(root))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or LATENCY_KEY not in data:
                raise UserError(f"expected a json object with {LATENCY_KEY!r}")
            records.append(label_record(path.parent.name, path.stem, data[LATENCY_KEY]))
        except (ValueError, OSError) as exc:  # json.JSONDecodeError is a ValueError
            skipped.append((shown, str(exc)))
    nodes, bad = _read_nodes(root)
    return LabelSet(_frame(records), skipped + bad, str(root), nodes)


def _read_nodes(root: Path) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Per-node label csvs (``<device dir>/<tag>.csv`` with ``Name`` and ``fw_latency``) under ``root``."""
    parts, skipped = [], []
    for path in sorted(p for d in sorted(root.iterdir()) if d.is_dir() for p in d.glob("*.csv")):
        shown = str(path.relative_to(root))
        try:
            try:
                gpu = get_gpu(path.parent.name)
            except UnknownSpecError as exc:
                raise UserError(f"device directory {path.parent.name!r}: {exc}") from None
            parse_tag(path.stem)
            df = pd.read_csv(path)
            missing = [c for c in NODE_COLUMNS if c not in df]
            if missing:
                raise UserError(f"per-node labels need columns {', '.join(NODE_COLUMNS)}; missing {missing}")
        except (ValueError, OSError, UnknownSpecError, pd.errors.ParserError) as exc:
            skipped.append((shown, str(exc)))
            continue
        parts.append(df.assign(device=gpu.device_name, tag=path.stem))
    nodes = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["device", "tag", *NODE_COLUMNS])
    return nodes, skipped


@dataclass(frozen=True)
class SkipGroup:
    """Skipped files that share a reason (the files' own names in it replaced by ``<name>``)."""

    reason: str
    files: tuple[str, ...]

    def line(self, shown: int = 3) -> str:
        """``skipped <n> label file(s) (<first files>, ... and <k> more): <reason>``, one line."""
        names = ", ".join(self.files[:shown]) + (f", ... and {len(self.files) - shown} more"
                                                 if len(self.files) > shown else "")
        noun = "label file" if len(self.files) == 1 else "label files"
        return f"skipped {len(self.files)} {noun} ({names}): {self.reason}"


def skipped_groups(skipped: list[tuple[str, str]]) -> list[SkipGroup]:
    """``(path, reason)`` pairs grouped by reason, in first-seen order: a device directory the catalog lacks,
    or many per-node files named alike, make one group each instead of one line per file."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for path, reason in skipped:
        groups.setdefault(reason.replace(repr(Path(path).stem), "'<name>'"), []).append((path, reason))
    return [SkipGroup(key if len(items) > 1 else items[0][1], tuple(p for p, _ in items))
            for key, items in groups.items()]


def skipped_lines(skipped: list[tuple[str, str]], shown: int = 3) -> list[str]:
    """One line per :func:`skipped_groups` group, with the count, the first ``shown`` files and the reason."""
    return [g.line(shown) for g in skipped_groups(skipped)]


def shipped_labels() -> LabelSet:
    """The labels shipped in ``data/`` (the ingested ``labels/e2e`` table)."""
    table = load_e2e_labels()
    records, skipped = [], []
    for row in table.itertuples(index=False):
        try:
            records.append(label_record(row.device_dir, row.tag, float(row.e2e_latency)))
        except ValueError as exc:
            skipped.append((f"{row.device_dir}/{row.tag}.json", str(exc)))
    return LabelSet(_frame(records), skipped, "data/neusight labels/e2e", load_node_labels())
