"""Build a run's report: tables (CSV), plots (PNG), ``report.md`` and a self-contained ``report.html``.

Decision first. The page opens with one line on the run and what changed since the previous one, then the
**recommendations**: per workload (model, mode, dtype) the cheapest GPU and batch that fits and meets the
latency target, its cost, its margin, how sure the forecast is (its interval, when the score table has one)
and what changed since the previous run; per serve workload (when the run scored serve cells) the cheapest
GPU, tp and concurrency meeting the TPOT and TTFT targets; the fleet plan of the configured workload mix.
Then the plots. Then the full tables, each in a collapsed ``<details>`` in HTML (a plain section in Markdown,
same order): the run, latency per model x GPU x batch, cheapest GPU per batch, cost per 1M tokens, the mix
per GPU type, the serve tables, the memory model against the measured runs, the changes cell by cell,
failed cells, prices.
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
from tilecast.reports.render import Block, Details, Heading, Image, Nav, Table, Text, to_html, to_markdown
from tilecast.reports.serve import (
    TPOT_INTERVAL_COLUMNS,
    ServeTargets,
    serve_capacity,
    serve_cost,
    serve_failed,
    serve_recommendations,
    serve_workloads,
)
from tilecast.reports.tables import (
    INTERVAL_COLUMNS,
    Slice,
    cheapest_gpu,
    cost_per_1m_tokens,
    failed_cells,
    latency_grid,
    recommendations,
)

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
TABLES_DIR = "tables"
PLOTS_DIR = "plots"
#: HTML ids of the decision tables (anchors; what the browser test looks for)
RECOMMENDATIONS_ID = "recommendations"
SERVE_RECOMMENDATIONS_ID = "serve-recommendations"


@dataclass(frozen=True)
class ReportSettings:
    """What the report shows (``conf/report.yaml``)."""

    targets_ms: Mapping[str, float] = field(default_factory=lambda: {"inference": 1000.0, "training": 10000.0})
    slice: Slice = field(default_factory=Slice)
    max_rows: int = 120  # conf/report.yaml and conf/nightly.yaml's report node hold the same (a test checks)
    diff_threshold: float = 0.05
    serve: ServeTargets = field(default_factory=ServeTargets)


def _write_csv(df: pd.DataFrame, directory: Path, name: str) -> str:
    rel = f"{TABLES_DIR}/{name}.csv"
    write_atomic(directory / rel, lambda tmp: df.to_csv(tmp, index=False))
    return rel


def _run_section(meta: Mapping[str, Any], scores: pd.DataFrame) -> Details:
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
    return Details("Run", (Text("\n\n".join(lines)),), "run")


def _diff_section(diff: RunDiff, directory: Path, max_rows: int) -> Details:
    blocks: list[Block] = []
    if diff.previous is None:
        blocks.append(Text("No previous run to compare with."))
    else:
        s = diff.summary()
        blocks.append(Text(f"{s['compared']:,} cells forecast in both runs: {s['moved']:,} moved by more than "
                           f"{s['threshold_pct']:.0f}%; {s['new']:,} new cells, {s['removed']:,} removed, "
                           f"{s['failed']:,} failing now ({s['newly_failed']:,} of them forecast last time)."))
        for name, df, cap in (("moved", diff.moved, f"Forecasts that moved by more than {s['threshold_pct']:.0f}%"),
                              ("new_cells", diff.new, "New cells"), ("removed_cells", diff.removed, "Removed cells")):
            if len(df):
                blocks.append(Table(df, cap, max_rows, _write_csv(df, directory, f"diff_{name}")))
    if diff.skipped:
        blocks.append(Text(_skipped_note(diff)))
    return Details(f"Changes since {diff.previous or 'the previous run'}", tuple(blocks), "changes")


def _skipped_note(diff: RunDiff) -> str:
    """Which earlier runs the comparison passed over and why (a broken table)."""
    return " ".join(f"Earlier run {s.split(': ', 1)[0]} skipped: {s.split(': ', 1)[1]}." for s in diff.skipped)


def _lead(meta: Mapping[str, Any], scores: pd.DataFrame, serve: pd.DataFrame | None, diff: RunDiff | None) -> Text:
    """One line: the run, and what changed since the previous one."""
    n_fail = int(scores["error"].notna().sum())
    text = (f"Run **{meta.get('date', '?')}** of matrix `{meta.get('matrix', '?')}`, predictor "
            f"`{meta.get('predictor', '?')}`: {len(scores):,} cells ({n_fail:,} failed)")
    if serve is not None:
        text += f", {len(serve):,} serve cells ({int(serve['error'].notna().sum()):,} failed)"
    text += "."
    if diff is not None:
        if diff.previous is None:
            text += " No previous run to compare with."
        else:
            s = diff.summary()
            text += (f" Since **{diff.previous}**: {s['moved']:,} of {s['compared']:,} cells moved by more than "
                     f"{s['threshold_pct']:.0f}%, {s['new']:,} new, {s['removed']:,} removed, "
                     f"{s['newly_failed']:,} newly failing (Changes, below).")
        if diff.skipped:
            text += " " + _skipped_note(diff)
    return Text(text)


def _confidence_note(frame: pd.DataFrame, columns: tuple[str, str]) -> str:
    if set(columns) <= set(frame.columns):
        return f"`confidence`: the forecast interval (`{columns[0]}` to `{columns[1]}`) against the target"
    return (f"`confidence`: no interval (this predictor gives none; read from `{columns[0]}` / `{columns[1]}` "
            f"when it does)")


def _decisions(scores: pd.DataFrame, settings: ReportSettings, modes: list[str], directory: Path,
               diff: RunDiff | None, serve: pd.DataFrame | None, previous_serve: pd.DataFrame | None
               ) -> list[Block]:
    sl, n = settings.slice, settings.max_rows
    previous = diff.previous_scores if diff is not None and diff.previous is not None else None
    targets = {m: float(settings.targets_ms[m]) for m in modes if m in settings.targets_ms}
    rec = recommendations(scores, targets, sl, previous, settings.diff_threshold)
    since = f"; `since_previous`: against {diff.previous}" if previous is not None else ""
    target_text = ", ".join(f"{m} <= {t:,.0f} ms" for m, t in targets.items())
    blocks: list[Block] = [
        Heading("Recommendations: the cheapest GPU per workload", id="decisions"),
        Text(f"Per workload (model, mode, dtype; parallel `{sl.parallel}`, fused={str(sl.fused).lower()}, sequence "
             f"length {sl.seq_len} or the model's longest): the GPU and batch with the lowest cost per 1M tokens "
             f"whose cell fits in memory and meets the step-time target ({target_text}). `margin_pct`: how far "
             f"under the target; `meeting`: GPUs that meet it; {_confidence_note(scores, INTERVAL_COLUMNS)}"
             f"{since}."),
        Table(rec, "recommendation per workload", n, _write_csv(rec, directory, "recommendations"),
              RECOMMENDATIONS_ID)]
    if serve is not None:
        st = settings.serve
        srec = serve_recommendations(serve, st, previous_serve, settings.diff_threshold)
        since = f"; `since_previous`: against {diff.previous}" if previous_serve is not None and diff else ""
        blocks += [
            Heading("Serving: the cheapest GPU per serve workload", id="serving"),
            Text(f"Per serve workload (model, dtype, input / output length): the GPU, tensor parallelism and "
                 f"concurrency with the lowest cost per 1M output tokens whose cell fits and meets "
                 f"{st.describe()}. `margin_pct`: under the tighter of the two; "
                 f"{_confidence_note(serve, TPOT_INTERVAL_COLUMNS)}{since}."),
            Table(srec, "serve recommendation per workload", n,
                  _write_csv(srec, directory, "serve_recommendations"), SERVE_RECOMMENDATIONS_ID)]
    return blocks


def _serve_details(serve: pd.DataFrame, settings: ReportSettings, directory: Path) -> list[Details]:
    st, n = settings.serve, settings.max_rows
    cost = serve_cost(serve, st)
    cap = serve_capacity(serve)
    failed = serve_failed(serve)
    out = [Details("Serving: cost per 1M output tokens per GPU", (
        Text(f"Per serve workload and GPU, the tensor parallelism and concurrency with the lowest cost per 1M "
             f"output tokens among the cells that fit and meet {st.describe()}; cheapest GPU first. `meets` no: "
             f"no cell of that GPU meets them (its lowest-TPOT cell is shown, cost blank). Every cell is in "
             f"`serve_scores.parquet`."),
        Table(cost, "serve: best (tp, concurrency) per GPU", n, _write_csv(cost, directory, "serve_cost"))),
        "serve-cost"),
        Details("Serving: largest concurrency that fits", (
            Text("Per serve workload, GPU and tp: `max_concurrency`, the most requests of isl + osl tokens whose "
                 "KV cache fits beside the weights; `largest_scored_fitting`, the largest scored concurrency "
                 "that fits (blank: none)."),
            Table(cap, "serve: KV-cache capacity", n, _write_csv(cap, directory, "serve_capacity"))),
            "serve-capacity")]
    if len(failed):
        out.append(Details("Serving: failed cells", (
            Table(failed, "serve cells that could not be forecast, by error", n,
                  _write_csv(failed, directory, "serve_failed")),), "serve-failed"))
    return out


def build_report(directory: Path, scores: pd.DataFrame, meta: Mapping[str, Any], settings: ReportSettings,
                 fleet: Fleet | None = None, diff: RunDiff | None = None, fit_check: list[Block] | None = None,
                 pricing: pd.DataFrame | None = None, title: str | None = None, serve: pd.DataFrame | None = None,
                 previous_serve: pd.DataFrame | None = None) -> tuple[Path, Path]:
    """Write tables, plots, ``report.md`` and ``report.html`` into ``directory``; return the two report paths.

    ``serve``: the run's serve table (``serve_scores.parquet``), None when it scored no serve cells (no serve
    section then); ``previous_serve``: the previous run's, for what changed."""
    sl, n = settings.slice, settings.max_rows
    serve = serve if serve is not None and len(serve) else None
    previous_serve = previous_serve if previous_serve is not None and len(previous_serve) else None
    title = title or f"tilecast forecast report {meta.get('date', '')}".strip()
    modes = [m for m in ("inference", "training") if (scores["mode"] == m).any()]
    nav = [("Recommendations", "decisions"), *([("Serving", "serving")] if serve is not None else []),
           *([("Fleet", "fleet")] if fleet is not None else []), ("Plots", "plots"), ("Full tables", "tables")]
    blocks: list[Block] = [_lead(meta, scores, serve, diff), Nav(tuple(nav))]
    blocks += _decisions(scores, settings, modes, directory, diff, serve, previous_serve)
    if fleet is not None:
        plan = fleet_plan(scores, fleet)
        blocks += [Heading(f"Fleet totals: workload mix `{fleet.name}`", id="fleet"),
                   Table(plan, "per workload, the cheapest GPU meeting its target, sized for its demand", n,
                         _write_csv(plan, directory, "fleet_plan"), "fleet-plan")]

    blocks.append(Heading("Plots", id="plots"))
    for mode in modes:
        for name, fn, alt in (("latency_vs_batch", plots.latency_vs_batch, "step time vs batch per GPU"),
                              ("cost_vs_latency", plots.cost_latency_pareto, "cost vs latency Pareto per model")):
            rel = f"{PLOTS_DIR}/{name}_{mode}.png"
            path = fn(scores, mode, sl, directory / rel)
            if path is not None:
                blocks.append(Image(path, f"{mode}: {alt}", rel))
    if serve is not None:
        rel = f"{PLOTS_DIR}/serving_pareto.png"
        path = plots.serving_pareto(serve, serve_workloads(serve, settings.serve), settings.serve.tpot_ms,
                                    directory / rel)
        if path is not None:
            blocks.append(Image(path, "serving: output tokens/s per GPU vs per user, Pareto front per GPU", rel))

    details: list[Details] = [_run_section(meta, scores)]
    scope = (f"Headline tables: no parallelism (`{sl.parallel}`), fused={str(sl.fused).lower()}, sequence "
             f"length {sl.seq_len} (or the model's longest scored one); one row per model, dtype and batch. "
             f"`OOM`: the cell does not fit in memory; `error`: it could not be forecast (a dtype the GPU has "
             f"no peak for, say: see Failed cells). Every cell is in `scores.parquet`.")
    latency: list[Block] = [Text(scope)]
    for mode in modes:
        grid = latency_grid(scores, mode, sl)
        latency.append(Table(grid, f"{mode}: step time, ms", n, _write_csv(grid, directory, f"latency_{mode}")))
    details.append(Details("Latency per model x GPU x batch (step ms)", tuple(latency), "latency"))
    targets = ", ".join(f"{m} <= {settings.targets_ms[m]:,.0f} ms" for m in modes if m in settings.targets_ms)
    cheap = cheapest_gpu(scores, dict(settings.targets_ms), sl)
    details.append(Details("Cheapest GPU per workload and batch meeting the latency target", (
        Text(f"Targets per step: {targets}. Per workload, dtype and batch, among the GPUs where the cell fits "
             f"and meets the target, the one with the lowest cost per 1M tokens; `meeting`: how many GPUs "
             f"meet it."),
        Table(cheap, "cheapest GPU per workload and batch", n, _write_csv(cheap, directory, "cheapest_gpu"))),
        "cheapest"))
    cost = tuple(Table(c, f"{mode}: $ per 1M tokens", n, _write_csv(c, directory, f"cost_{mode}"))
                 for mode in modes for c in [cost_per_1m_tokens(scores, mode, sl)])
    details.append(Details("Cost per 1M tokens (USD, best batch that fits)", cost, "cost"))
    if fleet is not None:
        by_gpu = fleet_by_gpu(scores, fleet)
        details.append(Details(f"Fleet totals on a single GPU type: workload mix `{fleet.name}`", (
            Table(by_gpu, "the whole mix on a single GPU type (blank: some workload cannot run there)",
                  n, _write_csv(by_gpu, directory, "fleet_by_gpu")),), "fleet-by-gpu"))
    if serve is not None:
        details += _serve_details(serve, settings, directory)
    if fit_check:
        head, *rest = fit_check
        details.append(Details(head.text, tuple(rest), "memory") if isinstance(head, Heading)
                       else Details("Memory model vs measured runs", tuple(fit_check), "memory"))
    if diff is not None:
        details.append(_diff_section(diff, directory, n))
    failed = failed_cells(scores)
    details.append(Details("Failed cells", (Table(failed, "cells that could not be forecast, by error", n,
                                                  _write_csv(failed, directory, "failed_cells") if len(failed)
                                                  else None),), "failed"))
    if pricing is not None:
        details.append(Details("Prices", (Text("On-demand prices per GPU-hour and their `basis`: `listed` (the part's "
                                               "own list price), `proxy` (another part's list price stands in) or "
                                               "`formula` (derived from a listed neighbour, see source). Every cost "
                                               "table marks a cost on a price that is not `listed`: `price` "
                                               "`estimate`, or `*` after the GPU."),
                                          Table(pricing, "prices used", 100)), "prices"))
    blocks += [Heading("Full tables", id="tables"),
               Text(f"Each section opens on a click; every table is also a CSV under `{TABLES_DIR}/`."), *details]
    md, html = directory / REPORT_MD, directory / REPORT_HTML
    write_atomic(md, lambda tmp: tmp.write_text(to_markdown(title, blocks)))
    write_atomic(html, lambda tmp: tmp.write_text(to_html(title, blocks)))
    return md, html


def fit_blocks(agreement: Any, directory: Path, max_rows: int) -> list[Block]:
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
