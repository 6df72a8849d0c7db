"""Compare two score runs cell by cell (the cell keys, ``dtype`` included): forecasts that moved, cells added
or removed, cells that fail."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tilecast.scoring.matrix import CELL_KEYS
from tilecast.scoring.schema import with_defaults


@dataclass(frozen=True)
class RunDiff:
    """What changed from ``previous`` to ``current`` (the tables hold cell keys and the numbers)."""

    current: str
    previous: str | None
    threshold: float
    moved: pd.DataFrame  # keys, e2e_ms_prev, e2e_ms, change_pct (|change| > threshold)
    new: pd.DataFrame  # keys of cells only in current
    removed: pd.DataFrame  # keys of cells only in previous
    failed: pd.DataFrame  # keys + error of cells failing in current
    newly_failed: int  # failing now, forecast before
    compared: int  # cells forecast in both runs
    previous_scores: pd.DataFrame | None = field(default=None, repr=False)  # the previous run's table (what
    # the report's recommendations compare with)
    skipped: tuple[str, ...] = ()  # earlier runs passed over because they cannot be read: "<date>: <why>"

    def summary(self) -> dict[str, int | float | str | None]:
        return {"previous": self.previous, "compared": self.compared, "moved": len(self.moved),
                "new": len(self.new), "removed": len(self.removed), "failed": len(self.failed),
                "newly_failed": self.newly_failed, "threshold_pct": 100 * self.threshold}


def _keys(df: pd.DataFrame) -> pd.DataFrame:
    out = with_defaults(df)[list(CELL_KEYS)].copy()  # a run scored before the dtype axis: its cells were fp32
    out["fused"] = out["fused"].astype(bool)
    return out


def compare_runs(current: pd.DataFrame, previous: pd.DataFrame | None, current_name: str = "current",
                 previous_name: str | None = None, threshold: float = 0.05, skipped: tuple[str, ...] = ()
                 ) -> RunDiff:
    """Cells whose ``e2e_ms`` moved by more than ``threshold`` (relative), new / removed / failed cells."""
    keys = list(CELL_KEYS)
    cur = _keys(current).assign(e2e_ms=current["e2e_ms"].to_numpy(dtype=float), error=current["error"].to_numpy())
    failed = cur.loc[cur["error"].notna(), [*keys, "error"]].reset_index(drop=True)
    if previous is None:
        empty = pd.DataFrame(columns=keys)
        return RunDiff(current_name, None, threshold, pd.DataFrame(columns=[*keys, "e2e_ms_prev", "e2e_ms",
                                                                             "change_pct"]),
                       empty, empty, failed, 0, 0, skipped=skipped)
    prev = _keys(previous).assign(e2e_ms_prev=previous["e2e_ms"].to_numpy(dtype=float),
                                  error_prev=previous["error"].to_numpy())
    both = cur.merge(prev, on=keys, how="outer", indicator=True)
    new = both.loc[both["_merge"] == "left_only", keys].reset_index(drop=True)
    removed = both.loc[both["_merge"] == "right_only", keys].reset_index(drop=True)
    common = both.loc[both["_merge"] == "both"]
    a, b = common["e2e_ms_prev"].to_numpy(dtype=float), common["e2e_ms"].to_numpy(dtype=float)
    valid = np.isfinite(a) & np.isfinite(b) & (a > 0)
    change = np.full(len(common), np.nan)
    change[valid] = (b[valid] - a[valid]) / a[valid]
    moved_mask = valid & (np.abs(change) > threshold)
    moved = common.loc[moved_mask, [*keys, "e2e_ms_prev", "e2e_ms"]].assign(change_pct=100 * change[moved_mask])
    moved = moved.reindex(moved["change_pct"].abs().sort_values(ascending=False).index).reset_index(drop=True)
    newly_failed = int((common["error"].notna() & common["error_prev"].isna()).sum())
    return RunDiff(current_name, previous_name, threshold, moved, new, removed, failed, newly_failed,
                   int(valid.sum()), with_defaults(previous), skipped)
