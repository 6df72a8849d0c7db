"""What the kernel data lets any predictor reach on a GPU: efficiency patterns and a per-GPU noise floor.

``python benchmarks/limits.py [--output benchmarks/limits.md]``

Two measurements of the shipped kernel test rows (``kernels/test``), no registered model involved:

1. *Vector-op efficiency by row length.* ``roofline ms / measured ms`` of softmax and layer norm rows,
   median per GPU and ``H``. A spec-sheet predictor learns how efficiency moves with ``H`` from the
   training GPUs; a GPU whose curve has another shape than all of theirs cannot be forecast from its
   spec sheet, whatever the model.
2. *Shape-only floor.* Per GPU and family, 5-fold cross-validated MAPE of boosted trees fitted on that
   GPU's own rows (log2 of the shape and the op, target ``log(measured / roofline)``). Its training folds hold
   hundreds of rows of the same GPU, so it bounds from below what a correction fitted on 20 of them
   (the calibration tier) can reach: what remains is measurement spread a kernel's shape does not explain.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import xgboost as xgb

from tilecast.evaluation.tables import markdown
from tilecast.io import write_atomic
from tilecast.metrics import ape_pct
from tilecast.paths import ROOT
from tilecast.predictors import TRAINING_GPUS, UNSEEN_GPUS, evaluation_rows
from tilecast.predictors.calibration import SHAPE_DIMS
from tilecast.specs import get_gpu
from tilecast.tiles.features import OP_CODES
from tilecast.tiles.ops import FAMILIES
from tilecast.tiles.roofline import roofline_ms

GPUS = (*TRAINING_GPUS, *UNSEEN_GPUS)
BOOSTER = {"max_depth": 6, "eta": 0.1, "nthread": 1, "seed": 0}
ROUNDS = 300


def test_rows(family: str) -> pd.DataFrame:
    """Test-shape rows of every GPU of the data, with the GPU's catalog key."""
    rows = evaluation_rows(family, GPUS)
    names = {get_gpu(g).device_name: g for g in GPUS}
    return rows.assign(gpu=rows["Device"].map(names))


def efficiency_by_h(family: str) -> pd.DataFrame:
    rows = test_rows(family)
    rows["eff"] = roofline_ms(rows) / rows["Latency"].to_numpy(float)
    table = rows.pivot_table(index="gpu", columns="H", values="eff", aggfunc="median").reindex(list(GPUS))
    table.columns = [f"H={int(h)}" for h in table.columns]
    return table.rename_axis("gpu")


def shape_floor(family: str, folds: int = 5, seed: int = 0) -> pd.DataFrame:
    out = []
    for gpu, rows in test_rows(family).groupby("gpu"):
        dims = list(dict.fromkeys(("B", *SHAPE_DIMS[family])))
        x = np.column_stack([np.log2(np.maximum(rows[dims].to_numpy(float), 1.0)),
                             rows["OPName"].astype(str).map(OP_CODES).fillna(-1).to_numpy(float)])
        roof = roofline_ms(rows)
        lat = rows["Latency"].to_numpy(float)
        order = np.random.default_rng(seed).permutation(len(rows))
        pred = np.empty(len(rows))
        for held in np.array_split(order, folds):
            fit = np.setdiff1d(order, held)
            booster = xgb.train(BOOSTER, xgb.DMatrix(x[fit], label=np.log(lat[fit] / roof[fit])), ROUNDS)
            pred[held] = roof[held] * np.exp(booster.predict(xgb.DMatrix(x[held])))
        ape = ape_pct(pred, lat)
        out.append({"family": family, "gpu": gpu, "rows": len(rows), "floor MAPE %": float(ape.mean()),
                    "floor median %": float(np.median(ape))})
    return pd.DataFrame(out)


def render(eff: dict[str, pd.DataFrame], floor: pd.DataFrame) -> str:
    wide = floor.pivot_table(index="family", columns="gpu", values="floor MAPE %").reindex(
        index=list(FAMILIES), columns=list(GPUS))
    lines = [
        "# What the kernel data allows",
        "",
        f"- date: {datetime.now(UTC):%Y-%m-%d}; command: `python benchmarks/limits.py`",
        "- data: the shipped `kernels/test` rows of every GPU; no registered model is used",
        "",
        "## Vector-op efficiency by row length (roofline ms / measured ms, median)",
        "",
        "Training GPUs first, then the unseen L4 and A100-80GB.",
        "",
    ]
    for family, table in eff.items():
        lines += [f"### {family}", "", markdown(table, digits=2), ""]
    lines += [
        "## Shape-only floor per GPU (5-fold CV MAPE % of trees fitted on that GPU's own rows)",
        "",
        "A correction fitted on 20 rows of a GPU cannot be expected to beat this; the calibration target",
        "of 10% needs the floor well below 10%.",
        "",
        markdown(wide, digits=1),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "limits.md")
    args = ap.parse_args()
    eff = {f: efficiency_by_h(f) for f in ("softmax", "layernorm")}
    floor = pd.concat([shape_floor(f) for f in FAMILIES], ignore_index=True)
    text = render(eff, floor)
    write_atomic(args.output, lambda tmp: Path(tmp).write_text(text))
    print(f"wrote {args.output}")
    print(floor.to_string(index=False))


if __name__ == "__main__":
    main()
