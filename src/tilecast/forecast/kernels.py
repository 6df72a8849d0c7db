"""Forecast kernel rows (the data's schema) family by family, keeping the input's row order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tilecast.specs import GpuSpec
from tilecast.tiles.ops import family_of

#: predicts ms for rows of one family on ``gpu`` (or each row's Device when gpu is None)
FamilyPredictor = Callable[[str, pd.DataFrame, GpuSpec | None], np.ndarray]


@dataclass
class KernelForecast:
    """Input rows plus ``pred_ms``; ``unknown_ops`` counts rows of ops no predictor covers."""

    table: pd.DataFrame
    unknown_ops: dict[str, int] = field(default_factory=dict)


def forecast_kernels(rows: pd.DataFrame, predict: FamilyPredictor, gpu: GpuSpec | None = None
                     ) -> KernelForecast:
    """Add ``pred_ms`` to ``rows``: one vectorised call per family; unknown ops keep an empty value."""
    if "OPName" not in rows:
        raise ValueError("kernel rows need an 'OPName' column (the data's schema)")
    families = rows["OPName"].astype(str).map(family_of)
    pred = np.full(len(rows), np.nan)
    for fam in families.dropna().unique():
        mask = (families == fam).to_numpy()
        pred[mask] = predict(fam, rows.loc[mask], gpu)
    unknown = rows.loc[families.isna(), "OPName"].astype(str).value_counts().to_dict()
    out = rows.copy()
    out["pred_ms"] = pred
    return KernelForecast(out, {str(k): int(v) for k, v in unknown.items()})
