"""Training-run report tables from a training-run table (``train_scores.parquet``,
:data:`tilecast.scoring.train_runs.TRAIN_SCHEMA`).

- :func:`train_cheapest`: per training workload (model, GPU count, dtype, sharding, checkpointing), the GPUs whose
  run fits, cheapest per 1B tokens first, with tokens/s per GPU, MFU, days and USD to train the section's tokens;
- :func:`train_table`: every cell's headline numbers (the full table is ``train_scores.parquet``).
"""

from __future__ import annotations

import pandas as pd

#: what a training decision is made for
TRAIN_WORKLOAD = ("model", "n_gpus", "dtype", "sharding", "activation_checkpointing")
_SHOWN = ["gpu", "tokens_per_s_per_gpu", "mfu_pct", "step_s", "comm_exposed_ms", "mem_required_gib",
          "usd_per_1b_tokens", "days_to_train", "usd_to_train"]


def train_cheapest(train: pd.DataFrame, top: int = 3) -> pd.DataFrame:
    """Per training workload, the ``top`` cheapest GPUs (USD per 1B tokens) among those whose run fits."""
    ok = train.loc[train["error"].isna() & train["fits"].fillna(False).astype(bool)]
    if ok.empty:
        return pd.DataFrame(columns=[*TRAIN_WORKLOAD, "rank", *_SHOWN])
    ranked = ok.sort_values([*TRAIN_WORKLOAD, "usd_per_1b_tokens"]).groupby(list(TRAIN_WORKLOAD), sort=False)
    out = ranked.head(top).copy()
    out["rank"] = out.groupby(list(TRAIN_WORKLOAD), sort=False).cumcount() + 1
    return out[[*TRAIN_WORKLOAD, "rank", *_SHOWN]].reset_index(drop=True)


def train_table(train: pd.DataFrame) -> pd.DataFrame:
    """Every training-run cell: its numbers, ``fits`` and ``fits_with``, or its error."""
    cols = [*TRAIN_WORKLOAD, *_SHOWN, "fits", "fits_with", "error"]
    return train[[c for c in cols if c in train]].reset_index(drop=True)


__all__ = ["TRAIN_WORKLOAD", "train_cheapest", "train_table"]
