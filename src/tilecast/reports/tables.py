"""Report tables from a score table: latency grid, cheapest GPU under a latency target, cost per 1M tokens.

Every function takes the score table (``scores.parquet``) and returns a plain DataFrame; the
headline tables look at one slice (see :class:`Slice`): no parallelism, unfused, and per model one
sequence length (the configured one, or the model's longest scored one when it is shorter). Every
table keeps the workload's ``dtype`` as a column (a workload is a model in one precision): its rows are
per (model, dtype, ...), and the cheapest GPU is chosen per workload and dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

WORKLOAD_KEYS = ("model", "dtype", "mode", "batch", "seq_len", "parallel", "fused")


@dataclass(frozen=True)
class Slice:
    """The cells the headline tables show."""

    seq_len: int = 1024
    parallel: str = "none"
    fused: bool = False


def ok_cells(scores: pd.DataFrame) -> pd.DataFrame:
    """Cells with a forecast (no error, finite step time)."""
    e2e = scores["e2e_ms"].to_numpy(dtype=float)
    return scores.loc[scores["error"].isna() & np.isfinite(e2e)]


def fitting(scores: pd.DataFrame) -> pd.DataFrame:
    """Forecast cells whose memory fits on the GPU."""
    ok = ok_cells(scores)
    return ok.loc[ok["fits"].fillna(False).astype(bool)]


def headline(scores: pd.DataFrame, sl: Slice) -> pd.DataFrame:
    """The slice: ``parallel`` and ``fused`` as given, per model the reference sequence length."""
    sub = scores.loc[(scores["parallel"] == sl.parallel) & (scores["fused"].astype(bool) == sl.fused)]
    if sub.empty:
        return sub
    lens = sub.groupby("model")["seq_len"].agg(lambda s: _reference_len(s, sl.seq_len))
    return sub.loc[sub["seq_len"].to_numpy() == sub["model"].map(lens).to_numpy()]


def _reference_len(seq_lens: pd.Series, wanted: int) -> int:
    vals = sorted(set(int(v) for v in seq_lens))
    if wanted in vals:
        return wanted
    shorter = [v for v in vals if v < wanted]
    return shorter[-1] if shorter else vals[0]


def latency_grid(scores: pd.DataFrame, mode: str, sl: Slice) -> pd.DataFrame:
    """Step time (ms) per model x dtype x batch (rows) x GPU (columns); ``OOM`` where it does not fit, ``error``
    where it could not be forecast (an unsupported dtype on that GPU, say)."""
    sub = headline(scores.loc[scores["mode"] == mode], sl)
    if sub.empty:
        return pd.DataFrame()
    text = np.where(sub["error"].notna(), "error",
                    np.where(sub["fits"].fillna(True).astype(bool), sub["e2e_ms"].map(_fmt_ms), "OOM"))
    grid = (sub.assign(cell=text)
            .pivot_table(index=["model", "dtype", "seq_len", "batch"], columns="gpu", values="cell", aggfunc="first")
            .reset_index())
    grid.columns.name = None
    return grid


def _fmt_ms(v: float) -> str:
    if not np.isfinite(v):
        return ""
    return f"{v:.1f}" if v < 1000 else f"{v:,.0f}"


def cheapest_gpu(scores: pd.DataFrame, targets_ms: dict[str, float], sl: Slice | None = None) -> pd.DataFrame:
    """Per workload, the GPU with the lowest cost per 1M tokens among those that fit and meet the target.

    Columns: workload keys, ``target_ms``, ``gpu``, ``e2e_ms``, ``cost_per_1m_tokens_usd``, ``meeting``
    (how many GPUs meet the target), ``fastest_gpu`` and ``fastest_ms`` (for when none meets it).
    """
    sub = fitting(scores if sl is None else headline(scores, sl))
    if sub.empty:
        return pd.DataFrame()
    sub = sub.assign(target_ms=sub["mode"].map(targets_ms).astype(float))
    keys = list(WORKLOAD_KEYS)
    fastest = sub.loc[sub.groupby(keys)["e2e_ms"].idxmin(), [*keys, "gpu", "e2e_ms"]]
    fastest = fastest.rename(columns={"gpu": "fastest_gpu", "e2e_ms": "fastest_ms"})
    meet = sub.loc[sub["e2e_ms"] <= sub["target_ms"]]
    best = meet.loc[meet.groupby(keys)["cost_per_1m_tokens_usd"].idxmin(),
                    [*keys, "gpu", "e2e_ms", "cost_per_1m_tokens_usd"]]
    counts = meet.groupby(keys).size().rename("meeting").reset_index()
    targets = sub[[*keys, "target_ms"]].drop_duplicates(keys)
    out = targets.merge(best, on=keys, how="left").merge(counts, on=keys, how="left").merge(fastest, on=keys)
    out["meeting"] = out["meeting"].fillna(0).astype(int)
    out["gpu"] = out["gpu"].fillna("none meets the target")
    return out.sort_values(keys).reset_index(drop=True)


def cost_per_1m_tokens(scores: pd.DataFrame, mode: str, sl: Slice) -> pd.DataFrame:
    """Lowest cost per 1M tokens over the batch sizes that fit, per model and dtype (rows) x GPU (columns)."""
    sub = fitting(headline(scores.loc[scores["mode"] == mode], sl))
    if sub.empty:
        return pd.DataFrame()
    grid = sub.pivot_table(index=["model", "dtype", "seq_len"], columns="gpu", values="cost_per_1m_tokens_usd",
                           aggfunc="min").reset_index()
    grid.columns.name = None
    return grid


def failed_cells(scores: pd.DataFrame) -> pd.DataFrame:
    """Cells that could not be forecast, grouped by error text (with how many cells and an example)."""
    bad = scores.loc[scores["error"].notna()]
    if bad.empty:
        return pd.DataFrame(columns=["error", "cells", "example"])
    bad = bad.assign(example=bad["model"] + " " + bad["gpu"] + " " + bad["dtype"] + " b" + bad["batch"].astype(str)
                     + " s" + bad["seq_len"].astype(str) + " " + bad["mode"] + " " + bad["parallel"])
    return (bad.groupby("error").agg(cells=("example", "size"), example=("example", "first"))
            .reset_index().sort_values("cells", ascending=False).reset_index(drop=True))
