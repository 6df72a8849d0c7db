"""Benchmark tables shaped like the paper's ``nvidia_inf.csv`` / ``nvidia_train.csv`` and Markdown for them.

One block per device: columns are the paper's (model, batch) cells in its order, rows are methods
(the paper's NeuSight and roofline APE, ours spec-only and calibrated, ...), plus a ``mean`` column
over the cells that have a label.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from tilecast.data import load_paper

PAPER_TABLE = {"inference": "nvidia_inf", "training": "nvidia_train"}


def paper_layout(mode: str) -> pd.DataFrame:
    """The paper's cells of one mode in its column order: ``model``, ``model_paper``, ``batch``."""
    p = load_paper(PAPER_TABLE[mode])
    return p[["model", "model_paper", "batch"]].drop_duplicates().reset_index(drop=True)


def paper_shaped(table: pd.DataFrame, mode: str, rows: Mapping[str, str]) -> dict[str, pd.DataFrame]:
    """Per device: ``rows`` (row label -> column of ``table``) x the paper's cells, plus ``mean``.

    ``table``: one row per label with ``device``, ``mode``, ``model``, ``batch``, ``paper_cell`` and the
    columns named in ``rows``; only published cells (``paper_cell``) are placed.
    """
    layout = paper_layout(mode)
    cells = table[(table["mode"] == mode) & table["paper_cell"].astype(bool)]
    names = [f"{r.model_paper} {r.batch}" for r in layout.itertuples(index=False)]
    out = {}
    for device, part in cells.groupby("device", sort=True):
        by_cell = part.set_index(["model", "batch"])
        block = pd.DataFrame(np.nan, index=list(rows), columns=names)
        for r, name in zip(layout.itertuples(index=False), names, strict=True):
            if (r.model, r.batch) in by_cell.index:
                hit = by_cell.loc[[(r.model, r.batch)]].iloc[0]
                for label, col in rows.items():
                    block.loc[label, name] = hit[col]
        block["mean"] = block.mean(axis=1)
        out[str(device)] = block
    return out


def fmt(value: object, digits: int = 1) -> str:
    """A table cell: numbers rounded, missing values blank."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}f}"
    return str(value)


def markdown(df: pd.DataFrame, index: bool = True, digits: int = 1) -> str:
    """A GitHub Markdown table of ``df`` (no extra dependency)."""
    names = [n for n in df.index.names if n] if index else []
    cols = ([" / ".join(names)] if index else []) + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
    for idx, *values in df.itertuples(index=True, name=None):
        label = " / ".join(map(str, idx)) if isinstance(idx, tuple) else str(idx)
        cells = ([label] if index else []) + [fmt(v, digits) for v in values]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
