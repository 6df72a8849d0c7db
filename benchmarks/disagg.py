"""Disaggregated serving benchmark: TTFT / TPOT of the public ``mode=disagg`` rows of AIConfigurator's serving.csv.

    python benchmarks/disagg.py                       # -> benchmarks/disagg.md (fits 3 predictor sets, ~15 min)
    python benchmarks/disagg.py --predictors DIR      # reuse / store the fitted kernel predictors in DIR

Kernel predictors (xgboost, registry defaults, spec sheet only) are fit as ``benchmarks/serving.py`` fits them, on
the shipped training rows: once on every GPU (leave-one-model-out) and once without each judged GPU (leave one
GPU out: the held-out GPU's kernel rows and serving rows both unseen). The three constants of
:class:`tilecast.serving.disagg.DisaggOverheads` (a TTFT overhead, decode and prefill step scales) are fitted on
the public rows by coordinate search minimising MAPE, and judged on rows they were not fitted on: leave one GPU out
(fitted on the other GPU's rows, under that fold's predictors) and leave one model out (DeepSeek-V3 and R1 are one
architecture, so one group). The mechanism alone (no fitted constant) is reported beside them.
"""

from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tilecast.data import load_aiconfigurator
from tilecast.evaluation.tables import markdown
from tilecast.metrics import ape_pct
from tilecast.predictors import fit_predictor, training_rows
from tilecast.registry.forecaster import as_family_predictor
from tilecast.serving.disagg import (
    NO_OVERHEADS,
    PREFILL_TOKEN_BUDGET,
    DisaggOverheads,
    disagg_config_from_row,
    disagg_terms,
    solve_terms,
)
from tilecast.specs import get_gpu, get_model

OUT = Path(__file__).with_name("disagg.md")
#: families a disaggregated MoE / dense forward runs through
FAMILIES = ("tc_gemm", "attn_prefill", "attn_decode", "vec_half", "moe", "mla_prefill", "mla_decode")
#: models of one architecture (one leave-one-model-out group)
SAME_ARCH = {"deepseek_r1": "deepseek_v3/r1", "deepseek_v3": "deepseek_v3/r1"}
#: coordinate-search grids of the fitted constants
GRIDS = {"step_scale": np.round(np.arange(0.40, 1.41, 0.1), 2),
         "prefill_scale": np.round(np.arange(0.30, 1.51, 0.1), 2),
         "ttft_ms": np.arange(0.0, 401.0, 40.0),
         "waves": np.array([2.0, 3.0, 5.0, 10.0, 20.0])}
BANDS = ((0, 16, "1-16"), (16, 128, "17-128"), (128, 1024, "129-1024"), (1024, np.inf, "> 1024"))
TARGET_TTFT, TARGET_TPOT = 25.0, 15.0
#: the client's waves of the design alternatives (InferenceMAX's ``num_prompts = 10 x concurrency``)
ASSUMED_WAVES = 10.0


def md(df: pd.DataFrame) -> str:
    return markdown(df, index=False)


def predictors(fold: str, cache_dir: Path | None) -> dict:
    """Kernel predictors fit on every GPU's training rows (``all``) or all but GPU ``fold``."""
    path = cache_dir / f"pred_{fold}.pkl" if cache_dir else None
    if path is not None and path.is_file():
        with open(path, "rb") as f:
            return pickle.load(f)
    out = {}
    for fam in FAMILIES:
        rows = training_rows(fam)
        if fold != "all":
            keys = rows["Device"].astype(str).map(lambda d: get_gpu(d).key)
            rows = rows.loc[(keys != fold).to_numpy()]
        out[fam] = fit_predictor("xgboost", fam, rows)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump(out, f)
    return out


def disagg_rows() -> pd.DataFrame:
    rows = load_aiconfigurator("serving")
    rows = rows.loc[rows["mode"] == "disagg"].reset_index(drop=True)
    model = []
    for path in rows["model_path"].astype(str):
        try:
            model.append(get_model(path).key)
        except Exception:  # noqa: BLE001 - an unknown model is a row error, named by the evaluator
            model.append(str(path))
    return rows.assign(model=model, arch=[SAME_ARCH.get(m, m) for m in model])


def mape(pred: np.ndarray, got: np.ndarray) -> float:
    return float(np.nanmean(ape_pct(pred, got)))


def score(out: pd.DataFrame, rows: pd.DataFrame) -> float:
    """The fit objective: TTFT MAPE + TPOT MAPE over the answered rows."""
    return (mape(out["pred_ttft_ms"], rows["silicon_ttft_ms"]) + mape(out["pred_tpot_ms"], rows["silicon_tpot_ms"]))


