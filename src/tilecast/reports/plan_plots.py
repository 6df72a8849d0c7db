"""Plans as small multiples: one panel per plan, at most :data:`MAX_SERIES` series a panel.

Serving panel: output tokens/s per GPU against tokens/s per user of the kept candidates, the GPUs of the
cheapest kept candidates in colour (:data:`MAX_SERIES` - 1 of them) and the rest grey, the Pareto front as a
line, the TPOT target as a dashed vertical line (right of it meets it), the chosen plan as a star. Training
panel: USD to train against days, the deadline as a dashed line, the front and the plan the same way."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from tilecast.io import write_atomic  # noqa: E402

#: series a panel holds at most (the rest of the GPUs share one grey series)
MAX_SERIES = 8
_COLOURS = list(plt.cm.tab10.colors)[:MAX_SERIES - 1]
OTHER = "other GPUs"


def series_of(kept: pd.DataFrame, order_by: str) -> list[str]:
    """The GPUs shown in colour: those of the best kept candidates (``order_by`` ascending), at most
    :data:`MAX_SERIES` - 1."""
    ok = kept.loc[np.isfinite(kept[order_by].to_numpy(dtype=float))]
    return list(dict.fromkeys(ok.sort_values(order_by)["gpu"]))[:MAX_SERIES - 1]


def _panel(ax: plt.Axes, plan, x: str, y: str, order_by: str, xlabel: str, ylabel: str, line: float | None,
           title: str) -> None:
    kept = plan.candidates
    pts = kept.loc[np.isfinite(kept[x].to_numpy(dtype=float)) & np.isfinite(kept[y].to_numpy(dtype=float))]
    shown = series_of(pts, order_by)
    rest = pts.loc[~pts["gpu"].isin(shown)]
    if len(rest):
        ax.scatter(rest[x], rest[y], s=6, color="0.75", label=OTHER, zorder=1)
    for colour, gpu in zip(_COLOURS, shown, strict=False):
        g = pts.loc[pts["gpu"] == gpu]
        ax.scatter(g[x], g[y], s=10, color=colour, label=gpu, zorder=2)
    front = plan.pareto
    if len(front):
        f = front.sort_values(x)
        ax.plot(f[x], f[y], color="k", lw=0.8, zorder=3)
    if line is not None:
        ax.axvline(line, color="k", lw=0.8, ls="--")
    chosen = plan.chosen
    if chosen is not None:
        ax.scatter([chosen[x]], [chosen[y]], marker="*", s=140, color="crimson", edgecolor="k", lw=0.5, zorder=4,
                   label="the plan")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.minorticks_off()  # major ticks only: readable, and drawing minor log ticks is most of a panel's time
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(xlabel, fontsize=7)
    ax.set_ylabel(ylabel, fontsize=7)
    ax.tick_params(labelsize=6)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=5.5, frameon=False, loc="best", markerscale=0.8)


def draw_plan(ax: plt.Axes, plan) -> None:
    """One plan's panel (serving or training)."""
    q = plan.question
    title = f"{q.name}: {q.describe()}" if q.name else q.describe()
    if plan.kind == "serve":
        _panel(ax, plan, "tokens_per_s_per_user", "tokens_per_s_per_gpu", "usd_per_month",
               "output tokens/s per user", "output tokens/s per GPU", 1e3 / q.tpot_ms, _wrap(title))
    else:
        _panel(ax, plan, "days_to_train", "usd_to_train", "usd_to_train", "days to train", "USD to train",
               q.days, _wrap(title))


def _wrap(text: str, width: int = 60) -> str:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return "\n".join([*lines, cur])


def plan_figure(plans: list, path: Path, columns: int = 3, dpi: int = 80) -> Path | None:
    """One panel per plan (small multiples), written as PNG; None without plans."""
    plans = [p for p in plans if p is not None and len(p.candidates)]
    if not plans:
        return None
    cols = min(columns, len(plans))
    rows = math.ceil(len(plans) / cols)
    width, height = 4.3 * cols, 3.4 * rows
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    for ax in axes.ravel()[len(plans):]:
        ax.set_visible(False)
    for ax, plan in zip(axes.ravel(), plans, strict=False):
        draw_plan(ax, plan)
    # fixed margins (in inches: the same look for one panel or twelve), not tight_layout: seconds per figure
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.15 / width, bottom=0.55 / height, top=1 - 0.55 / height,
                        wspace=0.35, hspace=0.75 * rows / max(1, rows) if rows > 1 else 0.2)
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi))
    plt.close(fig)
    return path


__all__ = ["MAX_SERIES", "draw_plan", "plan_figure", "series_of"]
