"""A plan in words: the one line a job prints and the report's first screen shows per question."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tilecast.reports.money import usd


def _ms(v: float) -> str:
    return f"{v / 1e3:.2f} s" if v >= 1000 else (f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms")


def _span(lo: float, hi: float) -> str:
    """``27-55 ms``, ``0.8-1.3 s``: one unit for both ends."""
    if hi >= 1000:
        return f"{lo / 1e3:.2g}-{hi / 1e3:.2g} s"
    digits = 0 if lo >= 10 else 1
    return f"{lo:.{digits}f}-{hi:.{digits}f} ms"


def _int(v: Any) -> int:
    return int(v) if v is not None and not pd.isna(v) else 0


def fleet_text(r: dict[str, Any]) -> str:
    """``12 x h100_sxm_80gb fp8, tp2 on vllm: 6 replicas x 64 in flight`` (serving) or ``256 x b300, zero3 ckpt none,
    micro-batch 1`` (training)."""
    if "replicas" in r:
        engine = f" on {r['engine']}" if r.get("engine") else ""
        return (f"{_int(r['n_gpus'])} x {r['gpu']} {r['dtype']}, {r['layout']}{engine}: {_int(r['replicas'])} "
                f"replica{'s' if _int(r['replicas']) != 1 else ''} x {_int(r['concurrency'])} in flight")
    return f"{_int(r['n_gpus'])} x {r['gpu']}, {r['layout']}, micro-batch {_int(r['micro_batch'])}"


def cost_text(r: dict[str, Any]) -> str:
    """``$23k / month ($0.66 per 1M output tokens)`` or ``$960k to train ($480 per 1B tokens)``."""
    if "usd_per_month" in r:
        return f"{usd(r['usd_per_month'], '/ month')} ({usd(r.get('usd_per_1m_tokens'))} per 1M output tokens)"
    per_b = r.get("usd_per_1b_tokens")
    return usd(r["usd_to_train"], "to train") + (f" ({usd(per_b)} per 1B tokens)" if per_b is not None else "")


def interval_text(r: dict[str, Any]) -> str:
    """The forecast with its interval: ``TTFT 310-520 ms, TPOT 28-36 ms`` or ``22.3 days (17.1-29.2)``."""
    if "tpot_ms" in r:
        parts = []
        for name in ("ttft", "tpot"):
            lo, hi = r.get(f"{name}_lo_ms"), r.get(f"{name}_hi_ms")
            point = r[f"{name}_ms"]
            span = _span(lo, hi) if lo is not None and hi is not None else _ms(point)
            parts.append(f"{name.upper()} {span}")
        return ", ".join(parts)
    return f"{r['days_to_train']:.1f} days (high end {r['days_to_train_hi']:.1f})"


def plan_row(plan) -> dict[str, Any]:
    """One row for the report's first screen: ``question, plan, cost, margin_pct, interval, feasible``."""
    q = plan.question
    if plan.feasible:
        r = plan.chosen
        return {"question": q.describe(), "plan": fleet_text(r), "cost": cost_text(r),
                "margin_pct": r.get("margin_pct"), "interval": interval_text(r), "feasible": True}
    close = plan.closest(1)
    if close.empty:
        return {"question": q.describe(), "plan": "no configuration fits and is forecast", "cost": "",
                "margin_pct": None, "interval": "", "feasible": False}
    r = close.iloc[0].to_dict()
    return {"question": q.describe(), "plan": f"none meets it; closest {fleet_text(r)} ({r['why']})",
            "cost": cost_text(r), "margin_pct": r.get("margin_pct"), "interval": interval_text(r), "feasible": False}


def plan_summary(plan) -> str:
    """The decision in one line."""
    row = plan_row(plan)
    if not row["feasible"]:
        return f"{row['question']}: {row['plan']}"
    return (f"{row['question']}: {row['plan']}; {row['cost']}; {row['interval']} (margin "
            f"{row['margin_pct']:.0f}% at the high end)")





def _table(frame: pd.DataFrame, columns: list[str]) -> str:
    """A small fixed-width table, money as money."""
    from tilecast.reports.money import is_money_column
    from tilecast.reports.render import fmt

    cols = [c for c in columns if c in frame]
    cells = [[usd(v) if is_money_column(c) else fmt(v) for c, v in zip(cols, row, strict=True)]
             for row in frame[cols].itertuples(index=False, name=None)]
    width = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, width, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, width, strict=True)) for r in cells]
    return "\n".join("    " + line.rstrip() for line in lines)


def describe_plan(plan, rows: int = 10) -> str:
    """The plan for a terminal: question, decision (or the closest misses), runners-up and why they lost, what
    the search did."""
    q, s = plan.question, plan.search
    serve = plan.kind == "serve"
    lines = [f"Plan: {q.describe()}"]
    if plan.feasible:
        r = plan.chosen
        lines += [f"  {fleet_text(r)}", f"  cost {cost_text(r)}",
                  f"  forecast {interval_text(r)}; margin {r['margin_pct']:.0f}% at the high end of the interval"]
    else:
        lines.append("  feasible=false: no configuration meets it at the high end of its forecast interval; the "
                     "closest (miss_pct: how far over the target at the high end):")
        cols = (["gpu", "n_gpus", "dtype", "layout", "concurrency", "ttft_hi_ms", "tpot_hi_ms", "miss_pct", "why"]
                if serve else ["gpu", "n_gpus", "layout", "days_to_train_hi", "usd_to_train_hi", "miss_pct", "why"])
        lines.append(_table(plan.closest(rows), cols))
    counts = ", ".join(f"{n:,} {k}" for k, n in (s.get("by_status") or {}).items())
    lines.append(f"  searched {s.get('candidates', 0):,} candidates in {s.get('seconds', float('nan')):.1f} s "
                 f"({counts})")
    if not serve and s.get("assembled") is not None:
        lines.append(f"  {s['fitting']:,} fit: {s['assembled']:,} assembled, {s['ruled_out']:,} ruled out by their "
                     f"bounds")
    others = plan.candidates.loc[~plan.candidates["chosen"]].head(rows)
    if plan.feasible and len(others):
        lines.append("  runners-up, and why they lost:")
        cols = (["gpu", "n_gpus", "dtype", "layout", "concurrency", "replicas", "usd_per_month", "why"] if serve
                else ["gpu", "n_gpus", "layout", "days_to_train", "usd_to_train", "why"])
        lines.append(_table(others, cols))
    lines.append(f"  Pareto front: {len(plan.pareto)} configurations ("
                 + ("output tokens/s per GPU vs per user" if serve else "USD vs days to train") + ")")
    lines.append(f"  predictor {plan.predictor}" + (f" {plan.versions}" if plan.versions else ""))
    lines += [f"  note: {n}" for n in plan.notes]
    return "\n".join(lines)

__all__ = ["cost_text", "describe_plan", "fleet_text", "interval_text", "plan_row", "plan_summary"]
