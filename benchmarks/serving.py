"""Serving benchmark: TTFT / TPOT forecasts against every public dense aggregated row of AIConfigurator's serving runs.

    python benchmarks/serving.py            # -> benchmarks/serving.md (a few minutes on 2 cores)
    python benchmarks/serving.py --quick    # smaller fits, a smoke run

The kernel predictors are fit here exactly as ``python jobs/train.py`` fits them (xgboost, registry defaults) on
the shipped training rows, spec sheet only, no calibration. The rows are Llama-3.1-70B (fp8, fp4) on B200 under vLLM
and TRT-LLM and Qwen3-32B on GB200 under TRT-LLM; each is forecast as its engine runs it
(:mod:`tilecast.serving`). The engines' host costs are fitted on these rows (:mod:`tilecast.serving.overhead_fit`):
the tables report them leave-one-GPU-out and leave-one-model-out (each row forecast with the terms fitted without its
GPU / model), and the fit on every row, which ``conf/engine/*.yaml`` ship.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from tilecast.data import load_aiconfigurator
from tilecast.evaluation.serving import evaluate_serving, plan_serving, with_forecasts
from tilecast.evaluation.tables import markdown
from tilecast.predictors import fit_predictor, training_rows
from tilecast.registry.forecaster import as_family_predictor
from tilecast.serving.overhead_fit import _apply, fit_overheads, leave_one_out, measured
from tilecast.serving.policy import engine_policy
from tilecast.specs import get_model

OUT = Path(__file__).with_name("serving.md")
#: families a half-precision llama forward runs through
SERVE_FAMILIES = ("tc_gemm", "attn_prefill", "attn_decode", "vec_half")
DENSE = ("llama31_70b", "llama31_8b", "qwen3_32b")
BANDS = [(0, 8, "1-7"), (8, 32, "8-31"), (32, 128, "32-127"), (128, 10**6, ">= 128")]


def md(df: pd.DataFrame) -> str:
    return markdown(df, index=False)


def dense_rows() -> pd.DataFrame:
    rows = load_aiconfigurator("serving")
    keys = []
    for path in rows["model_path"].astype(str):
        try:
            keys.append(get_model(path).key)
        except Exception:  # noqa: BLE001 - MoE and unknown ids are not dense rows
            keys.append(None)
    rows = rows.assign(model_key=keys).loc[lambda d: d["model_key"].isin(DENSE) & (d["mode"] == "agg")]
    return rows.reset_index(drop=True)


def band(c: pd.Series) -> pd.Series:
    out = pd.Series("", index=c.index)
    for lo, hi, name in BANDS:
        out[(c >= lo) & (c < hi)] = name
    return out


def by(table: pd.DataFrame, col: str) -> pd.DataFrame:
    ok = table.loc[table["error"].fillna("") == ""]
    out = [{col: str(k), "rows": len(g), "TTFT MAPE %": float(g["ape_ttft_pct"].mean()),
            "TTFT median %": float(g["ape_ttft_pct"].median()), "TPOT MAPE %": float(g["ape_tpot_pct"].mean()),
            "TPOT median %": float(g["ape_tpot_pct"].median())} for k, g in ok.groupby(col)]
    return pd.DataFrame(out)


def total(table: pd.DataFrame, name: str) -> dict:
    ok = table.loc[table["error"].fillna("") == ""]
    return {"forecast": name, "rows": len(ok), "TTFT MAPE %": float(ok["ape_ttft_pct"].mean()),
            "TPOT MAPE %": float(ok["ape_tpot_pct"].mean()),
            **{f"{b} TTFT / TPOT %": f"{g['ape_ttft_pct'].mean():.1f} / {g['ape_tpot_pct'].mean():.1f}"
               for b, g in ok.groupby("backend")}}


def evaluate(rows: pd.DataFrame, predict, policies: dict) -> tuple[dict, dict]:
    """In-sample, leave-one-GPU-out and leave-one-model-out tables, and the fits."""
    plan = plan_serving(rows, predict, policies)
    ttft_m, tpot_m = measured(plan, rows["silicon_ttft_ms"].to_numpy(float), rows["silicon_tpot_ms"].to_numpy(float))
    first = pd.Series(np.arange(len(rows))).groupby(plan.groups).first().to_numpy()
    gpu = rows["system"].to_numpy(object)[first]
    model = rows["model_key"].to_numpy(object)[first]
    fit = fit_overheads(plan, ttft_m, tpot_m, np.ones(len(first), bool))
    tables = {"none": with_forecasts(rows, plan, *plan.steady(_apply({"*": dict.fromkeys(fit["*"], 0.0)}))),
              "all": with_forecasts(rows, plan, *plan.steady(_apply(fit)))}
    fits = {"all": fit}
    for name, key in (("logo", gpu), ("lomo", model)):
        t1, t2, fits[name] = leave_one_out(plan, ttft_m, tpot_m, key)
        tables[name] = with_forecasts(rows, plan, t1, t2)
    return tables, fits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    params = {"rounds": 60} if args.quick else {}
    predictors = {}
    for fam in SERVE_FAMILIES:
        rows = training_rows(fam)
        if args.quick and len(rows) > 30000:
            rows = rows.sample(n=30000, random_state=0)
        predictors[fam] = fit_predictor("xgboost", fam, rows, **params)
    fit_s = time.perf_counter() - t0
    predict = as_family_predictor(predictors)
    rows = dense_rows()
    rows["band"] = band(rows["batch_size"].astype(float))
    rows["shape"] = rows["isl"].astype(int).astype(str) + "/" + rows["osl"].astype(int).astype(str)
    shipped = {e: engine_policy(e) for e in ("vllm", "sglang", "trtllm")}
    tables, fits = evaluate(rows, predict, shipped)
    factors_on = {**shipped, "trtllm": replace(shipped["trtllm"], kernel_factors=True)}
    on_tables, _ = evaluate(rows, predict, factors_on)
    logo = tables["logo"]

    # evaluation speed: 1,000 rows (the public rows at other concurrencies), the shared vectorised path
    many = pd.concat([rows.assign(batch_size=rows["batch_size"] * k) for k in (1, 2, 3, 5)], ignore_index=True)
    many = many.iloc[:1000]
    t1 = time.perf_counter()
    evaluate_serving(many, predict)
    eval_s = time.perf_counter() - t1

    errors = logo.loc[logo["error"].fillna("") != "", "error"].str.slice(0, 90).value_counts()
    notes = logo["note"].dropna().value_counts()
    fit_rows = [{"fold": f"{name}: without {held}" if name != "all" else "every row", "engine": e,
                 **{k: round(v, 4) for k, v in terms.items()}}
                for name, per in fits.items() for held, fold in ((per and per.items()) if name != "all"
                                                                 else [("", per)])
                for e, terms in fold.items()]
    summary = pd.DataFrame([
        total(tables["none"], "mechanisms only (no host costs)"),
        total(tables["all"], "host costs fitted on every row (what ships)"),
        total(logo, "leave one GPU out"),
        total(tables["lomo"], "leave one model out"),
        total(on_tables["logo"], "leave one GPU out, TRT-LLM kernel factors on"),
        total(on_tables["lomo"], "leave one model out, TRT-LLM kernel factors on"),
    ])
    lines = ["# Serving benchmark: TTFT and TPOT of the public dense aggregated rows", "",
             f"Command: `python benchmarks/serving.py{' --quick' if args.quick else ''}` "
             f"(kernel predictors fit in {fit_s:.0f} s, spec sheet only; forecaster: `tilecast.forecast.serve` on "
             "`tilecast.serving`: engine step costs, the benchmark client's steady state).", "",
             f"{int((logo['error'] == '').sum())} of {len(logo)} dense aggregated rows answered "
             "(targets, leave one GPU out: TTFT MAPE <= 15%, TPOT <= 8%; no concurrency band above 25% TTFT).", "",
             "Before this model (the old harness, b200 fp8 rows only): TTFT MAPE 60.1%, TPOT 16.7%.", "",
             "## Overall", "", md(summary), "",
             "## Leave one GPU out, by GPU", "", md(by(logo, "system")), "",
             "## Leave one GPU out, by backend", "", md(by(logo, "backend")), "",
             "## Leave one GPU out, by concurrency band", "", md(by(logo, "band")), "",
             "## Leave one GPU out, by concurrency", "", md(by(logo, "batch_size")), "",
             "## Leave one GPU out, by isl / osl", "", md(by(logo, "shape")), "",
             "## Leave one GPU out, by tensor parallelism", "", md(by(logo, "tp_size")), "",
             "## Leave one GPU out, by precision", "", md(by(logo.assign(precision=logo["precision"].fillna("none")),
                                                               "precision")), "",
             "## Leave one model out, by backend", "", md(by(tables["lomo"], "backend")), "",
             "## Leave one model out, by concurrency band", "", md(by(tables["lomo"], "band")), "",
             "## Fitted host costs (ms) per fold", "",
             "A fold whose training rows are fewer than `MIN_ROWS` configurations takes the round `PRIOR` figures "
             "of `tilecast.serving.overhead_fit`.", "", md(pd.DataFrame(fit_rows)), "",
             "## Rows not answered", "",
             md(errors.rename_axis("reason").reset_index(name="rows")) if len(errors) else "none", "",
             "## Notes on answered rows", "",
             md(notes.rename_axis("note").reset_index(name="rows")) if len(notes) else "none", "",
             f"Evaluation speed: `evaluate_serving` on 1,000 rows (these rows at 1, 2, 3 and 5 times their "
             f"concurrency) took {eval_s:.1f} s.", "",
             f"Wall time {time.perf_counter() - t0:.0f} s.", ""]
    OUT.write_text("\n".join(lines))
    logo.to_csv(OUT.with_suffix(".csv"), index=False)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
