"""Generalisation benchmark: leave-one-GPU-out (LOGO) over every public fp32 GPU, the model-selection criterion,
and the prediction intervals calibrated on its residuals.

    python benchmarks/generalisation.py          # -> benchmarks/generalisation.md, data/intervals/intervals.json
    python benchmarks/generalisation.py --candidates defaults --no-precision   # one candidate, fp32 only
    python benchmarks/generalisation.py --quick          # smoke run (small fits); writes nothing unless --out given

- For every public GPU with fp32 kernel rows (:func:`tilecast.predictors.rows.logo_gpus`, read from the data):
  fit the five fp32 families (xgboost) on every other public GPU's rows (train and test tables), forecast the
  left-out GPU's model-shaped kernel rows and its end-to-end labels (spec sheet only). Each candidate of
  :data:`CANDIDATES` (hyper-parameters / features) is judged by the mean over left-out GPUs; the worst GPU is
  reported beside it. No non-public data is read.
- AMD: the fp32 families fit on every public NVIDIA GPU forecast NeuSight's MI100 / MI210 kernels (another
  vendor), and leave-one-AMD-GPU-out (NVIDIA + the other AMD GPU) forecasts each AMD GPU: the registered fp32
  predictors train on both AMD GPUs, so that is the estimate for an AMD GPU (stratum ``few_of_vendor``).
  ``--with-amd``: the NVIDIA LOGO folds fit on the AMD rows too (scored on the NVIDIA GPUs as ever; cached as
  ``logo_<candidate>_withamd.pkl``), to measure what training on AMD does to the NVIDIA figures.
- Intervals (:mod:`tilecast.forecast.intervals`): split-conformal quantiles of the LOGO log-ratio residuals
  per family (per dtype for the precision families, whose folds come from ``benchmarks/precision.py``), per
  end-to-end mode, with their LOGO coverage at 80% and 95%.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from precision import logo_folds  # noqa: E402  (benchmarks/precision.py: the precision families' LOGO)

from tilecast.data import data_hash  # noqa: E402
from tilecast.evaluation.labels import shipped_labels  # noqa: E402
from tilecast.evaluation.suite import GROUP_COLUMNS, build_frames, forecast_labels  # noqa: E402
from tilecast.evaluation.tables import markdown  # noqa: E402
from tilecast.forecast import intervals as iv  # noqa: E402
from tilecast.forecast import roofline_predictor  # noqa: E402
from tilecast.io import write_atomic  # noqa: E402
from tilecast.metrics import ape_pct  # noqa: E402
from tilecast.paths import AICONFIGURATOR_DIR, NEUSIGHT_AMD_DIR, NEUSIGHT_DIR, ROOT, VIDUR_DIR  # noqa: E402
from tilecast.predictors import fit_predictor  # noqa: E402
from tilecast.predictors.rows import (  # noqa: E402
    FP32_TRAINING_GPUS,
    amd_rows,
    logo_gpus,
    logo_rows,
    tensor_training_gpus,
)
from tilecast.predictors.xgboost_predictor import DEFAULTS  # noqa: E402
from tilecast.registry.forecaster import as_family_predictor  # noqa: E402
from tilecast.specs import get_gpu  # noqa: E402
from tilecast.tiles.dtypes import row_dtypes  # noqa: E402
from tilecast.tiles.features import GEMM_DEFAULT  # noqa: E402
from tilecast.tiles.ops import FP32_FAMILIES, TENSOR_FAMILIES  # noqa: E402

OUT = Path(__file__).with_name("generalisation.md")
#: modelling choices compared leave-one-GPU-out: name -> xgboost parameters over the DEFAULTS of
#: conf/predictor/xgboost.yaml (``{family: {...}}`` entries apply to one family); each names every value it
#: changes, so a candidate is the same model whatever the defaults are
CANDIDATES: dict[str, dict] = {
    "depth8-mcw5": {"max_depth": 8, "min_child_weight": 5.0, "test_row_weight": 5.0},  # DEFAULTS before issue 16.4
    "depth6-mcw20": {"max_depth": 6, "min_child_weight": 20.0, "test_row_weight": 5.0},  # the default 16.4 - 14.1
    # conf/predictor/xgboost.yaml before issue 16.4 (what jobs/train.py registered)
    "rounds600-eta0.05": {"rounds": 600, "eta": 0.05, "max_depth": 8, "min_child_weight": 5.0, "test_row_weight": 5.0},
    # candidates of issue 14.1 beyond the tree size: each changes one thing over depth6-mcw20
    "depth4-mcw50": {"max_depth": 4, "min_child_weight": 50.0, "test_row_weight": 5.0},  # stronger regularisation
    "test-weight1": {"max_depth": 6, "min_child_weight": 20.0, "test_row_weight": 1.0},  # model rows weigh as others
    "test-weight20": {"max_depth": 6, "min_child_weight": 20.0, "test_row_weight": 20.0},  # the default since
    "test-weight50": {"max_depth": 6, "min_child_weight": 20.0, "test_row_weight": 50.0},
    # GEMM features without the per-SM tile times (absolute rates of the GPU's SMs)
    "gemm-no-tile-times": {"max_depth": 6, "min_child_weight": 20.0, "test_row_weight": 5.0,
                           **{f: {"features": [c for c in GEMM_DEFAULT
                                               if c not in ("log_tile_compute_us", "log_tile_memory_us")]}
                              for f in ("bmm", "linear")}},
}
QUICK = {"rounds": 40}
LEVELS = (0.8, 0.95)


def params_of(candidate: dict, family: str, quick: bool) -> dict:
    p = {k: v for k, v in candidate.items() if k not in FP32_FAMILIES}
    p.update(candidate.get(family, {}))
    return {**p, **(QUICK if quick else {})}


def fit_fold(pools: dict[str, pd.DataFrame], keep, candidate: dict, quick: bool) -> dict[str, object]:
    """One predictor per fp32 family fit on the pool rows ``keep(rows)`` selects."""
    return {f: fit_predictor("xgboost", f, rows.loc[keep(rows)], **params_of(candidate, f, quick))
            for f, rows in pools.items()}


def kernel_records(fitted: dict, tests: dict[str, pd.DataFrame], gpu: str, candidate: str) -> list[pd.DataFrame]:
    out = []
    for f, rows in tests.items():
        if len(rows):
            pred = fitted[f].predict_ms(rows)
            out.append(pd.DataFrame({"candidate": candidate, "family": f, "gpu": gpu, "dtype": "fp32",
                                     "pred_ms": pred, "label_ms": rows["Latency"].to_numpy(float)}))
    return out


def e2e_records(labels: pd.DataFrame, predict, frames, candidate: str) -> pd.DataFrame:
    t = forecast_labels(labels, predict, frames=frames, groups=True)
    t = t.loc[t["pred_ms"].notna() & t["variant"].eq("plain")]
    return t.assign(candidate=candidate)[["candidate", "gpu", "tag", "mode", "label_ms", "pred_ms", *GROUP_COLUMNS]]


def run_logo(args, pools, labels, frames, log) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Kernel and end-to-end records of every fold of every candidate (and the roofline). With ``--cache``, a
    candidate whose records are cached there is read back instead of refit (parallel runs, reruns)."""
    gpus = logo_gpus()
    kern, e2e, secs = [], [], {}
    cached = {}
    for cand in args.candidates:
        path = args.cache / _logo_pkl(args, cand) if args.cache else None
        if path is not None and path.is_file():
            cached[cand] = pd.read_pickle(path)
            log(f"  {cand}: read from {path}")
    roof = {f: fit_predictor("roofline", f, None) for f in pools}
    fresh: dict[str, tuple[list, list, dict]] = {c: ([], [], {}) for c in args.candidates if c not in cached}
    # --with-amd: folds also fit on the AMD rows (MI100 / MI210); tests and scores stay the NVIDIA GPUs'
    fit_pools = with_amd_pools(pools) if args.with_amd and fresh else pools
    for gpu in gpus:
        name = get_gpu(gpu).device_name
        tests = {f: r.loc[(r["Device"] == name) & (r["Source"] == "test")] for f, r in pools.items()}
        kern += kernel_records(roof, tests, gpu, "roofline")
        e2e.append(e2e_records(labels.loc[labels["gpu"] == gpu], roofline_predictor, frames, "roofline"))
        for cand in fresh:
            t0 = time.perf_counter()
            fitted = fit_fold(fit_pools, lambda r, n=name: r["Device"] != n, CANDIDATES[cand], args.quick)
            fk, fe, fs = fresh[cand]
            fk += kernel_records(fitted, tests, gpu, cand)
            fe.append(e2e_records(labels.loc[labels["gpu"] == gpu], as_family_predictor(fitted), frames, cand))
            fs[f"{cand} without {gpu}"] = time.perf_counter() - t0
            log(f"  {cand} without {gpu}: {fs[f'{cand} without {gpu}']:.0f} s")
    for cand, (fk, fe, fs) in fresh.items():
        cached[cand] = (pd.concat(fk, ignore_index=True), pd.concat(fe, ignore_index=True), fs)
        if args.cache:
            args.cache.mkdir(parents=True, exist_ok=True)
            pd.to_pickle(cached[cand], args.cache / _logo_pkl(args, cand))
    for cand in args.candidates:
        k, e, fs = cached[cand]
        kern.append(k)
        e2e.append(e)
        secs.update(fs)
    return pd.concat(kern, ignore_index=True), pd.concat(e2e, ignore_index=True), secs


