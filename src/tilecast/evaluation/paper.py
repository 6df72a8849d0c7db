"""The paper's published per-cell errors (``paper/nvidia_inf``, ``paper/nvidia_train``) keyed like our labels.

The paper's tables name device, model and batch; the sequence length of a cell is the one the
reference graphs of that model and mode were traced at (``graphs/<model>-<mode>-<seq>-<batch>``).
"""

from __future__ import annotations

import functools

import pandas as pd

from tilecast.data import graph_tags, load_paper, parse_tag

#: paper method name -> our column
METHODS = {"NeuSight": "neusight_ape_pct", "Roofline": "roofline_paper_ape_pct"}
CELL = ["device", "mode", "model", "batch", "seq_len"]


@functools.cache
def _paper_seq() -> dict[tuple[str, str], int]:
    """(model, mode) -> sequence length of its plain reference graphs."""
    seqs: dict[tuple[str, str], set[int]] = {}
    for tag in graph_tags():
        t = parse_tag(tag)
        if t.variant == "plain":
            seqs.setdefault((t.model, t.mode), set()).add(t.seq_len)
    return {k: min(v) for k, v in seqs.items()}


def paper_cells() -> pd.DataFrame:
    """One row per published single-GPU cell with a NeuSight value: :data:`CELL` + one column per method."""
    parts = []
    for name in ("nvidia_inf", "nvidia_train"):
        p = load_paper(name)
        p = p[p["method"].isin(list(METHODS))].dropna(subset=["ape_pct"])
        wide = p.pivot_table(index=["device", "mode", "model", "batch"], columns="method", values="ape_pct",
                             aggfunc="first").rename(columns=METHODS).reset_index()
        parts.append(wide)
    cells = pd.concat(parts, ignore_index=True)
    cells = cells[cells["neusight_ape_pct"].notna()]
    seq = _paper_seq()
    cells["seq_len"] = [seq.get((m, mode)) for m, mode in zip(cells["model"], cells["mode"], strict=True)]
    cells = cells.dropna(subset=["seq_len"]).astype({"seq_len": "int64", "batch": "int64"})
    cols = [*CELL, *METHODS.values()]
    return cells[[c for c in cols if c in cells]].reset_index(drop=True)


def with_paper(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` plus the paper's per-cell APE columns and ``paper_cell`` (a published plain cell)."""
    cells = paper_cells().assign(variant="plain")
    cols = [c for c in METHODS.values() if c in cells]
    out = table.drop(columns=[c for c in cols if c in table]).merge(
        cells[[*CELL, "variant", *cols]], on=[*CELL, "variant"], how="left")
    return out.assign(paper_cell=out["neusight_ape_pct"].notna())