def fit_overheads(terms, rows: pd.DataFrame, fit_waves: bool = True) -> tuple[DisaggOverheads, float]:
    """Coordinate search of :data:`GRIDS` (two sweeps over the decode step scale, the prefill step scale, the TTFT
    overhead and, with ``fit_waves``, the client's waves), minimising TTFT + TPOT MAPE over ``rows`` (the rows of
    ``terms``)."""
    best, waves = NO_OVERHEADS, ASSUMED_WAVES
    names = ("step_scale", "prefill_scale", "ttft_ms") + (("waves",) if fit_waves else ())
    for _ in range(2):
        for name in names:
            trials = []
            for value in GRIDS[name]:
                trial = best if name == "waves" else DisaggOverheads(**{**best.__dict__, name: float(value)})
                w = float(value) if name == "waves" else waves
                trials.append((score(solve_terms(terms, trial, w), rows), trial, w))
            _, best, waves = min(trials, key=lambda t: t[0])
    return best, waves


def subset(terms, mask: np.ndarray):
    """The terms of the rows under ``mask`` (configurations shared, rows and groups cut)."""
    from dataclasses import replace
    return replace(terms, rows=terms.rows.loc[mask], groups=terms.groups[mask])


def table_by(t: pd.DataFrame, col: str) -> pd.DataFrame:
    out = []
    for key, g in list(t.groupby(col, sort=True, observed=True)) + [("all", t)]:
        out.append({col: str(key), "rows": len(g),
                    **{f"{what} {tt}": float(g[c].mean()) for tt, c in (("TTFT", "ape_ttft_pct"),
                                                                         ("TPOT", "ape_tpot_pct"))
                       for what in ("MAPE %",)},
                    "TTFT median %": float(g["ape_ttft_pct"].median()),
                    "TPOT median %": float(g["ape_tpot_pct"].median())})
    return pd.DataFrame(out)


def judged(rows: pd.DataFrame, out: pd.DataFrame) -> pd.DataFrame:
    t = rows.join(out[["pred_ttft_ms", "pred_tpot_ms", "pred_tokens_per_s_per_gpu", "fits", "error"]])
    t = t.loc[t["error"] == ""].copy()
    t["ape_ttft_pct"] = ape_pct(t["pred_ttft_ms"], t["silicon_ttft_ms"])
    t["ape_tpot_pct"] = ape_pct(t["pred_tpot_ms"], t["silicon_tpot_ms"])
    conc = [disagg_config_from_row(r)[0].concurrency for _, r in t.iterrows()]
    band = np.empty(len(t), dtype=object)
    for lo, hi, name in BANDS:
        band[(np.array(conc) > lo) & (np.array(conc) <= hi)] = name
    t["concurrency"] = pd.Categorical(band, [name for _, _, name in BANDS], ordered=True)
    t["shape"] = t["isl"].astype(str) + "/" + t["osl"].astype(str)
    t["layout"] = [f"{disagg_config_from_row(r)[0].prefill_workers}x{disagg_config_from_row(r)[0].prefill.tag} : "
                   f"{disagg_config_from_row(r)[0].decode_workers}x{disagg_config_from_row(r)[0].decode.tag}"
                   for _, r in t.iterrows()]
    return t


def judge(rows: pd.DataFrame, system: np.ndarray, answered: np.ndarray, gpus: list[str], terms_all, terms_wo: dict,
          fit_waves: bool = True) -> dict:
    """Leave-one-GPU-out and leave-one-model-out forecasts of the answered rows, with and without the fitted
    constants, and the constants fitted on every answered row."""
    ok_rows, sys_ok = rows.loc[answered], system[answered]
    cols = ["pred_ttft_ms", "pred_tpot_ms", "pred_tokens_per_s_per_gpu", "fits", "error"]
    logo = pd.DataFrame(index=ok_rows.index, columns=cols, dtype=object)
    mech_logo, lomo = logo.copy(), logo.copy()
    fitted_logo, fitted_lomo = {}, {}
    for g in gpus:  # constants fitted on the other GPUs' rows under the fold's predictors
        terms = terms_wo[g]
        train, test = sys_ok != g, sys_ok == g
        oh, w = fit_overheads(subset(terms, train), ok_rows.loc[train], fit_waves)
        fitted_logo[g] = (oh, w)
        logo.loc[test] = solve_terms(subset(terms, test), oh, w).to_numpy()
        mech_logo.loc[test] = solve_terms(subset(terms, test), NO_OVERHEADS, ASSUMED_WAVES).to_numpy()
    arch = ok_rows["arch"].to_numpy()
    terms_ok = subset(terms_all, answered)
    for a in sorted(set(arch)):  # constants fitted on the other architectures' rows, all-GPU predictors
        train, test = arch != a, arch == a
        oh, w = fit_overheads(subset(terms_ok, train), ok_rows.loc[train], fit_waves)
        fitted_lomo[a] = (oh, w)
        lomo.loc[test] = solve_terms(subset(terms_ok, test), oh, w).to_numpy()
    for frame in (logo, mech_logo, lomo):
        for c in cols[:3]:
            frame[c] = frame[c].astype(float)
    final = fit_overheads(terms_ok, ok_rows, fit_waves)
    return {"logo": judged(ok_rows, logo), "lomo": judged(ok_rows, lomo), "mech": judged(ok_rows, mech_logo),
            "fitted_logo": fitted_logo, "fitted_lomo": fitted_lomo, "final": final, "terms_ok": terms_ok,
            "ok_rows": ok_rows}