def _logo_pkl(args, cand: str) -> str:
    """Cache file of a candidate's LOGO records (``--with-amd`` folds are cached apart)."""
    return f"logo_{cand}{'_withamd' if args.with_amd else ''}{'_quick' if args.quick else ''}.pkl"


def with_amd_pools(pools: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The LOGO pools plus NeuSight's AMD rows (MI100 / MI210) of each family, to fit on."""
    return {f: pd.concat([r, amd_rows(f)], ignore_index=True, sort=False) for f, r in pools.items()}


def run_amd(args, pools, candidate: str, log) -> pd.DataFrame:
    """Fit on every public NVIDIA GPU -> AMD (setting ``nvidia only``); NVIDIA + the other AMD GPU -> each AMD."""
    path = args.cache / f"amd_{candidate}{'_quick' if args.quick else ''}.pkl" if args.cache else None
    if path is not None and path.is_file():
        log(f"  AMD: read from {path}")
        return pd.read_pickle(path)
    result = _run_amd(args, pools, candidate, log)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        result.to_pickle(path)
    return result


def _run_amd(args, pools, candidate: str, log) -> pd.DataFrame:
    amd = {f: amd_rows(f) for f in pools}
    devices = sorted(set(pd.concat([r["Device"] for r in amd.values()]).astype(str)))
    out = []
    fitted = fit_fold(pools, lambda r: np.ones(len(r), bool), CANDIDATES[candidate], args.quick)
    for d in devices:
        out += [x.assign(setting="nvidia only") for x in
                kernel_records(fitted, {f: r.loc[r["Device"] == d] for f, r in amd.items()}, get_gpu(d).key,
                               candidate)]
    roof = {f: fit_predictor("roofline", f, None) for f in pools}
    for d in devices:
        both = {f: pd.concat([pools[f], amd[f].loc[amd[f]["Device"] != d]], ignore_index=True) for f in pools}
        fitted = fit_fold(both, lambda r: np.ones(len(r), bool), CANDIDATES[candidate], args.quick)
        tests = {f: r.loc[r["Device"] == d] for f, r in amd.items()}
        out += [x.assign(setting="leave-one-AMD-out") for x in kernel_records(fitted, tests, get_gpu(d).key,
                                                                               candidate)]
        out += [x.assign(setting="roofline") for x in kernel_records(roof, tests, get_gpu(d).key, "roofline")]
        log(f"  AMD: without {d} done")
    return pd.concat(out, ignore_index=True)


def run_precision(args, log) -> pd.DataFrame:
    path = args.cache / f"precision_{args.precision_rows}{'_quick' if args.quick else ''}.pkl" if args.cache else None
    if path is not None and path.is_file():
        log(f"  precision: read from {path}")
        return pd.read_pickle(path)
    out = []
    for fam in TENSOR_FAMILIES:
        for device, test, pred, secs in logo_folds(fam, QUICK if args.quick else {}, args.precision_rows):
            out.append(pd.DataFrame({"family": fam, "gpu": get_gpu(device).key, "dtype": row_dtypes(test),
                                     "pred_ms": pred, "label_ms": test["Latency"].to_numpy(float)}))
            log(f"  {fam} without {device}: {secs:.0f} s")
    result = pd.concat(out, ignore_index=True)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        result.to_pickle(path)
    return result


def with_ape(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(ape=ape_pct(df["pred_ms"].to_numpy(float), df["label_ms"].to_numpy(float)),
                     r=np.log(df["label_ms"].to_numpy(float) / df["pred_ms"].to_numpy(float)))


def per_gpu(df: pd.DataFrame, by: str) -> pd.DataFrame:
    """MAPE per (candidate, by, gpu)."""
    return df.groupby(["candidate", by, "gpu"], sort=False)["ape"].mean().reset_index()


def wide(mape: pd.DataFrame, by: str, gpus: Sequence[str]) -> pd.DataFrame:
    """candidate x by rows, one column per left-out GPU, then mean and worst (GPU)."""
    rows = []
    for (cand, key), g in mape.groupby(["candidate", by], sort=False):
        v = dict(zip(g["gpu"], g["ape"], strict=True))
        worst = max(v, key=v.get)
        rows.append({"candidate": cand, by: key, **{short(x): v.get(x, np.nan) for x in gpus},
                     "mean": float(np.mean(list(v.values()))), "worst": f"{v[worst]:.1f} ({short(worst)})"})
    return pd.DataFrame(rows)


def short(gpu: str) -> str:
    return {"tesla_p4": "P4", "tesla_p100_pcie_16gb": "P100", "tesla_t4": "T4", "tesla_v100_pcie_32gb": "V100",
            "a100_pcie_40gb": "A100-40GB", "l4": "L4", "a100_pcie_80gb": "A100-80GB"}.get(gpu, gpu)


def score(kmape: pd.DataFrame, emape: pd.DataFrame) -> pd.DataFrame:
    """The selection criterion per candidate: the mean over the five families' and two modes' mean-over-GPU
    MAPEs (each equally), and the worst GPU of any of them."""
    parts = [kmape.groupby(["candidate", "family"])["ape"].mean().rename("m").reset_index(),
             emape.groupby(["candidate", "mode"])["ape"].mean().rename("m").reset_index()]
    worst = pd.concat([kmape, emape]).groupby("candidate")["ape"].max()
    m = pd.concat(parts).groupby("candidate")["m"].mean()
    kernel = parts[0].groupby("candidate")["m"].mean()
    e2e = parts[1].groupby("candidate")["m"].mean()
    return pd.DataFrame({"criterion (mean of 7)": m, "kernel families": kernel, "end to end": e2e,
                         "worst GPU x family/mode": worst}).reset_index().sort_values("criterion (mean of 7)")


def calibrated_table(kern: pd.DataFrame, e2e: pd.DataFrame, amd: pd.DataFrame | None, prec: pd.DataFrame | None,
                     meta: dict, trained_on: Sequence[str] | None = None) -> iv.IntervalTable:
    """The quantile table of a LOGO run. ``trained_on``: the GPUs the forecast models are fit on (default: the
    registered fp32 predictors' FP32_TRAINING_GPUS, NVIDIA and AMD, for the strata, the LOGO pool for which folds
    were new architectures). AMD residuals: ``nvidia only`` -> ``other_vendor``, ``leave-one-AMD-out`` ->
    ``few_of_vendor`` (the stratum of an AMD GPU once AMD rows are trained on)."""
    trained_on = tuple(trained_on) if trained_on is not None else None
    pool = trained_on or logo_gpus()
    kernel: dict = {}
    for f in FP32_FAMILIES:
        k = kern.loc[kern["family"] == f]
        ov = fv = None
        if amd is not None:
            a = amd.loc[(amd["family"] == f) & (amd["setting"] == "nvidia only")]
            ov = (a["r"].to_numpy(), a["gpu"].to_numpy())
            a = amd.loc[(amd["family"] == f) & (amd["setting"] == "leave-one-AMD-out")]
            fv = (a["r"].to_numpy(), a["gpu"].to_numpy())
        kernel[f] = {"fp32": iv.calibrate(k["r"].to_numpy(), k["gpu"].to_numpy(), ov, pool, fv)}
    training = {f: _trained([get_gpu(g) for g in trained_on or FP32_TRAINING_GPUS]) for f in FP32_FAMILIES}
    if prec is not None:
        for (f, dtype), p in prec.groupby(["family", "dtype"]):
            kernel.setdefault(f, {})[dtype] = iv.calibrate(p["r"].to_numpy(), p["gpu"].to_numpy())
        for f in TENSOR_FAMILIES:
            training[f] = _trained([get_gpu(d) for d in tensor_training_gpus(f)])
    e2e_q = {m: iv.calibrate(e["r"].to_numpy(), e["gpu"].to_numpy(), pool=pool) for m, e in e2e.groupby("mode")}
    return iv.IntervalTable(kernel, e2e_q, training, meta)


def _trained(specs) -> dict[str, list[str]]:
    return {"vendors": sorted({s.vendor for s in specs}), "architectures": sorted({s.architecture for s in specs}),
            "gpus": sorted({s.key for s in specs})}


def coverage_rows(df: pd.DataFrame, by: list[str], amd: pd.DataFrame | None = None,
                  pool: Sequence[str] | None = None) -> pd.DataFrame:
    out = []
    for key, g in df.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        ov = fv = None
        if amd is not None:  # AMD GPUs are trained on: judged on the leave-one-AMD-out stratum (few_of_vendor)
            a = amd.loc[(amd["family"] == key[0]) & (amd["setting"] == "nvidia only")]
            ov = (a["r"].to_numpy(), a["gpu"].to_numpy()) if len(a) else None
            a = amd.loc[(amd["family"] == key[0]) & (amd["setting"] == "leave-one-AMD-out")]
            fv = (a["r"].to_numpy(), a["gpu"].to_numpy()) if len(a) else None
        row = dict(zip(by, key, strict=True))
        for level in LEVELS:
            c = iv.coverage(g["r"].to_numpy(), g["gpu"].to_numpy(), level, ov, pool, fv)
            nv = {k: v for k, v in c.items() if not k.startswith("mi")}
            row[f"{level:.0%} mean"] = 100 * float(np.mean(list(nv.values())))
            lo = min(nv, key=nv.get)
            row[f"{level:.0%} worst"] = f"{100 * nv[lo]:.0f} ({short(lo)})"
            amd_c = {k: v for k, v in c.items() if k.startswith("mi")}
            if amd_c:
                row[f"{level:.0%} AMD"] = " / ".join(f"{short(k)} {100 * v:.0f}" for k, v in amd_c.items())
        out.append(row)
    return pd.DataFrame(out)


E2E_METHODS = ("e2e", "mix", "wider")


def e2e_coverage(kern: pd.DataFrame, e2e: pd.DataFrame, amd, prec, meta: dict) -> pd.DataFrame:
    """Leave-one-GPU-out coverage of the end-to-end intervals of each method: for each GPU, the quantile table
    calibrated without its kernel and label residuals (its stratum relative to the other GPUs), applied to its
    labels with their forecast op mix (fp32 labels: the precision families' quantiles play no part)."""
    out = []
    gpus = sorted(set(e2e["gpu"]))
    pool = logo_gpus()
    for method in E2E_METHODS:
        for level in LEVELS:
            for gpu in gpus:
                table = calibrated_table(kern.loc[kern.gpu != gpu], e2e.loc[e2e.gpu != gpu], amd, None,
                                         {**meta, "e2e_method": method}, [g for g in pool if g != gpu])
                for r in e2e.loc[e2e.gpu == gpu].itertuples(index=False):
                    mix = {c[3:]: getattr(r, c) for c in GROUP_COLUMNS}
                    lo, hi, _ = iv.e2e_interval(r.mode, gpu, "fp32", r.pred_ms, level, table, mix)
                    out.append({"method": method, "level": level, "mode": r.mode, "gpu": gpu,
                                "inside": float(lo <= r.label_ms <= hi), "width": float(hi / lo)})
    return pd.DataFrame(out)


def e2e_coverage_table(cov: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (method, mode), g in cov.groupby(["method", "mode"], sort=False):
        row = {"method": method, "mode": mode}
        for level, h in g.groupby("level"):
            per = h.groupby("gpu")["inside"].mean()
            row[f"{level:.0%} mean"] = 100 * float(per.mean())
            row[f"{level:.0%} worst"] = f"{100 * per.min():.0f} ({short(per.idxmin())})"
            row[f"{level:.0%} median hi/lo"] = float(h["width"].median())
        rows.append(row)
    return pd.DataFrame(rows)


def pick_method(cov: pd.DataFrame) -> str:
    """The end-to-end method whose mean-over-GPU coverage is closest to nominal (sum over levels and modes)."""
    per = cov.groupby(["method", "level", "mode", "gpu"])["inside"].mean().groupby(["method", "level", "mode"]).mean()
    dev = (per - per.index.get_level_values("level")).abs().groupby("method").sum()
    return str(dev.idxmin())


def widths(table: iv.IntervalTable) -> pd.DataFrame:
    out = []
    for f, by_dtype in table.kernel.items():
        for dtype, strata in by_dtype.items():
            for s, rec in strata.items():
                lo, hi, _ = iv._widest(strata, s, iv.DEFAULT_LEVEL)
                out.append({"what": f, "dtype": dtype, "stratum": s, "GPUs": len(rec["gpus"]),
                            "80% lo x": np.exp(lo), "80% hi x": np.exp(hi)})
    for m, strata in table.e2e.items():
        for s, rec in strata.items():
            lo, hi, _ = iv._widest(strata, s, iv.DEFAULT_LEVEL)
            out.append({"what": f"e2e {m}", "dtype": "fp32", "stratum": s, "GPUs": len(rec["gpus"]),
                        "80% lo x": np.exp(lo), "80% hi x": np.exp(hi)})
    return pd.DataFrame(out)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", nargs="*", default=list(CANDIDATES), choices=list(CANDIDATES))
    ap.add_argument("--quick", action="store_true", help="40-round fits (smoke run)")
    ap.add_argument("--no-amd", action="store_true")
    ap.add_argument("--no-precision", action="store_true")
    ap.add_argument("--precision-rows", type=int, default=20000,
                    help="rows drawn per precision family for its LOGO residuals (seed 0)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="keep / reuse each candidate's LOGO records here (run candidates in parallel, then all)")
    ap.add_argument("--logo-only", action="store_true", help="only the candidates' LOGO fits (fills --cache)")
    ap.add_argument("--precision-only", action="store_true", help="only the precision families' LOGO (fills --cache)")
    ap.add_argument("--amd-only", default=None, choices=list(CANDIDATES),
                    help="only the AMD fits of this candidate (fills --cache)")
    ap.add_argument("--with-amd", action="store_true",
                    help="LOGO folds also fit on the AMD rows (scored on the NVIDIA GPUs as ever; cached apart)")
    ap.add_argument("--out", type=Path, default=None, help=f"Markdown page (default {OUT.name}; quick: none)")
    ap.add_argument("--intervals", type=Path, default=None, help="quantile file (default data/intervals/...)")
    args = ap.parse_args(argv)
    out = args.out or (None if args.quick else OUT)
    ivfile = args.intervals or (None if args.quick else iv.INTERVALS_FILE)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    if args.precision_only:
        run_precision(args, log)
        return
    pools = {f: logo_rows(f) for f in FP32_FAMILIES}
    if args.amd_only:
        run_amd(args, pools, args.amd_only, log)
        return
    labels = shipped_labels().labels
    frames = build_frames(labels)
    kern, e2e, secs = run_logo(args, pools, labels, frames, log)
    if args.logo_only:
        return
    kern, e2e = with_ape(kern), with_ape(e2e)
    sc = score(per_gpu(kern.loc[kern.candidate != "roofline"], "family"),
               per_gpu(e2e.loc[e2e.candidate != "roofline"], "mode"))
    best = str(sc["candidate"].iloc[0])
    log(f"best candidate: {best}")
    amd = with_ape(run_amd(args, pools, best, log)) if not args.no_amd else None
    prec = with_ape(run_precision(args, log)) if not args.no_precision else None
    chosen_k, chosen_e = kern.loc[kern.candidate == best], e2e.loc[e2e.candidate == best]
    given = list(sys.argv[1:] if argv is None else argv)
    if "--cache" in given:  # where partial results were kept does not change them
        at = given.index("--cache")
        given = given[:at] + given[at + 2:]
    cmd = " ".join(["python benchmarks/generalisation.py", *given])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    meta = {"command": cmd.strip(), "git_commit": commit, "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "candidate": best, "params": {k: v for k, v in {**DEFAULTS, **CANDIDATES[best]}.items()},
            "inputs_sha256": {d.name: data_hash(d) for d in (NEUSIGHT_DIR, NEUSIGHT_AMD_DIR, AICONFIGURATOR_DIR,
                                                               VIDUR_DIR)},
            "precision_rows": None if args.no_precision else args.precision_rows, "quick": args.quick}
    cov_e2e = e2e_coverage(chosen_k, chosen_e, amd, prec, meta)
    meta["e2e_method"] = pick_method(cov_e2e)
    log(f"end-to-end interval method: {meta['e2e_method']}")
    table = calibrated_table(chosen_k, chosen_e, amd, prec, meta)
    if ivfile is not None:
        iv.write_intervals(table, ivfile)
        log(f"wrote {ivfile}")
    total = time.perf_counter() - t0
    text = render(args, cmd.strip(), commit, kern, e2e, sc, best, amd, prec, table, secs, total, cov_e2e)
    if out is not None:
        write_atomic(out, lambda p: p.write_text(text, encoding="utf-8"))
        log(f"wrote {out}")
    else:
        print(text)


def with_amd_lines(args, best: str, km: pd.DataFrame, em: pd.DataFrame) -> list[str]:
    """The best candidate's NVIDIA figures with the AMD rows in its folds' training (``--with-amd`` records
    cached beside the others), against without: what training on AMD, as the registered predictors do, costs
    the NVIDIA GPUs. Nothing when those records are not cached."""
    path = args.cache / f"logo_{best}_withamd.pkl" if args.cache else None
    if path is None or not path.is_file():
        return []
    k, e, _ = pd.read_pickle(path)
    kw, ew = per_gpu(with_ape(k), "family"), per_gpu(with_ape(e), "mode")
    rows = []
    for what, without, with_ in (("family", km, kw), ("mode", em, ew)):
        for name, g in without.loc[without["candidate"] == best].groupby(what, sort=False):
            h = with_.loc[with_[what] == name]
            rows.append({"family / mode": name, "without AMD: mean": g["ape"].mean(), "worst": g["ape"].max(),
                         "with AMD: mean": h["ape"].mean(), "worst ": h["ape"].max(),
                         "change of the mean": h["ape"].mean() - g["ape"].mean()})
    return ["## The same with the AMD rows in training (what the registered predictors train on)", "",
            f"`{best}`'s folds fit also on NeuSight's MI100 / MI210 rows (`--with-amd`), scored on the same NVIDIA "
            "GPUs: mean (worst) MAPE % over the left-out GPUs. Changing the xgboost seed alone moves these means by "
            "up to 0.7 points.", "", markdown(pd.DataFrame(rows).round(1), index=False), ""]


def render(args, cmd, commit, kern, e2e, sc, best, amd, prec, table, secs, total, cov_e2e) -> str:
    gpus = logo_gpus()
    km, em = per_gpu(kern, "family"), per_gpu(e2e, "mode")
    lines = ["# Generalisation: leave-one-GPU-out over every public GPU, and prediction intervals", "",
             f"Made by `{cmd}` (git {commit}, {total / 60:.1f} min on this machine's 2 shared CPUs). Spec sheet "
             "only: each left-out GPU is forecast by xgboost predictors fit on every other public GPU's kernel rows "
             f"(train and test tables; GPUs from the data: {', '.join(short(g) for g in gpus)})"
             f"{' and on NeuSight AMD rows (MI100, MI210; `--with-amd`)' if args.with_amd else ''}"
             ". Kernel MAPE on "
             "the left-out GPU's model-shaped test rows; end to end on its plain labels (fused and multi-GPU "
             "labels are in `benchmarks/e2e.md`; A100-SXM4-40GB has labels but no kernel rows, so no fold)."
             + (" The candidates' LOGO records (and the AMD and precision folds where cached) were read from "
                "`--cache`, filled by earlier runs of the same code, one per candidate "
                "(`--candidates <one> --logo-only --cache <dir>`, run in parallel; `--with-amd` for the AMD table "
                "below): the minutes above are this run's, the fold times at the end those runs'. `--cache` "
                "changes no figure." if args.cache else ""), "",
             "## Selection criterion: mean over left-out GPUs", "",
             "Each candidate's mean over the five families and the two end-to-end modes of the mean-over-GPU "
             f"MAPE (%); lower is better. Best, the default in `conf/predictor/xgboost.yaml`: **{best}**.",
             "", markdown(sc, index=False), "",
             "Candidates (xgboost parameters over `conf/predictor/xgboost.yaml`'s; every other value as there):",
             "",
             *[f"- `{k}`: {v}" for k, v in CANDIDATES.items() if k in args.candidates],
             "", "## Kernel MAPE per left-out GPU (%)", "", markdown(wide(km, "family", gpus), index=False), "",
             "## End-to-end MAPE per left-out GPU (%, plain labels)", "",
             markdown(wide(em, "mode", gpus), index=False), ""]
    lines += with_amd_lines(args, best, km, em)
    if amd is not None:
        am = amd.groupby(["setting", "family", "gpu"], sort=False)["ape"].mean().unstack("gpu").reset_index()
        lines += ["## AMD (NeuSight's MI100 / MI210 kernels, fp32): MAPE %", "",
                  "`nvidia only`: fit on every public NVIDIA GPU, forecast the AMD GPU (a vendor never trained on: "
                  "the `other_vendor` intervals). `leave-one-AMD-out`: fit on the NVIDIA GPUs and the other AMD "
                  "GPU; the registered fp32 predictors train on both AMD GPUs (`training_rows`), so this is the "
                  "estimate for an AMD GPU (the `few_of_vendor` intervals). bmm / linear rows are model shapes, "
                  "vector rows random shapes. "
                  "fp32 GEMMs are bound by the spec sheets' fp32 matrix-core (MFMA) peak, vector ops by the vector "
                  "peak (`GpuSpec.gemm_peak_gflops`); tiles and split-K of the AMD training rows come from their "
                  "Tensile kernel names, and a held-out AMD GPU takes the other AMD GPU's tile library.", "",
                  markdown(am, index=False), ""]
    lines += ["## Prediction intervals", "",
              "Split-conformal on the log ratio measured / forecast of the left-out GPUs' rows above (candidate "
              f"`{best}`), every GPU weighing the same (`src/tilecast/forecast/intervals.py`, quantiles in "
              f"`data/intervals/intervals.json`). Precision families: the LOGO folds of `benchmarks/precision.py` "
              f"({'not run' if prec is None else f'{args.precision_rows} rows drawn per family'}). Strata: `near` "
              "(all folds), `new_architecture` (folds whose GPU's architecture no other pool GPU has), "
              "`few_of_vendor` (leave-one-AMD-out: an AMD GPU, the fp32 predictors training on only two, MI100 and "
              "MI210; never tighter than the NVIDIA strata), `other_vendor` (NVIDIA-trained fp32 predictors on "
              "AMD: a vendor never trained on). Interval = forecast x [lo, hi]:", "",
              markdown(widths(table), index=False), "",
              "### Coverage, leave one GPU out (%)", "",
              "For each GPU: quantiles calibrated on every other GPU's residuals (its stratum as seen without it), "
              "share of its own rows inside. Mean and worst over the NVIDIA GPUs; AMD per GPU (its "
              "`few_of_vendor` interval calibrated on the other AMD GPU's leave-one-AMD-out residuals). Target: "
              "within 5 points of nominal.", "",
              markdown(coverage_rows(kern.loc[kern.candidate == best], ["family"], amd, gpus), index=False), "",
              "End to end, per mode and method (`e2e`: the end-to-end residual quantiles of the mode; `mix`: "
              "every kernel group at its family's quantile at once, the comonotone op mix; `wider`: the wider of "
              f"both). Chosen, closest to nominal on average: **{table.meta['e2e_method']}**.", "",
              markdown(e2e_coverage_table(cov_e2e), index=False), ""]
    if prec is not None:
        lines += ["Precision families (per dtype):", "", markdown(coverage_rows(prec, ["family", "dtype"]),
                                                                  index=False), ""]
    lines += ["## Fit time per fold (s, all five fp32 families)", "",
              markdown(pd.DataFrame([{"fold": k, "seconds": v} for k, v in secs.items()]), index=False), ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
