"""Report plots as PNG: step time vs batch per GPU, the cost vs latency Pareto front per model (one panel per
(model, dtype) workload), and the serving Pareto front (one panel per serve workload)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from tilecast.io import write_atomic  # noqa: E402
from tilecast.reports.tables import Slice, fitting, headline  # noqa: E402


def _gpu_styles(gpus: list[str]) -> dict[str, dict]:
    """A distinct colour / marker / line style per GPU (22 and more stay tellable apart)."""
    colours = list(plt.cm.tab10.colors)
    markers, lines = "os^Dv", ["-", "--", ":"]
    return {g: {"color": colours[i % 10], "marker": markers[(i // 10) % 5], "linestyle": lines[(i // 10) % 3]}
            for i, g in enumerate(gpus)}


def _grid(n: int) -> tuple[plt.Figure, np.ndarray]:
    cols = min(4, max(1, n))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def _minor_label(v: float, _pos: int) -> str:
    """Label the 2x and 5x minor ticks of a decade (enough to read a value off a short log axis)."""
    lead = f"{v:.0e}"[0]
    return f"{v:g}" if lead in "25" else ""


def _log_axes(ax: plt.Axes, x_base: float = 10) -> None:
    """Log-log axes with plain-number labels."""
    ax.set_xscale("log", base=x_base)
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(ticker.FuncFormatter(_minor_label))


def _save(fig: plt.Figure, path: Path, tight: bool = True) -> Path:
    """Write the figure as a PNG; ``tight=False`` for a figure whose margins are already set (a panel grid, see
    :func:`_grid_layout`): cropping to the drawn extent costs one more full draw of every panel."""
    kw = {"bbox_inches": "tight"} if tight else {}
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90, **kw))
    plt.close(fig)
    return path


#: a panel grid's margins, in inches: room for tick labels and the axis label (left, bottom), the title (between
#: rows) and a little air. Fixed margins instead of tight_layout: on the nightly's two 37-panel grids tight_layout
#: and bbox_inches="tight" measured every tick label of every panel, 100 of the report's 136 s (cProfile).
_LEFT_IN, _RIGHT_IN, _BOTTOM_IN, _WSPACE_IN, _HSPACE_IN = 0.75, 0.2, 0.5, 0.75, 0.8


def _grid_layout(fig: plt.Figure, top: float) -> None:
    """Place a :func:`_grid`'s panels with fixed margins (inches) below ``top`` (a fraction of the height)."""
    width, height = fig.get_size_inches()
    cols = max(1, round(width / 4.2))
    rows = max(1, round(height / 3.4))
    panel_w = (width - _LEFT_IN - _RIGHT_IN - (cols - 1) * _WSPACE_IN) / cols
    panel_h = (top * height - _BOTTOM_IN - (rows - 1) * _HSPACE_IN) / rows
    fig.subplots_adjust(left=_LEFT_IN / width, right=1 - _RIGHT_IN / width, bottom=_BOTTOM_IN / height, top=top,
                        wspace=_WSPACE_IN / panel_w, hspace=_HSPACE_IN / panel_h)


def _label(ax: plt.Axes, title: str, xlabel: str, ylabel: str) -> None:
    """A panel's title, axis labels, small ticks and a light grid (every plot's panels look alike)."""
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, which="both", alpha=0.3)


def _save_with_gpu_legend(fig: plt.Figure, gpus: list[str], styles: dict[str, dict], title: str, path: Path,
                          **title_kw) -> Path:
    """``title`` over one legend of every GPU's line style (six per row) above the panels, then save."""
    rows = math.ceil(len(gpus) / 6)
    top = 1 - (0.35 + 0.18 * rows) / fig.get_figheight()
    fig.suptitle(title, y=0.995, **title_kw)
    handles = [plt.Line2D([], [], ms=3, lw=1, **styles[g]) for g in gpus]
    fig.legend(handles, gpus, loc="upper center", ncol=min(6, len(gpus)), fontsize=7, frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.3 / fig.get_figheight()))
    _grid_layout(fig, top)
    return _save(fig, path, tight=False)


def _panels(sub: pd.DataFrame) -> list[tuple[str, str]]:
    """(model, dtype) of each panel, sorted."""
    return sorted(set(zip(sub["model"], sub["dtype"], strict=True)))


def _of(sub: pd.DataFrame, model: str, dtype: str) -> pd.DataFrame:
    return sub.loc[(sub["model"] == model) & (sub["dtype"] == dtype)]


