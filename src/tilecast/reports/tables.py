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
#: a decision is made per workload: a model in one precision, inference or training (batch is chosen)
DECISION_KEYS = ("model", "mode", "dtype")
#: optional columns of a score table holding a forecast interval of ``e2e_ms`` (low, high); a table without them
#: gets "no interval" in the recommendations' confidence column
INTERVAL_COLUMNS = ("pred_lo_ms", "pred_hi_ms")
NO_INTERVAL = "no interval"


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
    from tilecast.scoring.engine import not_supported

    text = np.where(not_supported(sub["error"]), "not supported", np.where(
        sub["error"].notna(), "error", np.where(sub["fits"].fillna(True).astype(bool), sub["e2e_ms"].map(_fmt_ms),
                                                "OOM")))
    grid = (sub.assign(cell=text)
            .pivot_table(index=["model", "dtype", "seq_len", "batch"], columns="gpu", values="cell", aggfunc="first")
            .reset_index())
    grid.columns.name = None
    return grid


def _fmt_ms(v: float) -> str:
    if not np.isfinite(v):
        return ""
    return f"{v:.1f}" if v < 1000 else f"{v:,.0f}"


#: the ``price`` column of a table with costs: the GPU's price is its own list price, or an estimate (a proxy's list
#: price or a formula, conf/pricing: the report's Prices section says which and why)
LISTED, ESTIMATE = "list", "estimate"


def price_label(rows: pd.DataFrame, costed: pd.Series | np.ndarray | None = None) -> pd.Series:
    """``list`` / ``estimate`` per row from ``price_estimate`` (blank where ``costed`` is false: no cost shown)."""
    est = rows["price_estimate"].fillna(False).astype(bool) if "price_estimate" in rows else \
        pd.Series(False, index=rows.index)
    out = pd.Series(np.where(est, ESTIMATE, LISTED), index=rows.index, dtype=object)
    return out if costed is None else out.where(np.asarray(costed, dtype=bool), "")


def estimate_marked(gpus: pd.Series, estimate: pd.Series) -> dict[str, str]:
    """``{gpu: "gpu*"}`` for the GPUs whose price is an estimate (a column header of a cost grid)."""
    flagged = set(gpus[estimate.fillna(False).astype(bool)]) if len(gpus) else set()
    return {g: f"{g}*" for g in flagged}


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
    best = meet.loc[meet.groupby(keys)["cost_per_1m_tokens_usd"].idxmin()]
    best = best[[*keys, "gpu", "e2e_ms", "cost_per_1m_tokens_usd"]].assign(price=price_label(best))
    counts = meet.groupby(keys).size().rename("meeting").reset_index()
    targets = sub[[*keys, "target_ms"]].drop_duplicates(keys)
    out = targets.merge(best, on=keys, how="left").merge(counts, on=keys, how="left").merge(fastest, on=keys)
    out["meeting"] = out["meeting"].fillna(0).astype(int)
    out["gpu"] = out["gpu"].fillna("none meets the target")
    out["price"] = out["price"].fillna("")
    return out.sort_values(keys).reset_index(drop=True)


def cost_per_1m_tokens(scores: pd.DataFrame, mode: str, sl: Slice) -> pd.DataFrame:
    """Lowest cost per 1M tokens over the batch sizes that fit, per model and dtype (rows) x GPU (columns)."""
    sub = fitting(headline(scores.loc[scores["mode"] == mode], sl))
    if sub.empty:
        return pd.DataFrame()
    grid = sub.pivot_table(index=["model", "dtype", "seq_len"], columns="gpu", values="cost_per_1m_tokens_usd",
                           aggfunc="min").reset_index()
    grid.columns.name = None
    return grid.rename(columns=estimate_marked(sub["gpu"], sub.get("price_estimate", pd.Series(dtype=bool))))


