"""The paper's error tables (``paper/*.csv``), reshaped to long (tidy) form.

``nvidia_inf`` / ``nvidia_train``: blocks of a device line, a ``Model`` line with merged cells (a
name then blanks), a ``Batch`` line, then one line per method. Output, one row per reported cell:
``device_dir, device, mode, model`` (catalog key) ``, model_paper, batch, method, ape_pct``.
``perop``: a distribution line (merged cells), a category line, one line per method. Output:
``distribution`` (in|out) ``, category`` (as in the paper) ``, family`` (tilecast op family)
``, method, ape_pct``. Blank cells are results the paper does not report: skipped and counted.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pyarrow as pa

from tilecast.data.columns import NONNEG_FLOAT, POSITIVE_INT, CellError, device_name, is_held_back
from tilecast.data.rows import Reject, SchemaError
from tilecast.data.schema import PAPER_CATEGORIES, PAPER_DISTRIBUTIONS, PAPER_E2E, PAPER_MODELS
from tilecast.data.tables import TableJob, TableResult, rel

E2E_TYPES = {"device_dir": pa.string(), "device": pa.string(), "mode": pa.string(), "model": pa.string(),
             "model_paper": pa.string(), "batch": pa.int64(), "method": pa.string(), "ape_pct": pa.float64()}
PEROP_TYPES = {"distribution": pa.string(), "category": pa.string(), "family": pa.string(),
               "method": pa.string(), "ape_pct": pa.float64()}


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Non-blank csv records (as read) with their line numbers."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        prev = 0
        for record in reader:
            line, prev = prev + 1, reader.line_num
            if any(record):
                yield line, record


def _strip(record: list[str]) -> list[str]:
    """``record`` without trailing empty fields."""
    end = len(record)
    while end and record[end - 1] == "":
        end -= 1
    return record[:end]


def _ffill(cells: list[str]) -> list[str]:
    out, last = [], ""
    for c in cells:
        last = c or last
        out.append(last)
    return out


def _table(types: dict[str, pa.DataType], rows: list[dict]) -> pa.Table:
    return pa.table({c: pa.array([r[c] for r in rows], type=t) for c, t in types.items()})


def build_paper_e2e(name: str, path: Path, source: Path) -> TableResult:
    """``nvidia_inf`` / ``nvidia_train`` in long form."""
    shown, mode = rel(path, source), PAPER_E2E[name]
    rows: list[dict] = []
    rejects: list[Reject] = []
    blank, held = 0, {}
    device_dir = device = device_error = None
    models: list[str] = []
    batches: list[int] = []
    for line, raw in _lines(path):
        rec, head = _strip(raw), raw[0]
        if len(raw) == 1:  # a device line (a single field) starts a block
            device_dir, models, batches, device, device_error = head, [], [], None, None
            try:
                device = device_name(head)
            except CellError as exc:
                device_error = str(exc)
        elif head == "Model":
            models = _ffill(raw[1:])
            unknown = sorted(set(models) - set(PAPER_MODELS))
            if unknown:
                raise SchemaError(f"{shown}:{line}: unknown paper models {unknown}; known: {sorted(PAPER_MODELS)}")
        elif head == "Batch":
            try:
                batches = [POSITIVE_INT.cell("Batch", c) for c in raw[1:]]
            except CellError as exc:
                raise SchemaError(f"{shown}:{line}: {exc}") from None
        else:
            if device_dir is None or not models or len(batches) != len(models):
                raise SchemaError(f"{shown}:{line}: method line {head!r} before a device, Model and Batch line")
            if len(rec) - 1 > len(models):
                rejects.append(Reject(shown, line, f"{len(rec) - 1} values for {len(models)} columns"))
                continue
            for model, batch, cell in zip(models, batches, rec[1:], strict=False):
                if cell == "":
                    blank += 1
                    continue
                if device is not None and is_held_back(device):  # its errors + the roofline give its latencies
                    held[device] = held.get(device, 0) + 1
                    continue
                try:
                    if device_error:
                        raise CellError(device_error)
                    ape = NONNEG_FLOAT.cell(f"{model} batch {batch}", cell)
                except CellError as exc:
                    rejects.append(Reject(shown, line, str(exc)))
                    continue
                rows.append({"device_dir": device_dir, "device": device, "mode": mode,
                             "model": PAPER_MODELS[model], "model_paper": model, "batch": batch,
                             "method": head, "ape_pct": ape})
            blank += len(models) - (len(rec) - 1)
    notes = [f"{blank} blank cells (not reported by the paper) skipped"]
    notes += [f"{n} cells of {d} dropped: a GPU held back from this project (its per-cell errors with the roofline "
              f"would reconstruct its latencies)" for d, n in sorted(held.items())]
    return TableResult(f"paper/{name}", _table(E2E_TYPES, rows), rejects, [shown], notes=notes)


def build_paper_perop(name: str, path: Path, source: Path) -> TableResult:
    """``perop`` in long form."""
    shown = rel(path, source)
    records = list(_lines(path))
    if len(records) < 2:
        raise SchemaError(f"{shown}: expected a distribution line and a category line")
    (l1, dist_rec), (l2, cat_rec) = records[:2]
    dists, cats = _ffill(dist_rec[1:]), cat_rec[1:]
    bad = sorted(set(dists) - set(PAPER_DISTRIBUTIONS)) or sorted(set(cats) - set(PAPER_CATEGORIES))
    if bad or len(dists) != len(cats):
        raise SchemaError(f"{shown}:{l1}-{l2}: header not understood ({bad or 'column counts differ'}); "
                          f"known: {sorted(PAPER_DISTRIBUTIONS)}, {sorted(PAPER_CATEGORIES)}")
    rows: list[dict] = []
    rejects: list[Reject] = []
    blank = 0
    for line, raw in records[2:]:
        rec = _strip(raw)
        if len(rec) - 1 > len(cats):
            rejects.append(Reject(shown, line, f"{len(rec) - 1} values for {len(cats)} columns"))
            continue
        for dist, cat, cell in zip(dists, cats, rec[1:] + [""] * (len(cats) - len(rec) + 1), strict=True):
            if cell == "":
                blank += 1
                continue
            try:
                ape = NONNEG_FLOAT.cell(f"{dist} {cat}", cell)
            except CellError as exc:
                rejects.append(Reject(shown, line, str(exc)))
                continue
            rows.append({"distribution": PAPER_DISTRIBUTIONS[dist], "category": cat,
                         "family": PAPER_CATEGORIES[cat], "method": rec[0], "ape_pct": ape})
    return TableResult(f"paper/{name}", _table(PEROP_TYPES, rows), rejects, [shown],
                       notes=[f"{blank} blank cells (not reported by the paper) skipped"])


_BUILDERS = {**dict.fromkeys(PAPER_E2E, build_paper_e2e), "perop": build_paper_perop}


def plan_paper(source: Path) -> list[TableJob]:
    """One job per paper table; an unknown paper csv is a schema error."""
    jobs = []
    for path in sorted((source / "paper").glob("*.csv")):
        builder = _BUILDERS.get(path.stem)
        if builder is None:
            jobs.append(TableJob(f"paper/{path.stem}", partial(_unknown_paper, path)))
        else:
            jobs.append(TableJob(f"paper/{path.stem}", partial(builder, path.stem, path)))
    return jobs


def _unknown_paper(path: Path, source: Path) -> TableResult:
    raise SchemaError(f"{rel(path, source)}: unknown paper table; known: {sorted(_BUILDERS)}")
