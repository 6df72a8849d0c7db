"""Kernel benchmark: per-kernel accuracy of roofline, mlp and xgboost (and calibrated), tile choice, speed.

    python benchmarks/kernels.py            # -> benchmarks/kernels.md (about 15 minutes on 2 cores)
    python benchmarks/kernels.py --quick    # smaller fits, a smoke run

Predictors are fit on the five NVIDIA training GPUs only (train rows + test-shape rows of those GPUs;
``training_rows(family, amd=False)``: the registered predictors also train on NeuSight's MI100 / MI210 rows).
Unseen GPUs (L4, A100-80GB) are evaluation only. Model choices are judged leave-one-training-GPU-
out: fit on four training GPUs, test on the test-shape rows of the fifth.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from tilecast.atomic import write_text_atomic
from tilecast.metrics import ape_pct
from tilecast.predictors import TRAINING_GPUS, UNSEEN_GPUS, evaluation_rows, fit_predictor, training_rows
from tilecast.predictors.calibration import fit_calibration
from tilecast.predictors.tile_choice import fit_chooser, valid_profiled
from tilecast.specs import get_gpu
from tilecast.tiles.gemm import output_tiles
from tilecast.tiles.ops import FP32_FAMILIES

OUT = Path(__file__).with_name("kernels.md")
LEARNED = ("xgboost", "mlp")
K_VALUES = (5, 10, 20)
QUICK = {"xgboost": {"rounds": 80}, "mlp": {"epochs": 3}}


def summary(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    a = ape_pct(pred, y)
    return {"mape": float(a.mean()), "median": float(np.median(a)), "p90": float(np.quantile(a, 0.9))}


def short(gpu_key: str) -> str:
    return {"tesla_p4": "P4", "tesla_p100_pcie_16gb": "P100", "tesla_t4": "T4", "tesla_v100_pcie_32gb": "V100",
            "a100_pcie_40gb": "A100-40GB", "l4": "L4", "a100_pcie_80gb": "A100-80GB"}.get(gpu_key, gpu_key)


class CachedPredictor:
    """A predictor whose predictions for known row labels are precomputed (calibration draws)."""

    def __init__(self, family: str, floor_ms: float, pred: pd.Series) -> None:
        self.family, self.floor_ms, self.pred = family, floor_ms, pred

    def predict_ms(self, rows: pd.DataFrame, gpu: object = None) -> np.ndarray:
        return self.pred.loc[rows.index].to_numpy(float)


def calibrated(predictor: object, family: str, rows: pd.DataFrame, pred: np.ndarray, gpu_key: str, k: int,
               draws: int, seed: int) -> dict[str, float]:
    """Mean over ``draws`` random k-row calibration sets of the summary on the other rows."""
    gpu = get_gpu(gpu_key)
    cached = CachedPredictor(family, float(getattr(predictor, "floor_ms", 0.0)), pd.Series(pred, index=rows.index))
    rng = np.random.default_rng(seed)
    y = rows["Latency"].to_numpy(float)
    out = []
    for _ in range(draws):
        pick = rng.choice(len(rows), size=min(k, len(rows) - 1), replace=False)
        rest = np.setdiff1d(np.arange(len(rows)), pick)
        cal = fit_calibration(cached, rows.iloc[pick], gpu)
        corrected = cal.apply(pred[rest], rows.iloc[rest])
        out.append({**summary(corrected, y[rest]), "roof_base": 100.0 * (cal.base == "roofline")})
    return {m: float(np.mean([o[m] for o in out])) for m in ("mape", "median", "p90", "roof_base")}


def by_gpu(rows: pd.DataFrame, gpus: Sequence[str]) -> dict[str, np.ndarray]:
    return {g: (rows["Device"] == get_gpu(g).device_name).to_numpy() for g in gpus}


def fit_family(family: str, rows: pd.DataFrame, params: dict[str, dict]) -> tuple[dict[str, object], dict[str, float]]:
    fitted, secs = {"roofline": fit_predictor("roofline", family, rows)}, {}
    for name in LEARNED:
        t0 = time.perf_counter()
        fitted[name] = fit_predictor(name, family, rows, **params.get(name, {}))
        secs[name] = time.perf_counter() - t0
    return fitted, secs


def evaluate(family: str, fitted: dict[str, object], rows: pd.DataFrame, gpus: Sequence[str],
             calibrate: bool, draws: int, seed: int) -> list[dict]:
    out = []
    preds = {name: p.predict_ms(rows) for name, p in fitted.items()}
    y = rows["Latency"].to_numpy(float)
    for gpu, mask in by_gpu(rows, gpus).items():
        if not mask.any():
            continue
        for name, pred in preds.items():
            out.append({"family": family, "gpu": gpu, "predictor": name, "n": int(mask.sum()),
                        **summary(pred[mask], y[mask])})
            if calibrate and name in LEARNED:
                for k in K_VALUES:
                    res = calibrated(fitted[name], family, rows.loc[mask], pred[mask], gpu, k, draws, seed)
                    out.append({"family": family, "gpu": gpu, "predictor": f"{name}+cal{k}",
                                "n": int(mask.sum()) - k, **res})
    return out


def tile_metrics(chooser: object, rows: pd.DataFrame) -> dict[str, float]:
    """How well a chooser's tiles match the profiled ones (tile, launched blocks)."""
    rows, prof = valid_profiled(rows)
    got = chooser.choose(rows)

    def blocks(t: pd.DataFrame) -> np.ndarray:
        return output_tiles(rows["B"].to_numpy(float), rows["M"].to_numpy(float), rows["K"].to_numpy(float),
                            t["tile_k"].to_numpy(float), t["tile_m"].to_numpy(float)) * t["split"].to_numpy(float)

    same = (got["tile_k"].to_numpy() == prof["tile_k"].to_numpy()) & \
        (got["tile_m"].to_numpy() == prof["tile_m"].to_numpy())
    b_true, b_got = blocks(prof), blocks(got)
    return {"tile_acc": 100 * float(same.mean()), "blocks_exact": 100 * float((b_true == b_got).mean()),
            "blocks_log2_err": float(np.mean(np.abs(np.log2(b_got / b_true))))}


