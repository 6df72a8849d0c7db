"""Serving forecasts of the public mixture-of-experts aggregated rows, leave-one-GPU-out: the "Serving" section of
``benchmarks/moe.md`` (docs/method.md §21).

    python benchmarks/moe_serving.py            # about 10 minutes on 2 cores
    python benchmarks/moe_serving.py --quick    # 20,000 rows a family, 60 rounds: a smoke run

- Rows: every ``mode=agg`` row of AIConfigurator's ``serving.csv`` (``data/aiconfigurator/serving``) whose model is
  not one of the dense ones (Llama-3.1, Qwen3-32B: ``benchmarks/serving.md``); rows the forecaster refuses are
  counted by reason.
- Leave one GPU out: the rows of each GPU are forecast with every precision family's predictor (xgboost, registry
  defaults, spec sheet only) fitted without that GPU's kernel rows, and with the DeepEP closed form
  (:func:`tilecast.forecast.a2a.fit_a2a`) refitted without its DeepEP rows. Nothing is fitted on serving rows, so
  there is no leave-one-model-out fit to report.
- The forecasts are ``jobs/evaluate.py serving=``'s (:func:`tilecast.evaluation.serving.evaluate_serving`: each row
  as its engine runs it, step costs under the benchmark client's steady state), one call per left-out GPU.
"""

from __future__ import annotations

import argparse
import re
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from tilecast.data import load_aiconfigurator
from tilecast.errors import UserError
from tilecast.evaluation.serving import evaluate_serving, serve_row_workload
from tilecast.evaluation.tables import markdown
from tilecast.forecast import a2a
from tilecast.predictors import fit_predictor
from tilecast.predictors.rows import tensor_rows
from tilecast.registry.forecaster import as_family_predictor
from tilecast.specs import SpecError, UnknownSpecError, get_gpu, get_model
from tilecast.tiles.ops import PRECISION_FAMILIES

OUT = Path(__file__).with_name("moe.md")
SECTION = "## Serving"
#: the dense models of the public rows (benchmarks/serving.md covers them)
DENSE_FAMILIES = ("llama",)
#: NVIDIA's AIConfigurator with each GPU's own measured tables on these rows (the issue's reference), MAPE %
REFERENCE = "TPOT 25-41%, TTFT 50-64%"
CONCURRENCY_BANDS = (0, 4, 16, 64, 256, 1024, np.inf)
#: the per-row table written beside moe.md
CSV_COLUMNS = ("id", "model_path", "system", "backend", "precision", "isl", "osl", "batch_size", "tp_size",
               "attention_dp_size", "moe_tp_size", "moe_ep_size", "layout", "silicon_ttft_ms", "silicon_tpot_ms",
               "pred_ttft_ms", "pred_tpot_ms", "fits", "engine", "error", "note", "ape_ttft_pct", "ape_tpot_pct")


def moe_agg_rows() -> pd.DataFrame:
    rows = load_aiconfigurator("serving")
    rows = rows.loc[rows["mode"].astype(str) == "agg"]
    keep = []
    for path in rows["model_path"].astype(str):
        try:
            keep.append(get_model(path).family not in DENSE_FAMILIES)
        except (SpecError, UnknownSpecError):
            keep.append(True)  # an id the catalog does not know: a refusal to count
    return rows.loc[keep].reset_index(drop=True)


@contextmanager
def a2a_constants(constants: dict) -> None:
    """The DeepEP closed form's constants set to ``constants`` while inside (the module's table restored after)."""
    saved = dict(a2a.A2A_CONSTANTS)
    a2a.A2A_CONSTANTS.clear()
    a2a.A2A_CONSTANTS.update(constants)
    try:
        yield
    finally:
        a2a.A2A_CONSTANTS.clear()
        a2a.A2A_CONSTANTS.update(saved)


def fit_without(gpu_key: str, quick: bool) -> tuple:
    """Every precision family's predictor and the DeepEP constants, fitted without ``gpu_key``'s rows."""
    device = get_gpu(gpu_key).device_name
    params = {"rounds": 60} if quick else {}
    predictors = {}
    for family in PRECISION_FAMILIES:
        rows = tensor_rows(family)
        rows = rows.loc[rows["Device"].astype(str) != device]
        if quick and len(rows) > 20000:
            rows = rows.sample(n=20000, random_state=0)
        predictors[family] = fit_predictor("xgboost", family, rows, **params)
    deepep = a2a.deepep_measured_rows()
    constants = a2a.fit_a2a(deepep.loc[deepep["Device"].astype(str) != device].reset_index(drop=True))
    return as_family_predictor(predictors), constants


def forecast_layout(row: pd.Series) -> str:
    """The layout a row is forecast on (its tag), or "-" where the row is refused."""
    try:
        sw = serve_row_workload(row)[0]
    except (SpecError, UnknownSpecError, UserError, ValueError, KeyError):
        return "-"
    return sw.layout.tag if sw.layout is not None else f"tp{sw.tp}"


