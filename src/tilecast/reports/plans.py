"""The report's first screen: one row per configured question (``conf/report.yaml`` ``plans:``), answered by the
planner from the run's own tables.

A serving question is answered from the run's serve table (its GPUs, dtypes, tp and concurrencies: the serve
section of the matrix is the search space; ``tilecast plan`` searches a finer one), a training question from
its training-run table, both through the planner's decision (:mod:`tilecast.planning.serve_plan`,
:mod:`tilecast.planning.train_plan`): fleets sized at the high end of the forecast interval, the cheapest one
meeting the question. The row: the plan, its monthly (or per-run) cost, its margin and interval, and what
changed since the previous run (the previous run's tables answered the same way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.planning.describe import plan_row
from tilecast.planning.layouts import ServeSearch, serve_layouts
from tilecast.planning.questions import PlanError, Question, ServeQuestion, TrainQuestion, question_from
from tilecast.planning.result import Plan
from tilecast.reports.tables import since_previous

#: the first screen's columns
PLAN_TABLE_COLUMNS = ("question", "plan", "cost", "margin_pct", "interval", "since_previous")


class PlansConfigError(UserError):
    """An invalid ``plans`` entry of the report config (names the entry)."""


@dataclass(frozen=True)
class Answered:
    """A question and its plan, or why the run's tables cannot answer it."""

    question: Question
    plan: Plan | None
    error: str | None = None


def load_questions(items: Sequence[Mapping[str, Any]] | None) -> tuple[Question, ...]:
    """Validate the ``plans`` list (each a serving or training question, :func:`question_from`)."""
    out = []
    for i, item in enumerate(items or []):
        if not isinstance(item, Mapping):
            raise PlansConfigError(f"plans[{i}] has invalid value {item!r} (expected a mapping: model, isl, osl, "
                                   f"ttft_ms, tpot_ms, rate_per_min | model, tokens, days)")
        try:
            out.append(question_from(dict(item)))
        except (PlanError, KeyError) as exc:
            raise PlansConfigError(f"plans[{i}] ({item.get('name') or item.get('model')}): {exc}") from None
    return tuple(out)


def answer_serving(q: ServeQuestion, serve: pd.DataFrame | None) -> Answered:
    """``q`` from a run's serve table: the layouts, dtypes and concurrencies the table holds for its model and
    lengths."""
    from tilecast.planning.serve_plan import serve_plan

    if serve is None or serve.empty:
        return Answered(q, None, "the run scored no serve cells")
    rows = serve.loc[(serve["model"] == q.model.key) & (serve["isl"] == q.isl) & (serve["osl"] == q.osl)]
    rows = rows.loc[rows["gpu"].isin(q.gpus) & rows["dtype"].isin(q.dtypes)]
    if rows.empty:
        return Answered(q, None, f"not in the run's serve grid ({q.model.key}, isl {q.isl}, osl {q.osl}): "
                                 f"`tilecast plan` answers it")
    search = ServeSearch(tp=tuple(sorted(int(t) for t in rows["tp"].unique())),
                         concurrency=tuple(sorted(int(c) for c in rows["concurrency"].unique())))
    layouts = serve_layouts(list(pd.unique(rows["gpu"])), list(pd.unique(rows["dtype"])), search)
    plan = serve_plan(q, layouts, rows, search={"candidates": len(rows), "source": "the run's serve table"})
    return Answered(q, plan)


def train_rows(train: pd.DataFrame) -> pd.DataFrame:
    """A training-run table's rows as the planner's (status where the table already decided it)."""
    rows = train.copy()
    rows["layout"] = (rows["sharding"].replace({"none": "ddp"}) + " ckpt " + rows["activation_checkpointing"])
    for col in ("tp", "pp", "cp"):
        if col not in rows:
            rows[col] = 1
    err = rows["error"].astype(object)
    from tilecast.scoring.engine import not_supported

    rows["status"] = np.where(err.isna(), None, np.where(not_supported(err), "not supported", "failed"))
    rows.loc[err.isna() & (rows["fits"].astype(object) == False), "status"] = "does not fit"  # noqa: E712
    return rows