def tile_rows(family: str, predictor: object, train: pd.DataFrame, rows: pd.DataFrame,
              gpus: Sequence[str], setting: str) -> list[dict]:
    """Tile metrics and downstream xgboost MAPE with the reference nearest-neighbour vs the learned chooser."""
    out = []
    choosers = {"nearest (reference)": fit_chooser("nearest", train), "learned": predictor.chooser}
    own = predictor.chooser
    y = rows["Latency"].to_numpy(float)
    for label, chooser in choosers.items():
        predictor.chooser = chooser
        pred = predictor.predict_ms(rows)
        for gpu, mask in by_gpu(rows, gpus).items():
            if mask.any():
                out.append({"family": family, "setting": setting, "gpu": gpu, "chooser": label,
                            **tile_metrics(chooser, rows.loc[mask]), "xgb_mape": summary(pred[mask], y[mask])["mape"]})
    predictor.chooser = own
    return out


def speed(fitted: dict[str, dict[str, object]], n_rows: int = 100_000) -> list[dict]:
    out = []
    for family, preds in fitted.items():
        base = evaluation_rows(family)
        rows = base.sample(n=n_rows, replace=True, random_state=0).reset_index(drop=True)
        for name, p in preds.items():
            t0 = time.perf_counter()
            p.predict_ms(rows)
            out.append({"family": family, "predictor": name, "rows_per_s": n_rows / (time.perf_counter() - t0)})
    return out