def unsupported_cells(scores: pd.DataFrame) -> pd.DataFrame:
    """Cells whose GPU has no peak for their dtype (not failures), per (GPU, dtype): how many cells."""
    from tilecast.scoring.engine import not_supported

    bad = scores.loc[not_supported(scores["error"])]
    if bad.empty:
        return pd.DataFrame(columns=["gpu", "dtype", "cells"])
    return bad.groupby(["gpu", "dtype"]).size().rename("cells").reset_index()


def failed_cells(scores: pd.DataFrame) -> pd.DataFrame:
    """Cells that could not be forecast (an error other than a dtype the GPU cannot run, which is "not supported",
    :func:`unsupported_cells`), grouped by error text (with how many cells and an example)."""
    from tilecast.scoring.engine import not_supported

    bad = scores.loc[scores["error"].notna().to_numpy() & ~not_supported(scores["error"])]
    if bad.empty:
        return pd.DataFrame(columns=["error", "cells", "example"])
    bad = bad.assign(example=bad["model"] + " " + bad["gpu"] + " " + bad["dtype"] + " b" + bad["batch"].astype(str)
                     + " s" + bad["seq_len"].astype(str) + " " + bad["mode"] + " " + bad["parallel"])
    return (bad.groupby("error").agg(cells=("example", "size"), example=("example", "first"))
            .reset_index().sort_values("cells", ascending=False).reset_index(drop=True))


def confidence(value: pd.Series, lo: pd.Series | None, hi: pd.Series | None, target: pd.Series) -> pd.Series:
    """How sure a forecast meeting (or missing) ``target`` is, from its interval: ``lo-hi ms`` and whether the
    whole interval is on the same side of the target; :data:`NO_INTERVAL` where there is none."""
    out = pd.Series(NO_INTERVAL, index=value.index, dtype=object)
    if lo is None or hi is None:
        return out
    lo_v, hi_v = lo.to_numpy(dtype=float), hi.to_numpy(dtype=float)
    v, t = value.to_numpy(dtype=float), target.to_numpy(dtype=float)
    for i, idx in enumerate(value.index):
        if not (np.isfinite(lo_v[i]) and np.isfinite(hi_v[i]) and np.isfinite(v[i])):
            continue
        if hi_v[i] <= t[i]:
            verdict = "meets even at the high end"
        elif lo_v[i] > t[i]:
            verdict = "misses even at the low end"
        else:
            verdict = "interval spans the target"
        out[idx] = f"{_fmt_ms(lo_v[i])}-{_fmt_ms(hi_v[i])} ms: {verdict}"
    return out


def recommendations(scores: pd.DataFrame, targets_ms: dict[str, float], sl: Slice,
                    previous: pd.DataFrame | None = None, threshold: float = 0.05) -> pd.DataFrame:
    """Per workload (model, mode, dtype) in the headline slice: the cheapest GPU and batch (per 1M tokens) whose
    cell fits and meets the mode's step-time target; what a fleet owner reads first.

    Columns: ``model, mode, dtype, seq_len, gpu, batch, step_ms, target_ms, margin_pct`` (how far under the
    target, negative: over it), ``usd_per_1m_tokens, usd_per_step, meeting`` (GPUs meeting the target at some
    batch), ``confidence`` (the forecast interval against the target, see :data:`INTERVAL_COLUMNS`) and, when
    ``previous`` (the previous run's score table) is given, ``since_previous``: ``new``, ``same`` (same GPU and
    batch, step time within ``threshold``), ``step +x%`` or ``was <gpu> b<batch>``. Where no GPU meets the
    target, ``gpu`` says so and ``step_ms`` / ``margin_pct`` are those of the fastest fitting cell.
    """
    cur = _pick(scores, targets_ms, sl)
    if cur.empty:
        return cur
    if previous is not None:
        prev = _pick(previous, targets_ms, sl)
        keys = list(DECISION_KEYS)
        both = cur[keys].merge(prev[[*keys, "gpu", "batch", "step_ms"]] if len(prev) else
                               pd.DataFrame(columns=[*keys, "gpu", "batch", "step_ms"]),
                               on=keys, how="left", suffixes=("", "_prev"))
        cur["since_previous"] = [since_previous(c, p, ("gpu", "batch"), "step_ms", "step", threshold) for c, p in
                                 zip(cur.to_dict("records"), both.to_dict("records"), strict=True)]
    return cur