def latency_vs_batch(scores: pd.DataFrame, mode: str, sl: Slice, path: Path) -> Path | None:
    """One panel per model and dtype: step time against batch size, a line per GPU (cells that fit), log-log."""
    sub = fitting(headline(scores.loc[scores["mode"] == mode], sl))
    if sub.empty:
        return None
    panels = _panels(sub)
    gpus = sorted(sub["gpu"].unique())
    styles = _gpu_styles(gpus)
    fig, axes = _grid(len(panels))
    for ax, (model, dtype) in zip(axes, panels, strict=False):
        m = _of(sub, model, dtype)
        for gpu, g in m.groupby("gpu"):
            g = g.sort_values("batch")
            ax.plot(g["batch"], g["e2e_ms"], ms=3, lw=1, label=gpu, **styles[gpu])
        _log_axes(ax, 2)
        _label(ax, f"{model} {dtype} (seq {int(m['seq_len'].iloc[0])})", "batch", "step ms")
    return _save_with_gpu_legend(fig, gpus, styles, f"{mode}: step time vs batch per GPU (cells that fit)", path)


def pareto_front(cost: np.ndarray, latency: np.ndarray, rtol: float = 0.0) -> np.ndarray:
    """Indices of the points no other point beats on both cost and latency, by increasing latency.

    ``rtol``: a slower point joins the front only if it is cheaper by more than this fraction.
    """
    order = np.lexsort((cost, latency))
    best = np.inf
    keep = []
    for i in order:
        if cost[i] < best * (1 - rtol):
            keep.append(i)
            best = cost[i]
    return np.array(keep, dtype=int)


def cost_latency_pareto(scores: pd.DataFrame, mode: str, sl: Slice, path: Path) -> Path | None:
    """One panel per model and dtype: cost per 1M tokens against step time for every fitting (GPU, batch), front
    drawn."""
    sub = fitting(headline(scores.loc[scores["mode"] == mode], sl))
    if sub.empty:
        return None
    panels = _panels(sub)
    fig, axes = _grid(len(panels))
    for ax, (model, dtype) in zip(axes, panels, strict=False):
        m = _of(sub, model, dtype).reset_index(drop=True)
        cost = m["cost_per_1m_tokens_usd"].to_numpy(dtype=float)
        lat = m["e2e_ms"].to_numpy(dtype=float)
        ax.scatter(lat, cost, s=8, alpha=0.35, color="tab:gray")
        front = pareto_front(cost, lat, rtol=0.01)
        ax.plot(lat[front], cost[front], color="tab:red", marker="o", ms=3, lw=1)
        for i in front[:5]:
            ax.annotate(f"{m.at[i, 'gpu']} b{int(m.at[i, 'batch'])}", (lat[i], cost[i]), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
        _log_axes(ax)
        _label(ax, f"{model} {dtype} (seq {int(m['seq_len'].iloc[0])})", "step ms", "$ per 1M tokens")
    fig.suptitle(f"{mode}: cost vs latency, Pareto front in red (GPU, batch)", y=1 - 0.12 / fig.get_figheight())
    _grid_layout(fig, 1 - 0.7 / fig.get_figheight())
    return _save(fig, path, tight=False)


def serving_pareto(serve: pd.DataFrame, workloads: list[tuple[str, str, int, int]], tpot_target_ms: float,
                   path: Path) -> Path | None:
    """One panel per serve workload (model, dtype, isl, osl): output tokens/s per GPU against tokens/s per user,
    per GPU the Pareto front of its fitting (tp, concurrency) cells (those no other of its cells beats on
    both), the TPOT target as a vertical line (points right of it meet it). ``serve``: a serve table
    (:data:`tilecast.scoring.schema.SERVE_SCHEMA`)."""
    from tilecast.reports.serve import fitting_cells

    fit = fitting_cells(serve)
    if fit.empty or not workloads:
        return None
    gpus = sorted(fit["gpu"].unique())
    styles = _gpu_styles(gpus)
    fig, axes = _grid(len(workloads))
    for ax, (model, dtype, isl, osl) in zip(axes, workloads, strict=False):
        w = fit.loc[(fit["model"] == model) & (fit["dtype"] == dtype) & (fit["isl"] == isl) & (fit["osl"] == osl)]
        for gpu, g in w.groupby("gpu"):
            user = g["tokens_per_s_per_user"].to_numpy(dtype=float)
            per_gpu = g["tokens_per_s_per_gpu"].to_numpy(dtype=float)
            # maximise both: minimise GPU-seconds per token and the time per output token
            front = pareto_front(1.0 / per_gpu, 1e3 / user)
            ax.plot(user[front], per_gpu[front], ms=3, lw=1, label=gpu, **styles[gpu])
        ax.axvline(1e3 / tpot_target_ms, color="k", lw=0.8, ls="--")
        _log_axes(ax)
        _label(ax, f"{model} {dtype} isl {isl} / osl {osl}", "output tokens/s per user", "output tokens/s per GPU")
    return _save_with_gpu_legend(fig, gpus, styles, "serving: throughput per GPU vs per user, Pareto front per GPU "
                                 f"(tp, concurrency); dashed: TPOT {tpot_target_ms:g} ms", path, fontsize=10)