def answer_training(q: TrainQuestion, train: pd.DataFrame | None) -> Answered:
    """``q`` from a run's training-run table (its GPUs, GPU counts, sharding and checkpointing)."""
    from tilecast.forecast.intervals import forecast_interval
    from tilecast.planning.train_plan import check_deadline, decide, statuses

    if train is None or train.empty:
        return Answered(q, None, "the run scored no training runs")
    rows = train.loc[(train["model"] == q.model.key) & (train["dtype"] == q.dtype) & train["gpu"].isin(q.gpus)]
    if rows.empty:
        return Answered(q, None, f"{q.model.key} ({q.dtype}) is not in the run's training runs: `tilecast plan` "
                                 f"answers it")
    rows = train_rows(rows)
    ok = rows.loc[rows["status"].isna()]
    factor = {g: float(forecast_interval("training", g, q.dtype, 1.0)[1]) for g in pd.unique(ok["gpu"])}
    prices = rows.groupby("gpu")["usd_per_gpu_hour"].first().to_dict()
    try:
        frame = statuses(rows.reset_index(drop=True), q, factor, prices)
        check_deadline(frame, q)
    except PlanError as exc:
        return Answered(q, None, str(exc))
    feasible, kept, pareto = decide(frame, q)
    return Answered(q, Plan(q, feasible, kept, pareto, {"candidates": len(rows),
                                                         "source": "the run's training-run table"}))


def answer_all(questions: Sequence[Question], serve: pd.DataFrame | None, train: pd.DataFrame | None
               ) -> list[Answered]:
    return [answer_serving(q, serve) if isinstance(q, ServeQuestion) else answer_training(q, train)
            for q in questions]


def _pick(a: Answered) -> dict[str, Any]:
    """The chosen configuration's identity and cost (what ``since_previous`` compares)."""
    chosen = a.plan.chosen if a.plan is not None else None
    if not chosen:
        return {"gpu": np.nan}
    cost = chosen.get("usd_per_month", chosen.get("usd_to_train"))
    fleet = {k: chosen.get(k) for k in ("n_gpus", "dtype", "layout", "concurrency") if k in chosen}
    return {"gpu": chosen["gpu"], **fleet, "cost": cost}


def plans_table(answers: Sequence[Answered], previous: Sequence[Answered] | None = None,
                threshold: float = 0.05) -> pd.DataFrame:
    """One row per question: :data:`PLAN_TABLE_COLUMNS` (``since_previous`` only with ``previous``)."""
    rows = []
    for i, a in enumerate(answers):
        if a.plan is None:
            row = {"question": a.question.describe(), "plan": a.error, "cost": "", "margin_pct": None,
                   "interval": ""}
        else:
            row = {k: v for k, v in plan_row(a.plan).items() if k != "feasible"}
        if previous is not None:
            cur, prev = _pick(a), (_pick(previous[i]) if i < len(previous) else {"gpu": np.nan})
            pick = tuple(k for k in ("gpu", "n_gpus", "dtype", "layout", "concurrency") if k in cur)
            if not isinstance(cur.get("gpu"), str):
                row["since_previous"] = "no plan" if isinstance(prev.get("gpu"), str) else "same (no plan)"
            else:
                prev = {**{k: np.nan for k in pick}, **prev}
                row["since_previous"] = since_previous(cur, prev, pick, "cost", "cost", threshold)
        rows.append(row)
    cols = [c for c in PLAN_TABLE_COLUMNS if previous is not None or c != "since_previous"]
    return pd.DataFrame(rows, columns=cols)


__all__ = ["Answered", "PLAN_TABLE_COLUMNS", "PlansConfigError", "answer_all", "answer_serving", "answer_training",
           "load_questions", "plans_table", "train_rows"]
