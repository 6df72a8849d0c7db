"""The report job: read a run, compare it with the previous run of the same matrix, write its report.

The report files are added to the run directory through the store (a hard-linked copy staged and
swapped in), so readers never see half a report and a rerun replaces the previous report.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tilecast.errors import one_line
from tilecast.pipelines.score import PRICING_CSV, RUN_JSON, read_run, read_serve, read_train
from tilecast.reports.build import ReportSettings, build_report, fit_blocks
from tilecast.reports.diff import RunDiff, compare_runs
from tilecast.reports.fleet import Fleet
from tilecast.reports.plans import answer_all, load_questions
from tilecast.reports.serve import ServeTargets
from tilecast.scoring.store import RunStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportResult:
    path: Path  # the run directory
    markdown: Path
    html: Path
    diff: RunDiff | None
    fit: dict | None


def previous_run(store: RunStore, date: str, matrix: str | None) -> str | None:
    """The latest earlier run of the same matrix (any matrix when ``matrix`` is None)."""
    return next(iter(_earlier_runs(store, date, matrix, [])), None)


def _earlier_runs(store: RunStore, date: str, matrix: str | None, skipped: list[str]) -> Iterator[str]:
    """Earlier runs of the same matrix, latest first; a run whose ``run.json`` cannot be read is added to
    ``skipped`` (``<date>: <why>``) and passed over."""
    for d in reversed([d for d in store.dates() if d < date]):
        meta_path = store.root / d / RUN_JSON
        if not meta_path.exists():
            continue
        try:
            same = matrix is None or json.loads(meta_path.read_text()).get("matrix") == matrix
        except (OSError, ValueError) as exc:
            skipped.append(f"{d}: {RUN_JSON} cannot be read ({one_line(exc)})")
            continue
        if same:
            yield d


def readable_previous(store: RunStore, date: str, matrix: str | None
                      ) -> tuple[str | None, pd.DataFrame | None, list[str]]:
    """The latest earlier run of the same matrix whose tables can be read: (date, scores, skipped), where
    ``skipped`` says, per broken run passed over, why (a truncated or unreadable ``scores.parquet``). A
    broken previous night never stops tonight's report: it is named in the comparison and skipped."""
    skipped: list[str] = []
    for d in _earlier_runs(store, date, matrix, skipped):
        try:
            scores = read_run(store.root / d)[0]
            read_serve(store.root / d)
        except Exception as exc:  # noqa: BLE001 any unreadable table (ArrowInvalid, OSError, a missing column)
            skipped.append(f"{d}: its tables cannot be read ({one_line(exc)})")
            log.warning("previous run %s skipped: %s", d, skipped[-1])
            continue
        return d, scores, skipped
    return None, None, skipped


def write_report_into(directory: Path, store: RunStore, date: str, settings: ReportSettings,
                      fleet: Fleet | None = None, compare: bool = True, fit_check: bool = True
                      ) -> tuple[Path, Path, RunDiff | None, dict | None]:
    """Write the report of the run whose files are in ``directory`` (a staging folder for ``date``)."""
    from tilecast.scoring.fitcheck import fit_agreement
    from tilecast.scoring.metrics import FitPolicy

    scores, meta = read_run(directory)
    diff, prev = None, None
    if compare:
        prev, prev_scores, skipped = readable_previous(store, date, meta.get("matrix"))
        diff = compare_runs(scores, prev_scores, date, prev, settings.diff_threshold, skipped=tuple(skipped))
    blocks, fit_summary = None, None
    if fit_check:
        try:
            agreement = fit_agreement(FitPolicy(**meta.get("fit", {})))
            blocks, fit_summary = fit_blocks(agreement, directory, settings.max_rows), agreement.summary()
        except (FileNotFoundError, ImportError) as exc:  # no shipped labels / no memory model here
            log.warning("memory check skipped: %s", exc)
    pricing = pd.read_csv(directory / PRICING_CSV) if (directory / PRICING_CSV).exists() else None
    serve, train = read_serve(directory), read_train(directory)
    prev_serve = read_serve(store.root / prev) if prev else None
    plans = answer_all(settings.questions, serve, train) if settings.questions else None
    prev_plans = (answer_all(settings.questions, prev_serve, read_train(store.root / prev))
                  if settings.questions and prev else None)
    md, html = build_report(directory, scores, meta, settings, fleet, diff, blocks, pricing, serve=serve,
                            previous_serve=prev_serve, train=train, plans=plans, previous_plans=prev_plans)
    return md, html, diff, fit_summary


def run_report(output_dir: Path, run: str | None, settings: ReportSettings, fleet: Fleet | None = None,
               compare: bool = True) -> ReportResult:
    """Report on ``run`` (``latest`` or a date) under ``output_dir``, replacing any earlier report of it."""
    store = RunStore(output_dir)
    store.recover()  # a run a crashed publish left only under its .old- name is back before it is looked up
    date = store.resolve(run).name
    with store.stage(date, from_existing=True) as staging:
        md, html, diff, fit = write_report_into(staging, store, date, settings, fleet, compare)
    final = store.path(date)
    return ReportResult(final, final / md.name, final / html.name, diff, fit)


def settings_from_config(cfg: dict) -> tuple[ReportSettings, Fleet | None]:
    """Report settings and fleet from a composed report config (a plain dict)."""
    from tilecast.reports.fleet import load_fleet
    from tilecast.reports.tables import Slice
    from tilecast.scoring.matrix import canonical_parallel

    head = cfg.get("headline") or {}
    sl = Slice(int(head.get("seq_len", 1024)), canonical_parallel(head.get("parallel")), bool(head.get("fused", False)))
    targets = {str(k): float(v) for k, v in (cfg.get("latency_targets_ms") or {}).items()}
    defaults = ReportSettings()
    settings = ReportSettings(targets or defaults.targets_ms, sl, int(cfg.get("max_rows", defaults.max_rows)),
                              float(cfg.get("diff_threshold", defaults.diff_threshold)),
                              ServeTargets.from_config(cfg.get("serve")),
                              load_questions((cfg.get("plans") or {}).get("questions")))
    fleet = load_fleet(cfg["fleet"]) if cfg.get("fleet") else None
    return settings, fleet