def fmt(x: float, nd: int = 1) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def accuracy_table(df: pd.DataFrame, gpus: Sequence[str], predictors: Sequence[str]) -> list[str]:
    head = "| family | predictor | " + " | ".join(f"{short(g)} MAPE / med / p90" for g in gpus) + " |"
    lines = [head, "|" + " --- |" * (2 + len(gpus))]
    for fam in FP32_FAMILIES:
        for name in predictors:
            cells = []
            for g in gpus:
                r = df[(df.family == fam) & (df.gpu == g) & (df.predictor == name)]
                cells.append("-" if r.empty else
                             f"{fmt(r.mape.iloc[0])} / {fmt(r['median'].iloc[0])} / {fmt(r.p90.iloc[0])}")
            lines.append(f"| {fam} | {name} | " + " | ".join(cells) + " |")
    return lines


def base_table(df: pd.DataFrame, gpus: Sequence[str], k: int = 20) -> list[str]:
    """Per family x GPU (unseen, then held-out training GPUs): % of calibration draws on the roofline base."""
    lines = ["| predictor | family | " + " | ".join(short(g) for g in gpus) + " |", "|" + " --- |" * (2 + len(gpus))]
    for name in LEARNED:
        for fam in FP32_FAMILIES:
            r = df[(df.family == fam) & (df.predictor == f"{name}+cal{k}")].set_index("gpu")
            lines.append(f"| {name} | {fam} | " + " | ".join(
                fmt(r.roof_base.get(g, np.nan), 0) for g in gpus) + " |")
    return lines


def headline(df: pd.DataFrame, predictors: Sequence[str]) -> list[str]:
    cols = [(f, g) for f in FP32_FAMILIES for g in UNSEEN_GPUS]
    lines = ["| predictor | " + " | ".join(f"{f} {short(g)}" for f, g in cols) + " | mean |",
             "|" + " --- |" * (2 + len(cols))]
    for name in predictors:
        vals = []
        for f, g in cols:
            r = df[(df.family == f) & (df.gpu == g) & (df.predictor == name)]
            vals.append(r.mape.iloc[0] if not r.empty else np.nan)
        lines.append(f"| {name} | " + " | ".join(fmt(v) for v in vals) + f" | {fmt(float(np.nanmean(vals)))} |")
    return lines


