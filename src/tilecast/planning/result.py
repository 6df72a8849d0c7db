"""A plan: the decision (the chosen configuration, or none and the closest ones), the candidates kept with
why each lost, the Pareto front, and what the search did. Written as CSV (:data:`PLAN_COLUMNS` first), JSON
and a plot (:mod:`tilecast.planning.output`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tilecast.planning.questions import Question, ServeQuestion

#: the columns every serving plan's candidate table starts with (the issue's contract), then the rest
PLAN_COLUMNS = ("gpu", "engine", "n_gpus", "dtype", "layout", "concurrency", "replicas", "ttft_ms", "tpot_ms",
                "ttft_hi_ms", "tpot_hi_ms", "tokens_per_s_per_gpu", "usd_per_month", "feasible", "why")
#: the columns every training plan's candidate table starts with
TRAIN_PLAN_COLUMNS = ("gpu", "n_gpus", "dtype", "layout", "micro_batch", "step_s", "step_hi_s", "days_to_train",
                      "days_to_train_hi", "tokens_per_s_per_gpu", "mfu_pct", "usd_to_train", "feasible", "why")

#: a candidate's status, best first: what ``why`` starts from and how the closest misses are ranked
STATUSES = ("meets", "meets only at the point forecast", "misses the target", "too many GPUs", "does not fit",
            "memory unknown", "failed", "not modelled", "not supported")


def rank_order(rows: pd.DataFrame, objective: np.ndarray, *tiebreaks: np.ndarray) -> np.ndarray:
    """Candidates best first: by status (:data:`STATUSES`), then the feasible ones by ``objective`` (lower is
    better) and ``tiebreaks`` in turn, the others by how far they miss (``miss_pct``)."""
    big = np.inf
    miss = rows["miss_pct"].to_numpy(dtype=float) if "miss_pct" in rows else np.full(len(rows), np.nan)
    key = np.where(rows["feasible"].to_numpy(dtype=bool), np.nan_to_num(np.asarray(objective, dtype=float), nan=big),
                   np.nan_to_num(miss, nan=big))
    return np.lexsort((*(np.nan_to_num(np.asarray(t, dtype=float), nan=big) for t in reversed(tiebreaks)), key,
                       rows["status_rank"].to_numpy()))


def keep(ranked: pd.DataFrame, front: np.ndarray, group: list[str], why, front_order: str
         ) -> tuple[bool, pd.DataFrame, pd.DataFrame]:
    """The decision from ranked candidates (best first): the first is the plan when it is feasible; kept are
    per ``group`` its best candidate, the front (``front``: a mask over ``ranked``) and the plan, each with
    ``why(kept, plan_row_or_None)``; the front's rows sorted by ``front_order``."""
    ranked = ranked.reset_index(drop=True)
    feasible = bool(ranked["feasible"].any())
    ranked["chosen"] = False
    if feasible:
        ranked.loc[0, "chosen"] = True
    ranked["pareto"] = front
    best = ~ranked.duplicated(group, keep="first").to_numpy()
    kept = ranked.loc[best | front | ranked["chosen"].to_numpy()].copy()
    kept["why"] = why(kept, ranked.iloc[0] if feasible else None)
    pareto = kept.loc[kept["pareto"]].sort_values(front_order).reset_index(drop=True)
    return feasible, kept.reset_index(drop=True), pareto


def fitting(rows: pd.DataFrame) -> np.ndarray:
    """Candidates that were answered and fit (the statuses a Pareto front is drawn over)."""
    return rows["status"].isin(STATUSES[:4]).to_numpy()


@dataclass
class Plan:
    """The answer to one question (serving or training)."""

    question: Question
    feasible: bool
    candidates: pd.DataFrame  # the kept candidates, best first (the chosen one first when there is one)
    pareto: pd.DataFrame  # the Pareto front (serving: tokens/s per GPU vs per user; training: cost vs days)
    search: dict[str, Any] = field(default_factory=dict)  # counts by status, seconds, what was searched
    predictor: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "serve" if isinstance(self.question, ServeQuestion) else "train"

    @property
    def chosen(self) -> dict[str, Any] | None:
        """The chosen candidate (None when no configuration meets the question)."""
        if not self.feasible or self.candidates.empty:
            return None
        rows = self.candidates.loc[self.candidates["chosen"]]
        return _record(rows.iloc[0]) if len(rows) else None

    def closest(self, n: int = 5) -> pd.DataFrame:
        """The ``n`` candidates closest to meeting the question (when none meets it): fitting, answered, least
        miss first."""
        c = self.candidates
        near = c.loc[c["status"].isin(STATUSES[1:4])]
        return near.sort_values(["miss_pct", "status_rank"]).head(n)

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        """JSON-ready: question, decision, runners-up with why they lost, closest misses, Pareto, search."""
        out = {"question": self.question.to_dict(), "describe": self.question.describe(), "feasible": self.feasible,
               "plan": self.chosen, "summary": self.summary(),
               "runners_up": [_record(r) for _, r in self.candidates.loc[~self.candidates["chosen"]].head(top)
                              .iterrows()],
               "pareto": [_record(r) for _, r in self.pareto.iterrows()], "search": self.search,
               "predictor": self.predictor, "versions": self.versions, "notes": list(self.notes)}
        if not self.feasible:
            out["closest"] = [_record(r) for _, r in self.closest().iterrows()]
        return out

    def summary(self) -> str:
        """The decision in one line (what the report's first screen shows)."""
        from tilecast.planning.describe import plan_summary

        return plan_summary(self)


def _record(row: pd.Series) -> dict[str, Any]:
    """A row as JSON-ready values (NaN and NA as None, numpy scalars as Python)."""
    out = {}
    for k, v in row.items():
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            out[k] = None
        elif isinstance(v, np.bool_ | bool):
            out[k] = bool(v)
        elif isinstance(v, np.integer):
            out[k] = int(v)
        elif isinstance(v, np.floating):
            out[k] = None if math.isnan(float(v)) else float(v)
        else:
            out[k] = v
    return out


__all__ = ["PLAN_COLUMNS", "Plan", "STATUSES", "TRAIN_PLAN_COLUMNS", "fitting", "keep", "rank_order"]
