"""Precision benchmark: tensor-core kernels (bf16 / fp8 GEMM, fused prefill and decode attention) and
half-precision vector ops, roofline vs the learned predictors, judged leave-one-GPU-out.

    python benchmarks/precision.py            # -> benchmarks/precision.md (about 15 minutes on 2 cores)
    python benchmarks/precision.py --quick    # smaller fits and samples, a smoke run

- Roofline: every shipped AIConfigurator row, per GPU x dtype x family.
- Leave-one-GPU-out over the six AIConfigurator GPUs: fit each tensor family on five, forecast the
  sixth (spec sheet only). This is the estimate for a GPU the project never saw.
- Cross-harness: fit on every AIConfigurator GPU, forecast Vidur's fp16 linear layers on A100-80GB and
  on A40 (a GPU and a harness never trained on).
- Training time per family (xgboost, one core).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from tilecast.data import load_vidur
from tilecast.evaluation.tables import markdown
from tilecast.metrics import ape_pct
from tilecast.predictors import fit_predictor
from tilecast.predictors.rows import tensor_rows, tensor_training_gpus
from tilecast.specs import get_gpu
from tilecast.tiles.dtypes import row_dtypes
from tilecast.tiles.ops import TENSOR_FAMILIES, row_families
from tilecast.tiles.roofline import roofline_ms
from tilecast.tiles.sources import kernel_rows

OUT = Path(__file__).with_name("precision.md")
TARGETS = {"tc_gemm": {"bf16": 10.0, "fp8": 15.0}, "attn_prefill": {"bf16": 10.0}, "attn_decode": {"bf16": 10.0},
           "vec_half": {"fp16": 10.0}}


def summary(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    a = ape_pct(pred, y)
    return {"rows": len(a), "mape": float(a.mean()), "median": float(np.median(a)), "p90": float(np.quantile(a, 0.9))}


def short(device: str) -> str:
    return get_gpu(device).key


def md(df: pd.DataFrame) -> str:
    return markdown(df, index=False)


def grouped(rows: pd.DataFrame, pred: np.ndarray, by: list[str]) -> pd.DataFrame:
    frame = rows.assign(_pred=pred, gpu=rows["Device"].map(short), dtype=row_dtypes(rows))
    out = []
    for key, part in frame.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        out.append({**dict(zip(by, key, strict=True)), **summary(part["_pred"].to_numpy(), part["Latency"].to_numpy())})
    return pd.DataFrame(out)


def roofline_section(quick: bool) -> list[str]:
    parts = []
    for fam in TENSOR_FAMILIES:
        rows = tensor_rows(fam)
        if quick:
            rows = rows.sample(n=min(len(rows), 20000), random_state=0)
        parts.append(grouped(rows, roofline_ms(rows), ["gpu", "dtype"]).assign(family=fam))
    table = pd.concat(parts)[["family", "gpu", "dtype", "rows", "mape", "median", "p90"]]
    return ["## Roofline (spec sheet, no learning): APE % per GPU x dtype x family", "", md(table), ""]


def logo_folds(fam: str, params: dict, sample: int | None = None
               ) -> Iterator[tuple[str, pd.DataFrame, np.ndarray, float]]:
    """Leave-one-GPU-out over the GPUs of a precision family's data: ``(left-out device, its rows, the
    forecast of a model fit on every other GPU, fit seconds)`` per GPU (``sample``: at most that many rows,
    drawn once with seed 0). ``benchmarks/generalisation.py`` calibrates its intervals on these."""
    rows = tensor_rows(fam)
    if sample is not None:
        rows = rows.sample(n=min(len(rows), sample), random_state=0)
    for gpu in tensor_training_gpus(fam):
        test = rows.loc[rows["Device"] == gpu]
        t0 = time.perf_counter()
        model = fit_predictor("xgboost", fam, rows.loc[rows["Device"] != gpu], **params)
        fit_s = time.perf_counter() - t0
        yield gpu, test, model.predict_ms(test), fit_s


def logo_section(params: dict, quick: bool) -> tuple[list[str], dict[str, float]]:
    out, fit_s = [], {}
    for fam in TENSOR_FAMILIES:
        for gpu, test, pred, secs in logo_folds(fam, params, 30000 if quick else None):
            fit_s[f"{fam} without {short(gpu)}"] = secs
            roof = roofline_ms(test)
            for dtype, part in test.assign(_p=pred, _r=roof, dtype=row_dtypes(test)).groupby("dtype"):
                s = summary(part["_p"].to_numpy(), part["Latency"].to_numpy())
                r = summary(part["_r"].to_numpy(), part["Latency"].to_numpy())
                target = TARGETS.get(fam, {}).get(dtype)
                out.append({"family": fam, "left out": short(gpu), "dtype": dtype, "rows": s["rows"],
                            "roofline mape": r["mape"], "xgboost mape": s["mape"], "median": s["median"],
                            "p90": s["p90"], "target": f"<= {target:g}" if target else "",
                            "met": ("yes" if s["mape"] <= target else "no") if target else ""})
            print(f"  {fam} without {short(gpu)}: {out[-1]['xgboost mape']:.1f}% "
                  f"({fit_s[f'{fam} without {short(gpu)}']:.0f} s)", file=sys.stderr, flush=True)
    table = pd.DataFrame(out)
    means = table.groupby(["family", "dtype"]).agg(mean=("xgboost mape", "mean"), worst=("xgboost mape", "max"),
                                                   roofline=("roofline mape", "mean")).reset_index()
    lines = ["## Leave-one-GPU-out: APE %", "",
             "Fit on every other GPU of the family's data, forecast the one left out: the six AIConfigurator "
             "GPUs for GEMM and attention, Vidur's two (A100-80GB, A40) for the half-precision vector ops.", "",
             md(table), "", "Mean and worst left-out GPU:", "", md(means), ""]
    return lines, fit_s


def vidur_section(params: dict, quick: bool) -> list[str]:
    vidur = kernel_rows(load_vidur("mlp"))
    vidur = vidur.loc[pd.to_numeric(vidur["Latency"], errors="coerce") > 0]
    fams = row_families(vidur)
    lines = ["## Cross-harness: Vidur's fp16 linear layers, fit on AIConfigurator only", "",
             "Vidur times the same layers with another harness (sum of CUDA kernel times in a profiler trace); "
             "the A40 is a GPU no tensor-core row comes from.", ""]
    linear = vidur.loc[(fams == "tc_gemm").to_numpy()]
    rows = tensor_rows("tc_gemm")
    if quick:
        rows = rows.sample(n=min(len(rows), 30000), random_state=0)
    model = fit_predictor("xgboost", "tc_gemm", rows, **params)
    lines += ["Linear layers (family tc_gemm, fp16):", "",
              md(pd.concat([grouped(linear, model.predict_ms(linear), ["gpu"]).assign(forecast="xgboost"),
                            grouped(linear, roofline_ms(linear), ["gpu"]).assign(forecast="roofline")])), ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    params = {"rounds": 60} if args.quick else {}
    t0 = time.perf_counter()
    lines = ["# Precision benchmark: tensor-core kernels, leave-one-GPU-out", "",
             f"Command: `python benchmarks/precision.py{' --quick' if args.quick else ''}` "
             "(xgboost with the registry defaults, spec sheet only; no row of a left-out GPU is fitted).", ""]
    lines += roofline_section(args.quick)
    logo, fit_s = logo_section(params, args.quick)
    lines += logo
    lines += vidur_section(params, args.quick)
    lines += ["## Training time per fit (s, one core)", "",
              md(pd.DataFrame([{"fit": k, "seconds": v} for k, v in fit_s.items()])), "",
              f"Total benchmark wall time: {time.perf_counter() - t0:.0f} s.", ""]
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