def band(c: pd.Series) -> pd.Series:
    labels = [f"{int(lo) + 1}-{int(hi)}" if np.isfinite(hi) else f"> {int(lo)}"
              for lo, hi in zip(CONCURRENCY_BANDS[:-1], CONCURRENCY_BANDS[1:], strict=True)]
    return pd.cut(c, CONCURRENCY_BANDS, labels=labels).astype(str)


def layout_spelled(t: pd.DataFrame) -> pd.Series:
    """The layout as the row spells it: ``tp / attention dp / moe_tp / moe_ep``."""
    def n(col: str) -> pd.Series:
        return pd.to_numeric(t[col], errors="coerce").fillna(0).astype(int).astype(str)
    return "tp" + n("tp_size") + " adp" + n("attention_dp_size") + " mtp" + n("moe_tp_size") + " ep" + n("moe_ep_size")


def by(t: pd.DataFrame, col: str) -> pd.DataFrame:
    ok = t.loc[t["error"] == ""]
    parts = [(str(k), g) for k, g in ok.groupby(col)] + [("all", ok)]
    return pd.DataFrame([{col: k, "rows": len(g), "TPOT MAPE %": g["ape_tpot_pct"].mean(),
                          "TPOT median %": g["ape_tpot_pct"].median(),
                          "TTFT MAPE %": g["ape_ttft_pct"].mean(), "TTFT median %": g["ape_ttft_pct"].median(),
                          "median TPOT forecast / measured": float(np.median(g["pred_tpot_ms"] / g["silicon_tpot_ms"]))}
                         for k, g in parts])


def section(t: pd.DataFrame, quick: bool, seconds: float) -> list[str]:
    ok = t["error"] == ""
    refused = t.loc[~ok, "error"].map(lambda e: re.sub(r"\d+", "<n>", str(e))[:110]).value_counts()
    lines = [SECTION, "",
             f"Command: `python benchmarks/moe_serving.py{' --quick' if quick else ''}` ({seconds:.0f} s). Rows: every "
             "aggregated (`mode=agg`) row of the public `serving.csv` whose model is a mixture of experts. Each GPU's "
             "rows are forecast with the kernel predictors (xgboost, registry defaults, spec sheet only) and the "
             "DeepEP constants fitted without that GPU (leave one GPU out); nothing is fitted on serving rows, so "
             "there is no leave-one-model-out figure (the engines' kernel factors, all-reduce and host costs are "
             "main's, docs/method.md §20 and §23). Harness: `jobs/evaluate.py serving=` (each row as its engine "
             "runs it: step costs under the benchmark client's steady state, docs/method.md §23).", "",
             f"**{int(ok.sum())} of {len(t)} rows answered ({100 * ok.mean():.1f}%)**; TPOT MAPE "
             f"**{t.loc[ok, 'ape_tpot_pct'].mean():.1f}%**, TTFT MAPE **{t.loc[ok, 'ape_ttft_pct'].mean():.1f}%** "
             f"(targets: >= 90% answered, TPOT <= 15%, TTFT <= 25%; NVIDIA's AIConfigurator with each GPU's own "
             f"tables: {REFERENCE}).", ""]
    for title, col in (("By GPU (left out)", "system"), ("By model", "model"), ("By backend", "backend"),
                       ("By precision", "precision"), ("By layout (as the row spells it)", "layout_spelled"),
                       ("By layout (as forecast)", "layout"), ("By concurrency", "concurrency band"),
                       ("By isl / osl", "shape")):
        lines += [f"### {title}", "", markdown(by(t, col), index=False), ""]
    lines += ["### Rows not answered", "",
              markdown(refused.rename_axis("reason").reset_index(name="rows"), index=False) if len(refused)
              else "None.", ""]
    return lines


def write(lines: list[str]) -> None:
    """Replace the Serving section of ``moe.md`` (or append it), keeping the kernel sections."""
    text = OUT.read_text() if OUT.exists() else ""
    head = text.split(f"\n{SECTION}\n")[0].rstrip("\n")
    OUT.write_text(head + "\n\n" + "\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = moe_agg_rows()
    parts = []
    for gpu_key in sorted(rows["system"].astype(str).unique()):
        predict, constants = fit_without(gpu_key, args.quick)
        own = rows.loc[rows["system"].astype(str) == gpu_key]
        with a2a_constants(constants):
            got = evaluate_serving(own, predict)
        parts.append(got.assign(layout=[forecast_layout(r) for _, r in own.iterrows()]))
        print(f"{gpu_key}: {len(own)} rows, {time.perf_counter() - t0:.0f} s", flush=True)
    t = pd.concat(parts).sort_index()
    t["error"] = t["error"].fillna("").astype(str)
    t["model"] = t["model_path"].astype(str).str.split("/").str[-1]
    t["concurrency band"] = band(pd.to_numeric(t["batch_size"]))
    t["shape"] = t["isl"].astype(int).astype(str) + " / " + t["osl"].astype(int).astype(str)
    t["layout_spelled"] = layout_spelled(t)
    write(section(t, args.quick, time.perf_counter() - t0))
    t[[c for c in CSV_COLUMNS if c in t]].to_csv(OUT.with_name("moe_serving.csv"), index=False)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