def since_previous(cur: dict, prev: dict, pick: tuple[str, ...], value: str, label: str,
                   threshold: float = 0.05) -> str:
    """What changed in one recommendation since the previous run: ``new`` (no pick last time), ``was <pick>``
    (another GPU or setting), ``<label> +x%`` (the same pick, ``value`` moved by more than ``threshold``) or
    ``same``. ``prev`` holds the previous run's columns (NaN where it had no pick)."""
    if not isinstance(prev.get(pick[0]), str):
        return "new"
    if any(_plain(prev[c]) != _plain(cur[c]) for c in pick):
        rest = " ".join(f"{c}={_plain(prev[c])}" for c in pick[1:] if pd.notna(prev[c]))
        return f"was {prev[pick[0]]}" + (f" ({rest})" if rest else "")
    a, b = float(prev[value]), float(cur[value])
    change = (b - a) / a if a > 0 else np.nan
    if not np.isfinite(change) or abs(change) <= threshold:
        return "same"
    return f"{label} {100 * change:+.0f}%"


def _plain(v: object) -> str:
    return str(int(v)) if isinstance(v, (int, float, np.integer, np.floating)) and float(v).is_integer() else str(v)


def _pick(scores: pd.DataFrame, targets_ms: dict[str, float], sl: Slice) -> pd.DataFrame:
    keys = list(DECISION_KEYS)
    sub = fitting(headline(scores, sl))
    sub = sub.loc[sub["mode"].isin(list(targets_ms))]
    if sub.empty:
        return pd.DataFrame()
    sub = sub.assign(target_ms=sub["mode"].map(targets_ms).astype(float))
    meet = sub.loc[sub["e2e_ms"] <= sub["target_ms"]]
    best = meet.loc[meet.groupby(keys)["cost_per_1m_tokens_usd"].idxmin()]
    fastest = sub.loc[sub.groupby(keys)["e2e_ms"].idxmin()]
    fastest = fastest.loc[~fastest.set_index(keys).index.isin(best.set_index(keys).index)]
    counts = meet.groupby(keys)["gpu"].nunique().rename("meeting")
    rows = pd.concat([best.assign(_meets=True), fastest.assign(_meets=False)])
    lo, hi = INTERVAL_COLUMNS
    has_interval = lo in rows and hi in rows
    out = pd.DataFrame({
        "model": rows["model"], "mode": rows["mode"], "dtype": rows["dtype"], "seq_len": rows["seq_len"],
        "gpu": np.where(rows["_meets"], rows["gpu"], "none meets the target; fastest " + rows["gpu"]),
        "batch": rows["batch"], "step_ms": rows["e2e_ms"], "target_ms": rows["target_ms"],
        "margin_pct": 100 * (rows["target_ms"] - rows["e2e_ms"]) / rows["target_ms"],
        "usd_per_1m_tokens": rows["cost_per_1m_tokens_usd"].where(rows["_meets"]),
        "usd_per_step": rows["cost_per_step_usd"].where(rows["_meets"]),
        "price": price_label(rows, rows["_meets"]),
        "confidence": confidence(rows["e2e_ms"], rows[lo] if has_interval else None,
                                 rows[hi] if has_interval else None, rows["target_ms"]),
    })
    out = out.merge(counts.reset_index(), on=keys, how="left")
    out["meeting"] = out["meeting"].fillna(0).astype(int)
    out = out[[*out.columns.drop(["meeting", "confidence"]), "meeting", "confidence"]]
    order = {m: i for i, m in enumerate(targets_ms)}
    return (out.assign(_o=out["mode"].map(order)).sort_values(["model", "_o", "dtype"]).drop(columns="_o")
            .reset_index(drop=True))
