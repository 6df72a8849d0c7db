"""The memory model against reality: the shipped labels are missing exactly where a run did not fit.

The paper attempted one grid of (mode, model, batch) on every GPU it measured (its error tables,
``paper/nvidia_{inf,train}``: a blank there is a run that did not fit). On each GPU with measured
labels of a mode, every cell of that mode's grid either has a label (it ran) or not (it did not fit).
:func:`fit_agreement` compares the scorer's ``fits`` with that, cell by cell; a false "fits" (the
model says it fits, the GPU ran out of memory) is the error that matters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecast.data import load_e2e_labels, load_paper
from tilecast.scoring.memory import memory_required_bytes
from tilecast.scoring.metrics import GIB, FitPolicy
from tilecast.specs import get_gpu

PAPER_TABLES = {"inference": "nvidia_inf", "training": "nvidia_train"}


def attempted_cells(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Cells the paper attempted on GPUs with labels: ``gpu, model, mode, batch, seq_len, labelled``.

    The sequence length of a (model, mode) is the one most of its labels use.
    """
    labels = load_e2e_labels(root)
    plain = labels.loc[labels["variant"] == "plain"]
    grid = pd.concat([load_paper(t, root).assign(mode=m)[["mode", "model", "batch"]]
                      for m, t in PAPER_TABLES.items()], ignore_index=True).drop_duplicates()
    seq = (plain.groupby(["model", "mode"])["seq_len"].agg(lambda s: s.value_counts().idxmax())
           .rename("seq_len").reset_index())
    devices = plain[["device", "mode"]].drop_duplicates()
    cells = grid.merge(seq, on=["model", "mode"]).merge(devices, on="mode")
    have = plain[["device", "model", "mode", "batch", "seq_len"]].drop_duplicates().assign(labelled=True)
    cells = cells.merge(have, on=["device", "model", "mode", "batch", "seq_len"], how="left")
    cells["labelled"] = cells["labelled"].fillna(False).astype(bool)
    cells["gpu"] = cells["device"].map(lambda d: get_gpu(d).key)
    cols = ["gpu", "device", "model", "mode", "batch", "seq_len", "labelled"]
    return cells[cols].sort_values(cols[:6]).reset_index(drop=True)


@dataclass(frozen=True)
class FitAgreement:
    """Per-cell comparison and its counts."""

    cells: pd.DataFrame  # attempted cells + mem_required_gib, capacity_gib, fits, agree
    agree: int
    false_fits: int  # predicted to fit, no label (ran out of memory)
    false_oom: int  # predicted not to fit, yet measured
    unknown: int  # memory model failed

    @property
    def total(self) -> int:
        return len(self.cells)

    @property
    def agreement_pct(self) -> float:
        known = self.total - self.unknown
        return 100.0 * self.agree / known if known else float("nan")

    def summary(self) -> dict[str, float | int]:
        return {"cells": self.total, "agree": self.agree, "agreement_pct": round(self.agreement_pct, 1),
                "false_fits": self.false_fits, "false_oom": self.false_oom, "unknown": self.unknown}


#: the labels' training runs: forward, loss and backward, no optimizer step (so no optimizer state)
LABEL_OPTIMIZER = None


def fit_agreement(policy: FitPolicy, root: str | os.PathLike | None = None,
                  optimizer: str | None = LABEL_OPTIMIZER) -> FitAgreement:
    """``fits`` (memory model + ``policy``'s capacity) against label presence over the attempted cells.

    Training cells hold ``optimizer`` state: none by default, as the labels were measured (the score
    table's training cells hold ``policy.optimizer``'s)."""
    cells = attempted_cells(root)
    need = []
    for c in cells.itertuples(index=False):
        try:
            need.append(memory_required_bytes(c.model, int(c.batch), int(c.seq_len), c.mode, None, optimizer) / GIB)
        except Exception:  # noqa: BLE001 - counted as unknown
            need.append(np.nan)
    cells["mem_required_gib"] = need
    cells["capacity_gib"] = policy.capacity_gib(cells["gpu"].map(lambda g: get_gpu(g).mem_gb).to_numpy(float))
    known = np.isfinite(cells["mem_required_gib"].to_numpy(dtype=float))
    fits = cells["mem_required_gib"].to_numpy(dtype=float) <= cells["capacity_gib"].to_numpy(dtype=float)
    cells["fits"] = pd.array(np.where(known, fits, False), dtype="boolean")
    cells.loc[~known, "fits"] = pd.NA
    lab = cells["labelled"].to_numpy(dtype=bool)
    cells["agree"] = pd.array(np.where(known, fits == lab, False), dtype="boolean")
    cells.loc[~known, "agree"] = pd.NA
    return FitAgreement(cells, int((known & (fits == lab)).sum()), int((known & fits & ~lab).sum()),
                        int((known & ~fits & lab).sum()), int((~known).sum()))
