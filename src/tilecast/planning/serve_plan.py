"""The serving plan: replica forecasts -> fleets sized for the traffic -> the cheapest one meeting the service
level at the high end of its interval, the Pareto front, and why the others lost.

Every step is vectorised over the candidates (a candidate: GPU, dtype, layout, concurrency per replica).
The forecasts are rows of the serve table (:data:`tilecast.scoring.schema.SERVE_SCHEMA`: TTFT / TPOT with
their intervals, fit, throughput, price), however they were made: the planner's own search
(:func:`tilecast.planning.search.plan_serving`) or a nightly run's ``serve_scores.parquet``.

Sizing (docs/method.md §20): a replica holding ``c`` requests in flight finishes ``c / L`` requests per second,
``L`` the request latency (TTFT + (osl - 1) TPOT; Little's law). The fleet needs ``replicas = ceil(rate x L_hi /
c)`` replicas, ``L_hi`` at the high end of the TTFT and TPOT intervals, so that it carries the rate even when
the forecast is as slow as its interval allows; then ``n_gpus = replicas x GPUs per replica`` and the monthly
cost ``n_gpus x $/GPU-hour x 730``. A candidate is **feasible** when it was forecast, fits in memory, needs
no more than ``max_gpus`` GPUs and meets both targets at the high end of its intervals (``ttft_hi_ms``,
``tpot_hi_ms``); one that meets them at the point forecast only says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.planning.layouts import LAYOUT_COLUMNS
from tilecast.planning.pareto import pareto_mask
from tilecast.planning.questions import HOURS_PER_MONTH, ServeQuestion
from tilecast.planning.result import PLAN_COLUMNS, STATUSES, Plan, fitting, keep, rank_order
from tilecast.scoring.engine import not_supported

S_PER_HOUR = 3600.0
#: the forecast columns the sizing reads from a serve table row
FORECAST_COLUMNS = ("ttft_ms", "tpot_ms", "ttft_lo_ms", "ttft_hi_ms", "tpot_lo_ms", "tpot_hi_ms",
                    "request_latency_ms", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "fits",
                    "mem_required_gib", "gpu_mem_gib", "max_concurrency", "usd_per_gpu_hour", "price_estimate",
                    "interval_note", "error")


def candidates(layouts: pd.DataFrame, forecasts: pd.DataFrame, question: ServeQuestion) -> pd.DataFrame:
    """Every answered candidate (a layout row at a forecast concurrency) with its forecast, fleet size, cost and
    status; the layouts the serving path does not answer once each, with their reason. ``forecasts``: serve
    table rows of ``question``'s model, isl and osl (other rows are ignored; a layout with no row there is not a
    candidate: a nightly table that did not score it). A row without an engine is the default engine's
    (:data:`tilecast.forecast.serve.DEFAULT_ENGINE`)."""
    from tilecast.forecast.serve import DEFAULT_ENGINE

    f = forecasts.loc[(forecasts["model"] == question.model.key) & (forecasts["isl"] == question.isl)
                      & (forecasts["osl"] == question.osl)]
    # rows without an engine (a table from before engines, a cell that failed before one was named): the default's
    f = f.assign(engine=f["engine"].fillna(DEFAULT_ENGINE) if "engine" in f else DEFAULT_ENGINE)
    keep = ["engine", "gpu", "dtype", "tp", "concurrency", *[c for c in FORECAST_COLUMNS if c in f]]
    answered = layouts.loc[layouts["layout_error"].isna()]
    rows = answered.merge(f[keep], on=["gpu", "dtype", "tp"], how="inner")
    refused = layouts.loc[layouts["layout_error"].notna()]
    engines = list(pd.unique(f["engine"])) or [DEFAULT_ENGINE]
    refused = refused.merge(pd.DataFrame({"engine": engines}), how="cross")
    return statuses(pd.concat([rows, refused], ignore_index=True), question)


def statuses(rows: pd.DataFrame, question: ServeQuestion) -> pd.DataFrame:
    """Candidate rows (``layout_error`` set on the layouts not forecast, the forecast columns on the others) sized
    into fleets with their status: the answered ones by :func:`size_fleets`, the refused ones ``not modelled``
    with their reason."""
    refused = rows["layout_error"].notna().to_numpy()
    rows = size_fleets(rows, question, copy=False)
    if refused.any():
        rows.loc[refused, "status"] = "not modelled"
        rows.loc[refused, "error"] = rows.loc[refused, "layout_error"]
    rows["status_rank"] = rows["status"].map({s: i for i, s in enumerate(STATUSES)}).astype(int)
    rows["feasible"] = rows["status"] == STATUSES[0]
    return rows.drop(columns=["layout_error"])


def size_fleets(rows: pd.DataFrame, question: ServeQuestion, copy: bool = True) -> pd.DataFrame:
    """Replicas, GPUs, monthly cost, margins and status of each forecast candidate (vectorised; module
    docstring); ``copy=False`` adds the columns to ``rows`` itself (a million candidates: one table, not two)."""
    out = rows.reset_index(drop=True)
    if copy:
        out = out.copy()
    osl = float(question.osl)
    ttft, tpot = out["ttft_ms"].to_numpy(dtype=float), out["tpot_ms"].to_numpy(dtype=float)
    ttft_hi = _hi(out, "ttft_hi_ms", ttft)
    tpot_hi = _hi(out, "tpot_hi_ms", tpot)
    out["ttft_hi_ms"], out["tpot_hi_ms"] = ttft_hi, tpot_hi
    latency_hi_s = (ttft_hi + (osl - 1.0) * tpot_hi) / 1e3
    c = out["concurrency"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        replicas = np.ceil(question.rate_rps * latency_hi_s / c)
    answered = np.isfinite(replicas) & (replicas > 0)
    gpr = out["gpus_per_replica"].to_numpy(dtype=float)
    price = out["usd_per_gpu_hour"].to_numpy(dtype=float)
    n_gpus = replicas * gpr
    out["replicas"] = pd.array(np.where(answered, replicas, np.nan), dtype="Float64").astype("Int64")
    out["n_gpus"] = pd.array(np.where(answered, n_gpus, np.nan), dtype="Float64").astype("Int64")
    out["request_latency_hi_ms"] = latency_hi_s * 1e3
    usd_hour = np.where(answered, n_gpus * price, np.nan)
    out["usd_per_month"] = usd_hour * HOURS_PER_MONTH
    out["usd_per_1m_tokens"] = usd_hour / (question.tokens_per_s * S_PER_HOUR) * 1e6
    out["fleet_utilisation_pct"] = 100 * question.rate_rps * latency_hi_s / np.where(answered, replicas * c, np.nan)

    ttft_t, tpot_t = question.ttft_ms, question.tpot_ms
    margin_hi = 100 * np.minimum(1 - ttft_hi / ttft_t, 1 - tpot_hi / tpot_t)
    out["margin_pct"] = margin_hi
    out["miss_pct"] = np.maximum(0.0, -margin_hi)
    meets_point = (ttft <= ttft_t) & (tpot <= tpot_t)
    meets_hi = (ttft_hi <= ttft_t) & (tpot_hi <= tpot_t)
    out["meets_at_point"], out["meets_at_high_end"] = meets_point, meets_hi

    error = out["error"].astype(object) if "error" in out else pd.Series(None, index=out.index, dtype=object)
    fits = out["fits"].astype("boolean")
    # a candidate that does not fit need not have been forecast further (the engine search stops there)
    has_error = error.notna().to_numpy() | (~answered & (fits != False).fillna(True).to_numpy(dtype=bool))  # noqa: E712
    too_many = np.zeros(len(out), dtype=bool) if question.max_gpus is None else n_gpus > question.max_gpus
    status = np.select(
        [has_error & not_supported(error), has_error,
         (fits == False).fillna(False).to_numpy(dtype=bool), fits.isna().to_numpy(), too_many,  # noqa: E712
         ~meets_point, ~meets_hi],
        ["not supported", "failed", "does not fit", "memory unknown", "too many GPUs", "misses the target",
         "meets only at the point forecast"], default="meets")
    out["status"] = status
    out.loc[has_error & error.isna().to_numpy(), "error"] = "forecast is not a positive finite latency"
    return out


def _hi(frame: pd.DataFrame, column: str, point: np.ndarray) -> np.ndarray:
    """The high end of an interval column, the point forecast where there is none."""
    if column not in frame:
        return point.copy()
    hi = frame[column].to_numpy(dtype=float)
    return np.where(np.isfinite(hi), hi, point)


def decide(rows: pd.DataFrame, question: ServeQuestion, top: int = 20) -> tuple[bool, pd.DataFrame, pd.DataFrame]:
    """(feasible, the kept candidates with ``chosen`` and ``why``, the Pareto front).

    The plan: the feasible candidate with the lowest monthly cost (then fewer GPUs, then the larger margin).
    Kept: per (engine, GPU, dtype, layout) its best candidate (the cheapest feasible one, else the closest to meeting
    the question), and the Pareto front's candidates. The front: answered candidates that fit, no other beating
    them on both output tokens/s per GPU and per user.

    Only the rows that can be kept are copied (a million candidates stay one table): in rank order, each group's
    first row, the front and the first row overall; the front of that subset is the front of all (every point off
    the front is beaten by one on it), so the decision is the one over every row."""
    group = ["engine", "gpu", "dtype", "layout"]
    gpus = rows["n_gpus"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    margin = rows["margin_pct"].to_numpy(dtype=float)
    order = rank_order(rows, rows["usd_per_month"].to_numpy(dtype=float), gpus, -margin)
    fit = fitting(rows)[order]
    with np.errstate(divide="ignore", invalid="ignore"):
        front = pareto_mask(
            np.where(fit, 1.0 / rows["tokens_per_s_per_gpu"].to_numpy(dtype=float)[order], np.nan),
            np.where(fit, 1.0 / rows["tokens_per_s_per_user"].to_numpy(dtype=float)[order], np.nan))
    first = ~rows[group].iloc[order].duplicated(keep="first").to_numpy()
    take = first | front
    take[:1] = True
    return keep(rows.iloc[order[take]], front[take], group, lambda kept, plan: why(kept, question, plan),
                "tokens_per_s_per_user")


def _ms(v: float) -> str:
    return f"{v / 1e3:.2f} s" if v >= 1000 else (f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms")


def why(kept: pd.DataFrame, question: ServeQuestion, plan: pd.Series | None) -> list[str]:
    """A short reason per kept candidate: why it is the plan, or why it lost to it."""
    from tilecast.reports.money import usd

    out = []
    for r in kept.to_dict("records"):
        s = r["status"]
        if r.get("chosen"):
            text = "the plan: the cheapest fleet meeting TTFT and TPOT at the high end of their intervals"
        elif s == "meets":
            extra = r["usd_per_month"] - plan["usd_per_month"]
            pct = 100 * extra / plan["usd_per_month"] if plan["usd_per_month"] > 0 else np.nan
            text = (f"meets it, but {usd(extra)} / month more than the plan (+{pct:.0f}%)" if extra > 0.005
                    else "meets it at the same cost, with more GPUs or a smaller margin")
        elif s == "meets only at the point forecast":
            text = "meets it at the point forecast only: " + _misses(r, question)
        elif s == "misses the target":
            text = _misses(r, question)
        elif s == "too many GPUs":
            text = f"needs {r['n_gpus']} GPUs, more than max_gpus={question.max_gpus}"
        elif s == "does not fit":
            text = (f"does not fit: {r['mem_required_gib']:.1f} GiB per GPU of {r['gpu_mem_gib']:.0f} "
                    f"(largest concurrency that fits: {r['max_concurrency']})")
        elif s == "memory unknown":
            text = "memory need unknown: fit not checked"
        else:
            text = f"{s}: {r['error']}" if s != "not modelled" else str(r["error"])
        out.append(text)
    return out


def _misses(r: dict, q: ServeQuestion) -> str:
    parts = []
    for name, target in (("TTFT", q.ttft_ms), ("TPOT", q.tpot_ms)):
        key = name.lower()
        hi, point = r[f"{key}_hi_ms"], r[f"{key}_ms"]
        if hi > target:
            parts.append(f"{name} {_ms(hi)} at the high end > {_ms(target)} ({_ms(point)} point, "
                         f"+{100 * (hi / target - 1):.0f}%)")
    return "; ".join(parts) or "meets both targets"


def serve_plan(question: ServeQuestion, layouts: pd.DataFrame, forecasts: pd.DataFrame, top: int = 20,
               search: dict | None = None) -> Plan:
    """The plan of ``question`` from its layouts (:func:`tilecast.planning.layouts.serve_layouts`) and the
    serve-table rows forecasting them."""
    return plan_of(question, candidates(layouts, forecasts, question), top, search)


def plan_of(question: ServeQuestion, rows: pd.DataFrame, top: int = 20, search: dict | None = None,
            finish=None) -> Plan:
    """The plan of ``question`` from its candidates with their status (:func:`candidates`, :func:`statuses`);
    ``finish`` (optional) completes the kept rows and the front (the engine search's layout columns)."""
    feasible, kept, pareto = decide(rows, question, top)
    if finish is not None:
        kept, pareto = finish(kept), finish(pareto)
    counts = rows["status"].value_counts()
    info = dict(search or {})
    info.update({"candidates": int(info.get("candidates", len(rows))), "answered": int(counts.drop(
        ["not modelled", "not supported", "failed"], errors="ignore").sum()),
        "by_status": {s: int(counts.get(s, 0)) for s in STATUSES if counts.get(s, 0)}})
    return Plan(question, feasible, _ordered(kept), pareto, info)


def _ordered(kept: pd.DataFrame) -> pd.DataFrame:
    """:data:`PLAN_COLUMNS` first, then the layout and the rest."""
    first = [c for c in PLAN_COLUMNS if c in kept]
    rest = [c for c in ("status", "chosen", "pareto", "meets_at_point", "meets_at_high_end", "margin_pct",
                        "miss_pct", *LAYOUT_COLUMNS, "gpus_per_replica", "ttft_lo_ms", "tpot_lo_ms",
                        "request_latency_ms", "request_latency_hi_ms", "tokens_per_s_per_user", "usd_per_1m_tokens",
                        "usd_per_gpu_hour", "price_estimate", "fleet_utilisation_pct", "fits", "mem_required_gib",
                        "gpu_mem_gib", "max_concurrency", "interval_note", "error", "status_rank") if c in kept]
    return kept[first + rest + [c for c in kept.columns if c not in first + rest]]


__all__ = ["FORECAST_COLUMNS", "candidates", "decide", "plan_of", "serve_plan", "size_fleets", "statuses",
           "why"]
