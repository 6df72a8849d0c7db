"""Build a run's report: tables (CSV), plots (PNG), ``report.md`` and a self-contained ``report.html``.

Sections: the run (what scored it), latency per model x GPU x batch (a row per dtype), the cheapest GPU
per workload (model and dtype) that meets a latency target, cost per 1M tokens, fleet totals for a
workload mix, the memory model against the measured runs, changes since the previous run (when
given), failed cells, prices.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tilecast.io import write_atomic
from tilecast.reports import plots
from tilecast.reports.diff import RunDiff
from tilecast.reports.fleet import Fleet, fleet_by_gpu, fleet_plan
from tilecast.reports.render import Block, Heading, Image, Table, Text, to_html, to_markdown
from tilecast.reports.tables import Slice, cheapest_gpu, cost_per_1m_tokens, failed_cells, latency_grid

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
TABLES_DIR = "tables"
PLOTS_DIR = "plots"


@dataclass(frozen=True)
class ReportSettings:
    """What the report shows (``conf/report.yaml``)."""

    targets_ms: Mapping[str, float] = field(default_factory=lambda: {"inference": 1000.0, "training": 10000.0})
    slice: Slice = field(default_factory=Slice)
    max_rows: int = 60
    diff_threshold: float = 0.05


def _write_csv(df: pd.DataFrame, directory: Path, name: str) -> str:
    rel = f"{TABLES_DIR}/{name}.csv"
    write_atomic(directory / rel, lambda tmp: df.to_csv(tmp, index=False))
    return rel


def _run_section(meta: Mapping[str, Any], scores: pd.DataFrame) -> list[Block]:
    stats = meta.get("stats", {})
    n_fail = int(scores["error"].notna().sum())
    fits = scores["fits"]
    dtypes = ", ".join(pd.unique(scores["dtype"].astype(str))) if "dtype" in scores else "fp32"
    lines = [f"Matrix **{meta.get('matrix', '?')}**: {len(scores):,} cells ({scores['model'].nunique()} models x "
             f"{scores['gpu'].nunique()} GPUs; dtypes {dtypes}), {n_fail:,} failed, "
             f"{int(fits.fillna(False).sum()):,} fit in memory, "
             f"{int((fits == False).sum()):,} do not, {int(fits.isna().sum()):,} unknown.",  # noqa: E712
             f"Predictors: `{meta.get('predictor', '?')}` ({meta.get('predictor_detail', '')}); versions "
             f"`{json.dumps(meta.get('versions', {}), sort_keys=True)}`; pricing `{meta.get('pricing', '?')}`."]
    if stats:
        lines.append(f"Scored in {stats.get('total_s', float('nan')):.1f} s: graphs {stats.get('graphs', 0)} built in "
                     f"{stats.get('graphs_s', float('nan')):.1f} s, {stats.get('distinct_ops', 0):,} distinct ops "
                     f"(of {stats.get('op_rows', 0):,} op rows) forecast on every GPU in "
                     f"{stats.get('predict_s', float('nan')):.1f} s.")
    for note in stats.get("notes", []):
        lines.append(f"Note: {note}")
    return [Heading("Run"), Text("\n\n".join(lines))]


def _diff_section(diff: RunDiff, directory: Path, max_rows: int) -> list[Block]:
    blocks: list[Block] = [Heading(f"Changes since {diff.previous or 'the previous run'}")]
    if diff.previous is None:
        return blocks + [Text("No previous run to compare with.")]
    s = diff.summary()
    blocks.append(Text(f"{s['compared']:,} cells forecast in both runs: {s['moved']:,} moved by more than "
                       f"{s['threshold_pct']:.0f}%; {s['new']:,} new cells, {s['removed']:,} removed, "
                       f"{s['failed']:,} failing now ({s['newly_failed']:,} of them forecast last time)."))
    for name, df, cap in (("moved", diff.moved, f"Forecasts that moved by more than {s['threshold_pct']:.0f}%"),
                          ("new_cells", diff.new, "New cells"), ("removed_cells", diff.removed, "Removed cells")):
        if len(df):
            blocks.append(Table(df, cap, max_rows, _write_csv(df, directory, f"diff_{name}")))
    return blocks


def build_report(directory: Path, scores: pd.DataFrame, meta: Mapping[str, Any], settings: ReportSettings,
                 fleet: Fleet | None = None, diff: RunDiff | None = None, fit_check: list[Block] | None = None,
                 pricing: pd.DataFrame | None = None, title: str | None = None) -> tuple[Path, Path]:
    """Write tables, plots, ``report.md`` and ``report.html`` into ``directory``; return the two report paths."""
    sl, n = settings.slice, settings.max_rows
    title = title or f"tilecast forecast report {meta.get('date', '')}".strip()
    blocks: list[Block] = _run_section(meta, scores)
    modes = [m for m in ("inference", "training") if (scores["mode"] == m).any()]
    scope = (f"Headline tables: no parallelism (`{sl.parallel}`), fused={str(sl.fused).lower()}, sequence "
             f"length {sl.seq_len} (or the model's longest scored one); one row per model, dtype and batch. "
             f"`OOM`: the cell does not fit in memory; `error`: it could not be forecast (a dtype the GPU has "
             f"no peak for, say: see Failed cells). Every cell is in `scores.parquet`.")
    blocks += [Heading("Latency per model x GPU x batch (step ms)"), Text(scope)]
    for mode in modes:
        grid = latency_grid(scores, mode, sl)
        blocks.append(Table(grid, f"{mode}: step time, ms", n, _write_csv(grid, directory, f"latency_{mode}")))
    blocks.append(Heading("Cheapest GPU per workload meeting the latency target"))
    targets = ", ".join(f"{m} <= {settings.targets_ms[m]:,.0f} ms" for m in modes if m in settings.targets_ms)
    blocks.append(Text(f"Targets per step: {targets}. Per workload and dtype, among the GPUs where the cell fits "
                       f"and meets the target, the one with the lowest cost per 1M tokens; `meeting`: how many GPUs "
                       f"meet it."))
    cheap = cheapest_gpu(scores, dict(settings.targets_ms), sl)
    blocks.append(Table(cheap, "cheapest GPU per workload", n, _write_csv(cheap, directory, "cheapest_gpu")))
    blocks.append(Heading("Cost per 1M tokens (USD, best batch that fits)"))
    for mode in modes:
        cost = cost_per_1m_tokens(scores, mode, sl)
        blocks.append(Table(cost, f"{mode}: $ per 1M tokens", n, _write_csv(cost, directory, f"cost_{mode}")))
    if fleet is not None:
        blocks.append(Heading(f"Fleet totals: workload mix `{fleet.name}`"))
        plan = fleet_plan(scores, fleet)
        blocks.append(Table(plan, "per workload, the cheapest GPU meeting its target, sized for its demand", n,
                            _write_csv(plan, directory, "fleet_plan")))
        by_gpu = fleet_by_gpu(scores, fleet)
        blocks.append(Table(by_gpu, "the whole mix on a single GPU type (blank: some workload cannot run there)",
                            n, _write_csv(by_gpu, directory, "fleet_by_gpu")))
    blocks.append(Heading("Plots"))
    for mode in modes:
        for name, fn, alt in (("latency_vs_batch", plots.latency_vs_batch, "step time vs batch per GPU"),
                              ("cost_vs_latency", plots.cost_latency_pareto, "cost vs latency Pareto per model")):
            rel = f"{PLOTS_DIR}/{name}_{mode}.png"
            path = fn(scores, mode, sl, directory / rel)
            if path is not None:
                blocks.append(Image(path, f"{mode}: {alt}", rel))
    if fit_check:
        blocks += fit_check
    if diff is not None:
        blocks += _diff_section(diff, directory, n)
    failed = failed_cells(scores)
    blocks += [Heading("Failed cells"), Table(failed, "cells that could not be forecast, by error", n,
                                              _write_csv(failed, directory, "failed_cells") if len(failed) else None)]
    if pricing is not None:
        blocks += [Heading("Prices"), Text("On-demand list prices per GPU-hour; `estimate`: no public list price "
                                           "for exactly this part (see source)."),
                   Table(pricing, "prices used", 100)]
    md, html = directory / REPORT_MD, directory / REPORT_HTML
    write_atomic(md, lambda tmp: tmp.write_text(to_markdown(title, blocks)))
    write_atomic(html, lambda tmp: tmp.write_text(to_html(title, blocks)))
    return md, html


def fit_blocks(agreement: Any, directory: Path, max_rows: int = 60) -> list[Block]:
    """The memory model against the measured runs (a :class:`tilecast.scoring.fitcheck.FitAgreement`)."""
    s = agreement.summary()
    text = (f"Over the {s['cells']} cells the paper attempted on GPUs with shipped labels, `fits` agrees with "
            f"label presence (a missing label = the run did not fit) for {s['agree']} "
            f"({s['agreement_pct']:.1f}% of those with a memory estimate): **{s['false_fits']} false \"fits\"** "
            f"(predicted to fit, ran out of memory), {s['false_oom']} false \"does not fit\", "
            f"{s['unknown']} without a memory estimate.")
    cols = ["gpu", "model", "mode", "batch", "seq_len", "labelled", "fits", "mem_required_gib", "capacity_gib"]
    wrong = agreement.cells.loc[agreement.cells["agree"] != True, cols]  # noqa: E712 - NA counts as wrong
    rel = _write_csv(agreement.cells, directory, "fit_check")
    return [Heading("Memory model vs measured runs"), Text(text),
            Table(wrong, "cells where fits and the labels disagree (or memory is unknown)", max_rows, rel)]
