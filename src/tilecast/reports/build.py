"""Build a run's report: tables (CSV), plots, ``report.md`` and a self-contained ``report.html``.

Decision first. The page opens with one line on the run (cells forecast, not supported on their GPU, failed)
and what changed since the previous one, then the **plans**: one row per question of the report config
(``plans:``, :mod:`tilecast.reports.plans`: model, traffic or tokens, service level or deadline), the plan the
deployment planner makes from the run's own serve and training tables, its monthly (or per-run) cost, margin,
interval and what changed since the previous run; then the fleet totals of the configured workload mix (priced
at the dtype each workload names: bf16 for the default mix, as deployments run). Then the plots: the plans'
Pareto fronts with the plan marked (small multiples, at most 8 series a panel) and one interactive chart
(:mod:`tilecast.reports.explorer`: step time vs batch, cost vs step time, the serving fronts; a GPU family at a
time). Then everything else, each in a collapsed ``<details>`` in HTML (a plain section in Markdown, same
order): the cheapest GPU per workload grouped by model family, the serve recommendations, the run, latency per
model x GPU x batch, cheapest GPU per batch, cost per 1M tokens, the mix per GPU type, the serve tables, the
memory model against the measured runs, the changes cell by cell, cells not supported, failed cells, prices.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tilecast.io import write_atomic
from tilecast.reports.diff import RunDiff
from tilecast.reports.fleet import Fleet, fleet_by_gpu, fleet_plan
from tilecast.reports.render import Block, Chart, Details, Heading, Image, Nav, Table, Text, to_html, to_markdown
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
    unsupported_cells,
)

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
TABLES_DIR = "tables"
PLOTS_DIR = "plots"
#: HTML ids of the decision tables (anchors; what the browser test looks for)
PLANS_ID = "plans-table"
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
    questions: tuple = ()  # the plans' questions (conf/plans/<name>.yaml: tilecast.reports.plans.load_questions)


def _write_csv(df: pd.DataFrame, directory: Path, name: str) -> str:
    rel = f"{TABLES_DIR}/{name}.csv"
    write_atomic(directory / rel, lambda tmp: df.to_csv(tmp, index=False))
    return rel


def cell_counts(frame: pd.DataFrame) -> dict[str, int]:
    """Cells of a score / serve table: all, forecast, not supported (a GPU without the dtype's peak: bf16 on a T4),
    failed (everything else with an error). Not supported is not a failure."""
    from tilecast.scoring.engine import not_supported

    err = frame["error"]
    unsupported = not_supported(err)
    bad = err.notna().to_numpy()
    return {"cells": len(frame), "forecast": int((~bad).sum()), "not_supported": int(unsupported.sum()),
            "failed": int((bad & ~unsupported).sum())}


def _counts_text(frame: pd.DataFrame, what: str = "cells") -> str:
    c = cell_counts(frame)
    return (f"{c['cells']:,} {what} ({c['forecast']:,} forecast, {c['not_supported']:,} not supported on their GPU, "
            f"{c['failed']:,} failed)")


def _run_section(meta: Mapping[str, Any], scores: pd.DataFrame) -> Details:
    stats = meta.get("stats", {})
    fits = scores["fits"]
    dtypes = ", ".join(pd.unique(scores["dtype"].astype(str))) if "dtype" in scores else "fp32"
    lines = [f"Matrix **{meta.get('matrix', '?')}**: {_counts_text(scores)}: {scores['model'].nunique()} models x "
             f"{scores['gpu'].nunique()} GPUs, dtypes {dtypes}; "
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
    text = (f"Run **{meta.get('date', '?')}** of matrix `{meta.get('matrix', '?')}`, predictor "
            f"`{meta.get('predictor', '?')}`: {_counts_text(scores)}")
    if serve is not None:
        text += f", {_counts_text(serve, 'serve cells')}"
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


def _family(model: str) -> str:
    from tilecast.specs import get_model

    try:
        return get_model(model).family
    except (KeyError, ValueError):
        return "other"


def _decisions(scores: pd.DataFrame, settings: ReportSettings, modes: list[str], directory: Path,
               diff: RunDiff | None, serve: pd.DataFrame | None, previous_serve: pd.DataFrame | None
               ) -> list[Details]:
    """The cheapest GPU per workload, grouped by model family, and per serve workload: collapsed sections below
    the plans (the plans answer the questions people ask; these tables are every workload's pick)."""
    sl, n = settings.slice, settings.max_rows
    previous = diff.previous_scores if diff is not None and diff.previous is not None else None
    targets = {m: float(settings.targets_ms[m]) for m in modes if m in settings.targets_ms}
    rec = recommendations(scores, targets, sl, previous, settings.diff_threshold)
    since = f"; `since_previous`: against {diff.previous}" if previous is not None else ""
    target_text = ", ".join(f"{m} <= {t:,.0f} ms" for m, t in targets.items())
    blocks: list[Block] = [
        Text(f"Per workload (model, mode, dtype; parallel `{sl.parallel}`, fused={str(sl.fused).lower()}, sequence "
             f"length {sl.seq_len} or the model's longest): the GPU and batch with the lowest cost per 1M tokens "
             f"whose cell fits in memory and meets the step-time target ({target_text}). `margin_pct`: how far "
             f"under the target; `meeting`: GPUs that meet it; {_confidence_note(scores, INTERVAL_COLUMNS)}"
             f"{since}. Grouped by model family; all rows in `{_write_csv(rec, directory, 'recommendations')}`.")]
    families = rec["model"].map(_family) if len(rec) else pd.Series(dtype=object)
    for i, family in enumerate(sorted(pd.unique(families)) if len(rec) else []):
        part = rec.loc[families == family]
        blocks += [Heading(f"{family} ({len(part)} workloads)", level=3),
                   Table(part.reset_index(drop=True), f"{family}: recommendation per workload", n, None,
                         RECOMMENDATIONS_ID if i == 0 else f"{RECOMMENDATIONS_ID}-{family}")]
    out = [Details(f"Cheapest GPU per workload ({len(rec)} workloads, by model family)", tuple(blocks), "decisions")]
    if serve is not None:
        st = settings.serve
        srec = serve_recommendations(serve, st, previous_serve, settings.diff_threshold)
        since = f"; `since_previous`: against {diff.previous}" if previous_serve is not None and diff else ""
        out.append(Details("Serving: the cheapest GPU per serve workload", (
            Text(f"Per serve workload (model, dtype, input / output length): the GPU, tensor parallelism and "
                 f"concurrency with the lowest cost per 1M output tokens whose cell fits and meets "
                 f"{st.describe()}. `margin_pct`: under the tighter of the two; "
                 f"{_confidence_note(serve, TPOT_INTERVAL_COLUMNS)}{since}."),
            Table(srec, "serve recommendation per workload", n,
                  _write_csv(srec, directory, "serve_recommendations"), SERVE_RECOMMENDATIONS_ID)), "serving"))
    return out


def _plans(answers: Sequence[Any], previous: Sequence[Any] | None, settings: ReportSettings, directory: Path,
           diff: RunDiff | None) -> list[Block]:
    """The first screen: one row per question, then (under it) nothing else of the plans."""
    from tilecast.reports.plans import plans_table

    table = plans_table(answers, previous, settings.diff_threshold)
    since = (f" `since_previous`: against {diff.previous} (its tables answered the same way)."
             if previous is not None and diff is not None else "")
    return [Heading("Plans: what to rent for each question", id="plans"),
            Text("Per question of the report config (`plans:`), the deployment planner's answer from this run's serve "
                 "and training tables: the cheapest fleet (replicas carrying the traffic) or training run that fits "
                 "and meets the service level or deadline **at the high end of its forecast interval**; "
                 "`margin_pct`: how far under the tighter target at that high end; `interval`: the forecast's 80% "
                 f"interval. `tilecast plan` searches a finer grid and says why each runner-up lost.{since}"),
            Table(table, "plan per question", settings.max_rows, _write_csv(table, directory, "plans"), PLANS_ID)]


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


def _train_details(train: pd.DataFrame, directory: Path, max_rows: int) -> Details:
    """Training runs at scale: the cheapest GPUs that fit per workload, then every cell."""
    from tilecast.reports.train import train_cheapest, train_table

    cheap, full = train_cheapest(train), train_table(train)
    tokens = train["train_tokens"].dropna()
    n_tok = f"{tokens.iloc[0]:.3g}" if len(tokens) else "?"
    return Details("Training runs at scale: cost per 1B tokens and days to train", (
        Text(f"Per training workload (model, GPUs, dtype, sharding, checkpointing), the three cheapest GPUs whose run "
             f"fits, by USD per 1B tokens; `days_to_train` / `usd_to_train`: {n_tok} tokens. `comm_exposed_ms`: "
             f"collective time per step compute waited for or lost to NCCL's SMs. Every cell, `fits_with` (the "
             f"smallest change that fits) and errors: the second table and `train_scores.parquet`."),
        Table(cheap, "training runs: cheapest GPUs that fit", max_rows, _write_csv(cheap, directory, "train_cheapest")),
        Table(full, "training runs: every cell", max_rows, _write_csv(full, directory, "train_runs"))), "train-runs")


def build_report(directory: Path, scores: pd.DataFrame, meta: Mapping[str, Any], settings: ReportSettings,
                 fleet: Fleet | None = None, diff: RunDiff | None = None, fit_check: list[Block] | None = None,
                 pricing: pd.DataFrame | None = None, title: str | None = None, serve: pd.DataFrame | None = None,
                 previous_serve: pd.DataFrame | None = None, train: pd.DataFrame | None = None,
                 plans: Sequence[Any] | None = None, previous_plans: Sequence[Any] | None = None
                 ) -> tuple[Path, Path]:
    """Write tables, plots, ``report.md`` and ``report.html`` into ``directory``; return the two report paths.

    ``serve``: the run's serve table (``serve_scores.parquet``), None when it scored no serve cells (no serve
    section then); ``previous_serve``: the previous run's, for what changed; ``train``: the run's training-run table
    (``train_scores.parquet``), None when it scored none; ``plans``: the answered questions
    (:func:`tilecast.reports.plans.answer_all`), ``previous_plans`` the previous run's."""
    from tilecast.reports import explorer
    from tilecast.reports.plan_plots import plan_figure

    sl, n = settings.slice, settings.max_rows
    for stale in (directory / PLOTS_DIR).glob("*.png"):  # a rerun's plots replace the earlier report's, not add
        stale.unlink()
    serve = serve if serve is not None and len(serve) else None
    previous_serve = previous_serve if previous_serve is not None and len(previous_serve) else None
    title = title or f"tilecast forecast report {meta.get('date', '')}".strip()
    modes = [m for m in ("inference", "training") if (scores["mode"] == m).any()]
    nav = [*([("Plans", "plans")] if plans else []), *([("Fleet", "fleet")] if fleet is not None else []),
           ("Plots", "plots"), ("Cheapest GPU per workload", "decisions"), ("Full tables", "tables")]
    blocks: list[Block] = [_lead(meta, scores, serve, diff), Nav(tuple(nav))]
    if plans:
        blocks += _plans(plans, previous_plans, settings, directory, diff)
    if fleet is not None:
        plan = fleet_plan(scores, fleet)
        dtypes = ", ".join(sorted({w.dtype for w in fleet.workloads}))
        blocks += [Heading(f"Fleet totals: workload mix `{fleet.name}`", id="fleet"),
                   Text(f"Each workload priced at the dtype it names ({dtypes}: what a deployment runs, not the fp32 "
                        f"NeuSight path), on the cheapest GPU whose cell fits and meets its step-time target, sized "
                        f"for its demand."),
                   Table(plan, "per workload, the cheapest GPU meeting its target, sized for its demand", n,
                         _write_csv(plan, directory, "fleet_plan"), "fleet-plan")]

    blocks.append(Heading("Plots", id="plots"))
    answered = [a.plan for a in plans or [] if a.plan is not None]
    if answered:
        rel = f"{PLOTS_DIR}/plans.png"
        path = plan_figure(answered, directory / rel)
        if path is not None:
            blocks.append(Image(path, "the plans: each question's Pareto front, the plan starred (at most 8 series "
                                      "a panel: the GPUs of the cheapest candidates, the rest grey)", rel))
    payload = explorer.chart_payload(explorer.score_views(scores, sl) + explorer.serve_view(
        serve, serve_workloads(serve, settings.serve) if serve is not None else None))
    if payload is not None:
        rel = f"{TABLES_DIR}/chart.json"
        write_atomic(directory / rel, lambda tmp: tmp.write_text(json.dumps(payload, separators=(",", ":"))))
        blocks.append(Chart(payload, "Per GPU: step time vs batch, cost vs step time, and the serving fronts "
                                     "(tokens/s per GPU vs per user); choose a view, a workload and a GPU family", rel))

    details: list[Details] = [*_decisions(scores, settings, modes, directory, diff, serve, previous_serve),
                              _run_section(meta, scores)]
    scope = (f"Headline tables: no parallelism (`{sl.parallel}`), fused={str(sl.fused).lower()}, sequence "
             f"length {sl.seq_len} (or the model's longest scored one); one row per model, dtype and batch. "
             f"`OOM`: the cell does not fit in memory; `not supported`: the GPU has no peak for the dtype; "
             f"`error`: it could not be forecast (see Failed cells). Every cell is in `scores.parquet`.")
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
    if train is not None and len(train):
        details.append(_train_details(train, directory, n))
    if fit_check:
        head, *rest = fit_check
        details.append(Details(head.text, tuple(rest), "memory") if isinstance(head, Heading)
                       else Details("Memory model vs measured runs", tuple(fit_check), "memory"))
    if diff is not None:
        details.append(_diff_section(diff, directory, n))
    unsupported = unsupported_cells(scores)
    details.append(Details("Not supported: GPUs without the dtype's peak", (
        Text("Cells a GPU cannot run at all (bf16 on a T4): not forecast, and not counted as failures."),
        Table(unsupported, "cells not supported, by GPU and dtype", n,
              _write_csv(unsupported, directory, "not_supported") if len(unsupported) else None)), "not-supported"))
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