def summary(name: str, t: pd.DataFrame) -> dict:
    return {"forecast": name, "rows": len(t), "TTFT MAPE %": float(t["ape_ttft_pct"].mean()),
            "TPOT MAPE %": float(t["ape_tpot_pct"].mean()),
            "worst GPU TTFT %": float(t.groupby("system")["ape_ttft_pct"].mean().max()),
            "worst GPU TPOT %": float(t.groupby("system")["ape_tpot_pct"].mean().max())}


def fitted_table(fits: dict) -> pd.DataFrame:
    return pd.DataFrame([{"held out": k, "TTFT overhead ms": v.ttft_ms, "decode step scale": v.step_scale,
                          "prefill step scale": v.prefill_scale, "client waves": w} for k, (v, w) in fits.items()])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--predictors", type=Path, default=None, help="directory to reuse / store fitted predictors")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = disagg_rows()
    system = rows["system"].astype(str).map(lambda s: get_gpu(s).key).to_numpy()
    t1 = time.perf_counter()
    predict_all = as_family_predictor(predictors("all", args.predictors))
    caches: dict[str, dict] = {"all": {}}
    terms_all = disagg_terms(rows, predict_all, cache=caches["all"])
    answered = np.array([e == "" for e in solve_terms(terms_all)["error"]])
    gpus = sorted(set(system[answered]))
    predict_wo = {g: as_family_predictor(predictors(g, args.predictors)) for g in gpus}
    caches.update({g: {} for g in gpus})
    terms_wo = {g: disagg_terms(rows.loc[answered], predict_wo[g], cache=caches[g]) for g in gpus}
    terms_s = time.perf_counter() - t1
    res = judge(rows, system, answered, gpus, terms_all, terms_wo)
    # design choices, the same folds: the client's waves assumed (10), and one prompt per prefill step and rank
    ten = judge(rows, system, answered, gpus, terms_all, terms_wo, fit_waves=False)
    one = judge(rows, system, answered, gpus, disagg_terms(rows, predict_all, cache=caches["all"], prefill_tokens=1),
                {g: disagg_terms(rows.loc[answered], predict_wo[g], cache=caches[g], prefill_tokens=1)
                 for g in gpus}, fit_waves=False)
    t_logo, t_lomo, t_mech, (final, final_waves) = res["logo"], res["lomo"], res["mech"], res["final"]
    ok_rows, terms_ok = res["ok_rows"], res["terms_ok"]
    with_final = solve_terms(terms_ok, final, final_waves)
    steady = solve_terms(terms_ok, final, waves=np.inf)

    errors = solve_terms(terms_all)["error"]
    reasons = errors.loc[errors != ""].str.slice(0, 100).value_counts().rename_axis("reason").reset_index(name="rows")
    meas = set(zip(ok_rows["silicon_ttft_ms"].round(6), ok_rows["silicon_tpot_ms"].round(6), strict=True))
    left = rows.loc[~answered]
    repeats = sum((a, b) in meas for a, b in zip(left["silicon_ttft_ms"].round(6), left["silicon_tpot_ms"].round(6),
                                                 strict=True))
    design = pd.DataFrame([
        summary(f"fitted constants and client waves, leave one GPU out (token budget {PREFILL_TOKEN_BUDGET})",
                t_logo),
        summary("fitted constants and client waves, leave one model out", t_lomo),
        summary(f"mechanism only (no fitted constant, {ASSUMED_WAVES:g} waves), leave one GPU out", t_mech),
        summary(f"client waves assumed {ASSUMED_WAVES:g}: fitted constants, leave one GPU out", ten["logo"]),
        summary(f"client waves assumed {ASSUMED_WAVES:g}: fitted constants, leave one model out", ten["lomo"]),
        summary("one prompt per prefill step and rank: fitted constants, leave one GPU out", one["logo"]),
        summary("one prompt per prefill step and rank: fitted constants, leave one model out", one["lomo"]),
        summary("one prompt per prefill step and rank: mechanism only, leave one GPU out", one["mech"]),
        {"forecast": "in-sample: all-GPU predictors, constants fitted on every row (not a judged figure)",
         "rows": int(answered.sum()), "TTFT MAPE %": mape(with_final["pred_ttft_ms"], ok_rows["silicon_ttft_ms"]),
         "TPOT MAPE %": mape(with_final["pred_tpot_ms"], ok_rows["silicon_tpot_ms"])},
        {"forecast": "in-sample, without the client's first wave (steady state only)", "rows": int(answered.sum()),
         "TTFT MAPE %": mape(steady["pred_ttft_ms"], ok_rows["silicon_ttft_ms"]),
         "TPOT MAPE %": mape(steady["pred_tpot_ms"], ok_rows["silicon_tpot_ms"])},
    ])
    ratio = t_logo["silicon_ttft_ms"].to_numpy() / t_logo["pred_ttft_ms"].to_numpy(float)
    met = (t_logo["ape_ttft_pct"].mean() <= TARGET_TTFT, t_logo["ape_tpot_pct"].mean() <= TARGET_TPOT)
    lines = [
        "# Disaggregated serving: TTFT and TPOT of the public `mode=disagg` rows", "",
        "Command: `python benchmarks/disagg.py` (forecaster: `tilecast.serving.disagg`; kernel predictors xgboost with "
        f"the registry defaults, spec sheet only, fit as `benchmarks/serving.py` fits them; step terms computed in "
        f"{terms_s:.0f} s; prefill token budget {PREFILL_TOKEN_BUDGET}).", "",
        f"{int(answered.sum())} of {len(rows)} disaggregated rows answered; GPUs with answered rows: "
        f"{', '.join(gpus)} (no B300 row gives its worker counts). Targets (leave one GPU out): TTFT MAPE <= "
        f"{TARGET_TTFT:g}% ({'met' if met[0] else 'not met'}), TPOT <= {TARGET_TPOT:g}% "
        f"({'met' if met[1] else 'not met'}).", "",
        "## Summary", "",
        "The first row is the judged figure. The token budget was kept over one prompt per step on mechanism grounds "
        "before the comparison; fitting the client's waves (requests per client slot in a run) was added after "
        f"in-sample figures favoured 3-5 waves over the assumed {ASSUMED_WAVES:g}: three candidate designs, all "
        "shown, the fitted-waves one reported.", "", md(design), "",
        "## Leave one GPU out, by GPU", "", md(table_by(t_logo, "system")), "",
        "## Leave one GPU out, by model", "", md(table_by(t_logo, "model")), "",
        "## Leave one GPU out, by backend", "", md(table_by(t_logo, "backend")), "",
        "## Leave one GPU out, by concurrency", "", md(table_by(t_logo, "concurrency")), "",
        "## Leave one GPU out, by isl / osl", "", md(table_by(t_logo, "shape")), "",
        "## Leave one GPU out, by layout (prefill workers x layout : decode workers x layout)", "",
        md(table_by(t_logo, "layout")), "",
        "## Leave one model out, by model (DeepSeek-V3 and R1: one architecture, one group)", "",
        md(table_by(t_lomo, "arch")), "",
        "## Leave one model out, by GPU", "", md(table_by(t_lomo, "system")), "",
        "## Mechanism only (no fitted constant), leave one GPU out, by GPU", "", md(table_by(t_mech, "system")), "",
        "## Fitted constants", "", "Leave one GPU out (fitted on the other GPU's rows):", "",
        md(fitted_table(res["fitted_logo"])), "", "Leave one model out:", "", md(fitted_table(res["fitted_lomo"])), "",
        f"On every answered row (`DEFAULT_OVERHEADS`, `CLIENT_WAVES`): TTFT overhead {final.ttft_ms:g} ms, decode "
        f"step scale {final.step_scale:g}, prefill step scale {final.prefill_scale:g}, client waves "
        f"{final_waves:g}.", "",
        "## What is left out", "",
        f"- Measured / forecast TTFT (leave one GPU out): median {np.median(ratio):.2f}; {int((ratio > 5).sum())} "
        "rows above 5x (among them seconds of TTFT at concurrency 3-7: no queueing mechanism gives them; each costs "
        "at most 100% APE), " f"{int((ratio < 0.5).sum())} rows below 0.5x (a prefill pool forecast saturated).",
        f"- Unanswered rows repeating an answered row's measured TTFT and TPOT exactly: {repeats} of "
        f"{int((~answered).sum())} (the same run, its layout spelled from the run's name).", "",
        "## Rows not answered", "", md(reasons), "",
        f"Wall time {time.perf_counter() - t0:.0f} s.", ""]
    OUT.write_text("\n".join(lines))
    t_logo.to_csv(OUT.with_suffix(".csv"), index=False)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