def targets(df: pd.DataFrame, default: str) -> list[str]:
    """Issue targets on the unseen GPUs for the default predictor: met or not, per family x GPU."""
    def mape(name: str, fam: str, gpu: str) -> float:
        r = df[(df.family == fam) & (df.gpu == gpu) & (df.predictor == name)]
        return float(r.mape.iloc[0]) if not r.empty else float("nan")

    lines = [f"Targets for {default} (per-kernel MAPE; yes / no):", "",
             "| family | GPU | roofline | spec only | <= roofline / 2 | <= 12% (GEMM, A100-80GB) | best calibrated "
             "k <= 20 | <= 10% |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for fam in FP32_FAMILIES:
        for gpu in UNSEEN_GPUS:
            roof, own = mape("roofline", fam, gpu), mape(default, fam, gpu)
            cal = min(mape(f"{default}+cal{k}", fam, gpu) for k in K_VALUES)
            gemm = "yes" if own <= 12 else "no"
            lines.append(f"| {fam} | {short(gpu)} | {fmt(roof)} | {fmt(own)} | {'yes' if own <= roof / 2 else 'no'} | "
                         f"{gemm if fam in ('bmm', 'linear') and gpu == 'a100_pcie_80gb' else ''} | {fmt(cal)} | "
                         f"{'yes' if cal <= 10 else 'no'} |")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small fits (smoke run)")
    ap.add_argument("--families", nargs="*", default=list(FP32_FAMILIES))  # the precision families: precision.py
    ap.add_argument("--draws", type=int, default=20, help="random calibration sets per k")
    ap.add_argument("--logo-mlp-epochs", type=int, default=8, help="mlp epochs in leave-one-GPU-out fits")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    params: dict[str, dict] = QUICK if args.quick else {}
    logo_params = {**params, "mlp": {**params.get("mlp", {}),
                                     "epochs": min(args.logo_mlp_epochs, params.get("mlp", {}).get("epochs", 99))}}
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    t_start = time.perf_counter()
    unseen, train_gpus, logo, tiles, fit_s, fitted_all = [], [], [], [], [], {}
    for family in args.families:
        train = training_rows(family, amd=False)  # the published setup: the five NVIDIA training GPUs only
        fitted, secs = fit_family(family, train, params)
        fitted_all[family] = fitted
        fit_s.append({"family": family, "rows": len(train), **secs})
        log(f"{family}: fit on {len(train)} rows: " + ", ".join(f"{k} {v:.0f}s" for k, v in secs.items()))
        ev = evaluation_rows(family)
        unseen += evaluate(family, fitted, ev, UNSEEN_GPUS, True, args.draws, args.seed)
        train_gpus += evaluate(family, fitted, train[train["Source"] == "test"], TRAINING_GPUS, False, 0, 0)
        if family in ("bmm", "linear"):
            tiles += tile_rows(family, fitted["xgboost"], train, ev, UNSEEN_GPUS, "unseen (fit on 5)")
        for held in TRAINING_GPUS:
            name = get_gpu(held).device_name
            fit_rows = train[train["Device"] != name]
            held_rows = train[(train["Device"] == name) & (train["Source"] == "test")].reset_index(drop=True)
            lf, _ = fit_family(family, fit_rows, logo_params)
            logo += evaluate(family, lf, held_rows, [held], True, args.draws, args.seed)
            if family in ("bmm", "linear"):
                tiles += tile_rows(family, lf["xgboost"], fit_rows, held_rows, [held], "leave-one-GPU-out")
        log(f"{family}: evaluated ({time.perf_counter() - t_start:.0f}s so far)")
    speeds = speed(fitted_all)
    write_text_atomic(args.out, render(args, pd.DataFrame(unseen), pd.DataFrame(train_gpus), pd.DataFrame(logo),
                                  pd.DataFrame(tiles), pd.DataFrame(fit_s), pd.DataFrame(speeds),
                                  time.perf_counter() - t_start))
    log(f"wrote {args.out}")


def render(args: argparse.Namespace, unseen: pd.DataFrame, train_gpus: pd.DataFrame, logo: pd.DataFrame,
           tiles: pd.DataFrame, fit_s: pd.DataFrame, speeds: pd.DataFrame, total_s: float) -> str:
    cal = [f"{n}+cal{k}" for n in LEARNED for k in K_VALUES]
    base = ["roofline", *LEARNED]
    cmd = "python benchmarks/kernels.py" + (" --quick" if args.quick else "")
    means = {n: unseen[unseen.predictor == n].mape.mean() for n in LEARNED}
    default = min(means, key=means.get)
    lines = [
        "# Kernel benchmark", "",
        f"Made by `{cmd}` ({total_s / 60:.1f} min on this machine). Per-kernel APE in %: MAPE / median / p90.",
        "Fit on the 5 training GPUs only (random train shapes + test-shape rows of those GPUs); the unseen GPUs",
        "are never trained on. `+calK`: a per-family correction (`fit_calibration`'s default, a MAPE-optimal scale,",
        "`src/tilecast/predictors/calibration.py`; chosen end to end in `benchmarks/calibration.md`; applied to the",
        "learned forecast or to the",
        "roofline, whichever has the lower leave-one-out error on the K kernels) fitted on K kernels of the target",
        f"GPU drawn at random ({args.draws} draws, mean reported) and excluded from the evaluated rows. Load",
        f"average at the end of the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (times are inflated above",
        "2).", "",
        "## Headline: MAPE on the unseen GPUs (spec sheet only, then calibrated)", "",
        *headline(unseen, base + cal), "",
        f"Default predictor (lowest mean MAPE on unseen GPUs without calibration): **{default}** "
        f"({', '.join(f'{n} {fmt(v)}%' for n, v in means.items())}).", "",
        *targets(unseen, default), "",
        "## Unseen GPUs (test-shape rows)", "", *accuracy_table(unseen, UNSEEN_GPUS, base + cal), "",
        "Calibration base: % of the draws (k = 20) whose correction multiplies the roofline rather than the "
        "learned forecast.", "", *base_table(pd.concat([unseen, logo]), [*UNSEEN_GPUS, *TRAINING_GPUS]), "",
        "## Leave one training GPU out (fit on 4, test on the test-shape rows of the 5th)", "",
        f"Model choices are judged here. mlp fits use {min(args.logo_mlp_epochs, 99)} epochs in this table.", "",
        *accuracy_table(logo, TRAINING_GPUS, base + [f"{n}+cal10" for n in LEARNED]), "",
    ]
    lm = logo.groupby("predictor").mape.mean()
    lines += ["Mean LOGO MAPE over families x GPUs: " + ", ".join(f"{k} {fmt(lm[k])}%" for k in lm.index), ""]
    lines += ["## Training GPUs (in-sample: test-shape rows the models were fit on)", "",
              *accuracy_table(train_gpus, TRAINING_GPUS, base), ""]
    if not tiles.empty:
        lines += ["## GEMM tile choice for GPUs without profiles", "",
                  "Reference: tile of the nearest training row in raw (shape + spec) space, split-K ignored. "
                  "Learned (default): per training GPU a boosted-tree classifier (tile) and regressor (split-K) "
                  "on shape and SM count; a GPU uses the models of the training GPU with the nearest kernel "
                  "generation (its cuBLAS library), copying profiled shapes when generation and SM count match. "
                  "`tile acc`: tile equals the profiled one; `blocks exact`: launched grid size "
                  "matches; `log2 err`: mean |log2(blocks / launched)|; `xgb MAPE`: the xgboost predictor's "
                  "MAPE with that chooser.", "",
                  "| family | setting | GPU | chooser | tile acc % | blocks exact % | log2 err | xgb MAPE |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in tiles.itertuples():
            lines.append(f"| {r.family} | {r.setting} | {short(r.gpu)} | {r.chooser} | {fmt(r.tile_acc)} | "
                         f"{fmt(r.blocks_exact)} | {fmt(r.blocks_log2_err, 2)} | {fmt(r.xgb_mape)} |")
        agg = tiles.groupby(["setting", "chooser"])[["tile_acc", "blocks_log2_err", "xgb_mape"]].mean()
        lines += ["", "Means over families x GPUs:", "", "| setting | chooser | tile acc % | log2 err | xgb MAPE |",
                  "| --- | --- | --- | --- | --- |"]
        for (setting, chooser), r in agg.iterrows():
            lines.append(f"| {setting} | {chooser} | {fmt(r.tile_acc)} | {fmt(r.blocks_log2_err, 2)} | "
                         f"{fmt(r.xgb_mape)} |")
        lines.append("")
    lines += ["## Training time (5 training GPUs; xgboost nthread=1, torch 1 thread, on a shared 2-core machine)", "",
              "| family | rows | xgboost s | mlp s |",
              "| --- | --- | --- | --- |"]
    for r in fit_s.itertuples():
        lines.append(f"| {r.family} | {r.rows} | {fmt(r.xgboost)} | {fmt(r.mlp)} |")
    lines += [f"| all | {int(fit_s.rows.sum())} | {fmt(fit_s.xgboost.sum())} | {fmt(fit_s.mlp.sum())} |", "",
              "## Prediction speed (rows/s, 100k rows per family, one call)", "",
              "| family | " + " | ".join(base) + " |", "|" + " --- |" * (1 + len(base))]
    for fam, g in speeds.groupby("family", sort=False):
        v = dict(zip(g.predictor, g.rows_per_s, strict=True))
        lines.append(f"| {fam} | " + " | ".join(f"{v.get(n, np.nan):,.0f}" for n in base) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
