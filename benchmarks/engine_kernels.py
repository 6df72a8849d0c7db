"""Engine kernels benchmark: how much SGLang and TRT-LLM change a kernel's time against vLLM, how well the engine
kernel factors forecast it on a GPU left out, and the engines' own all-reduce against the NCCL model.

    python benchmarks/engine_kernels.py                 # -> benchmarks/engine_kernels.md (~2-5 min on 2 cores)
    python benchmarks/engine_kernels.py --no-predictors # without section 3 (fits the GEMM / attention predictors)

Everything is read from the shipped tables (``data/aiconfigurator_engines`` against ``data/aiconfigurator``).
Section 2 prices an engine's kernel as vLLM's *measured* time of the same shape times the factor, which isolates
the engine effect from the predictors' own error; section 3 chains it with the project's predictors (xgboost,
registry defaults, fitted here on a sample of the vLLM rows of the other GPUs). Leave one GPU out: predictors
and factors are fitted on the other GPUs and judged on the left-out one's rows, every GPU weighing the same.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from tilecast.data import load_aiconfigurator, load_aiconfigurator_engines
from tilecast.evaluation.tables import markdown
from tilecast.forecast.comm import CommModel
from tilecast.predictors import fit_predictor
from tilecast.predictors.rows import tensor_rows
from tilecast.serving.engine_allreduce import (
    ALLREDUCE_PARAMS,
    EngineAllReduce,
    allreduce_rows,
    fit_allreduce,
    takes,
)
from tilecast.serving.engine_kernel_fit import (
    TABLE_FAMILIES,
    VLLM_TABLES,
    default_kernels,
    fit_factor_table,
    matched_kernels,
    with_cells,
)
from tilecast.serving.engine_kernels import FactorTable, engine_family_predictor
from tilecast.specs import get_gpu

OUT = Path(__file__).with_name("engine_kernels.md")
COMMAND = "python benchmarks/engine_kernels.py"
GROUP = ["engine", "family", "variant"]


def md(df: pd.DataFrame) -> str:
    return markdown(df, index=False)


def load_cells() -> tuple[pd.DataFrame, pd.DataFrame]:
    """All matched rows (every kernel library) and the default kernels' rows with their cells."""
    engines = {t: load_aiconfigurator_engines(t) for t in TABLE_FAMILIES}
    vllm = {v: load_aiconfigurator(v) for v in VLLM_TABLES.values()}
    matched = pd.concat([matched_kernels(t, engines[t], vllm[VLLM_TABLES[t]]) for t in TABLE_FAMILIES],
                        ignore_index=True)
    return matched, with_cells(default_kernels(matched))


def ratio_table(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Distribution of engine / vLLM per group: rows, GPUs, p10 / median / p90 and the share within 10%."""
    r = frame["engine_ms"] / frame["vllm_ms"]
    g = frame.assign(r=r).groupby(keys, sort=True)
    out = g["r"].quantile([0.1, 0.5, 0.9]).unstack()
    out.columns = ["p10", "median", "p90"]
    out.insert(0, "GPUs", g["system"].nunique())
    out.insert(0, "rows", g.size())
    out["within 10%"] = g["r"].apply(lambda x: f"{100 * float(np.mean(np.abs(x - 1) <= 0.1)):.0f}%")
    return out.reset_index().round(3)


# ---- candidate factor models: train cells -> log factor per test row --------------------------------------------
def _identity(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    return np.zeros(len(test))


def _cell(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """One factor per (engine, family, variant, library class): the median over GPUs of each GPU's median."""
    table = FactorTable(fit_factor_table(train.assign(regime="*")))
    return table.log_factors_frame(test.assign(regime="*"))


def _library(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """The shipped form: one factor per cell and shape regime, the cell's median for a regime not measured."""
    return FactorTable(fit_factor_table(train)).log_factors_frame(test)


def _generation(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """As ``library``, with cells by SM generation (sm89 and sm120 apart for attention too)."""
    return _library(train.assign(library=train["generation"]), test.assign(library=test["generation"]))


def _gemm_merged(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """As ``library``, with sm89 and sm120 one class for GEMMs too."""
    def merge(f: pd.DataFrame) -> pd.DataFrame:
        return f.assign(library=f["library"].replace({"sm89": "sm89+sm120", "sm120": "sm89+sm120"}))
    return _library(merge(train), merge(test))


def _pooled(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """As ``library``; a GPU whose library class no training GPU shares takes the median over the training
    classes instead of factor 1."""
    own = FactorTable(fit_factor_table(train)).log_factors_frame(test, default=np.nan)
    pooled = FactorTable(fit_factor_table(train.assign(library="any"))).log_factors_frame(test.assign(library="any"))
    return np.where(np.isnan(own), pooled, own)


CANDIDATES: dict[str, Callable[[pd.DataFrame, pd.DataFrame], np.ndarray]] = {
    "identity": _identity, "cell": _cell, "generation": _generation, "library": _library,
    "gemm_merged": _gemm_merged, "pooled": _pooled,
}
SHIPPED = "library"


def logo(cells: pd.DataFrame) -> pd.DataFrame:
    """MAPE % of engine kernel times per (candidate, engine, family, variant, left-out GPU)."""
    out = []
    for gpu in sorted(cells["system"].unique()):
        train, test = cells[cells["system"] != gpu], cells[cells["system"] == gpu]
        for name, fn in CANDIDATES.items():
            log_f = fn(train, test)
            ape = np.abs(np.exp(log_f - test["log_ratio"].to_numpy()) - 1.0) * 100.0
            part = test[GROUP].assign(ape=ape)
            for key, g in part.groupby(GROUP, sort=True):
                out.append({"candidate": name, **dict(zip(GROUP, key, strict=True)), "gpu": gpu,
                            "rows": len(g), "mape": float(g["ape"].mean())})
    return pd.DataFrame(out)


def summarise(res: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per ``keys`` and candidate: mean over left-out GPUs of the GPU's MAPE, and the worst GPU."""
    per_gpu = res.assign(w=res["mape"] * res["rows"]).groupby(["candidate", *keys, "gpu"], sort=True).agg(
        w=("w", "sum"), rows=("rows", "sum"))
    per_gpu["mape"] = per_gpu["w"] / per_gpu["rows"]
    rows = []
    for key, g in per_gpu.reset_index().groupby(keys, sort=True):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row["GPUs"] = g["gpu"].nunique()
        for cand in CANDIDATES:
            c = g[g["candidate"] == cand]
            worst = c.loc[c["mape"].idxmax()]
            row[f"{cand} mean"] = round(float(c["mape"].mean()), 1)
            row[f"{cand} worst"] = f"{worst['mape']:.1f} ({worst['gpu']})"
        rows.append(row)
    return pd.DataFrame(rows)


def worse_than_identity(res: pd.DataFrame, candidate: str, margin_pct: float = 0.5) -> pd.DataFrame:
    """(engine, family, variant, GPU) where ``candidate`` is worse than the identity by more than ``margin_pct``."""
    piv = res.pivot_table(index=[*GROUP, "gpu"], columns="candidate", values="mape").reset_index()
    piv["change"] = piv[candidate] - piv["identity"]
    bad = piv[piv["change"] > margin_pct]
    return bad[[*GROUP, "gpu", "identity", candidate, "change"]].round(1)


# ---- with the project's predictors -------------------------------------------------------------------------
#: vLLM rows per family the predictors of section 3 are fitted on (a seeded sample; the full fits are
#: ``benchmarks/precision.md``'s)
PREDICTOR_SAMPLE = 40000


def predictor_logo(cells: pd.DataFrame) -> pd.DataFrame:
    """MAPE % of engine kernel times per (engine, family, left-out GPU): the predictor fitted on the other GPUs'
    vLLM rows alone (``identity``) and wrapped by :func:`engine_family_predictor` with the factors fitted on the
    other GPUs (``library``)."""
    out = []
    for family in ("tc_gemm", "attn_prefill", "attn_decode"):
        vllm = tensor_rows(family)
        vllm = vllm.sample(n=min(len(vllm), PREDICTOR_SAMPLE), random_state=0)
        mine = cells[cells["family"] == family]
        for gpu in sorted(mine["system"].unique()):
            device = get_gpu(gpu).device_name
            model = fit_predictor("xgboost", family, vllm[vllm["Device"] != device])
            factors = FactorTable(fit_factor_table(cells[cells["system"] != gpu]))
            test = mine[mine["system"] == gpu]
            if family != "tc_gemm":  # the workload's attention is bf16; fp8 FMHA is the engine's choice
                test = test.assign(dtype="bf16")
            for (engine, variant), part in test.groupby(["engine", "variant"], sort=True):
                scaling = "block" if variant == "fp8_block" else "tensor"
                rows = part.assign(Device=device)
                base = model.predict_ms(rows, None)
                wrapped = engine_family_predictor(lambda f, r, g, m=model: m.predict_ms(r, g), str(engine),
                                                  factors=factors, fp8_scaling=scaling)(family, rows, None)
                truth = part["engine_ms"].to_numpy()
                for name, pred in (("identity", base), ("library", wrapped)):
                    out.append({"candidate": name, "engine": engine, "family": family, "variant": variant,
                                "gpu": gpu, "rows": len(part), "mape": float(np.mean(np.abs(pred / truth - 1)) * 100)})
            print(f"  {family} without {gpu}", flush=True)
    return pd.DataFrame(out)


def summarise_two(res: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """As :func:`summarise` for the two candidates of :func:`predictor_logo`."""
    per_gpu = res.assign(w=res["mape"] * res["rows"]).groupby(["candidate", *keys, "gpu"], sort=True).agg(
        w=("w", "sum"), rows=("rows", "sum"))
    per_gpu["mape"] = per_gpu["w"] / per_gpu["rows"]
    rows = []
    for key, g in per_gpu.reset_index().groupby(keys, sort=True):
        row = dict(zip(keys, key, strict=True))
        for cand in ("identity", "library"):
            c = g[g["candidate"] == cand]
            worst = c.loc[c["mape"].idxmax()]
            row[f"predictor{' x factor' if cand == 'library' else ''} mean"] = round(float(c["mape"].mean()), 1)
            row[f"predictor{' x factor' if cand == 'library' else ''} worst"] = f"{worst['mape']:.1f} ({worst['gpu']})"
        rows.append(row)
    return pd.DataFrame(rows)


# ---- all-reduce ------------------------------------------------------------------------------------------------
def allreduce_logo(table: pd.DataFrame, nccl: pd.DataFrame) -> pd.DataFrame:
    """Per left-out GPU and implementation: MAPE % of the engine model (fitted on the other GPUs), the NCCL model
    (the project's default: ring, no floor) and NCCL with its floor, over all rows and split by who reduces the
    message in the engine model (its own kernel or NCCL)."""
    rows = allreduce_rows(table).dropna(subset=["implementation"])
    out = []
    for gpu_name in sorted(rows["system"].unique()):
        params = fit_allreduce(table[table["system"] != gpu_name], nccl[nccl["system"] != gpu_name])
        gpu = get_gpu(gpu_name)
        for impl, part in rows[rows["system"] == gpu_name].groupby("implementation", sort=True):
            nbytes, p, ms = part["nbytes"].to_numpy(), part["p"].to_numpy(), part["ms"].to_numpy()
            kernel = EngineAllReduce(str(impl), params[str(impl)])
            preds = {"engine": CommModel(floors=True, allreduce_kernel=kernel).allreduce_ms(nbytes, gpu, p),
                     "nccl": CommModel().allreduce_ms(nbytes, gpu, p),
                     "nccl+floor": CommModel(floors=True).allreduce_ms(nbytes, gpu, p)}
            own = takes(nbytes, gpu, p, params[str(impl)].max_bytes)
            for model, pred in preds.items():
                ape = np.abs(pred / ms - 1.0) * 100.0
                for where, mask in (("all", np.ones(len(ms), bool)), ("own kernel", own), ("to NCCL", ~own)):
                    if mask.any():
                        out.append({"implementation": impl, "gpu": gpu_name, "model": model, "rows": where,
                                    "n": int(mask.sum()), "mape": float(ape[mask].mean())})
    return pd.DataFrame(out)


def allreduce_summary(res: pd.DataFrame, rows: str) -> pd.DataFrame:
    part = res[res["rows"] == rows]
    out = []
    for impl, g in part.groupby("implementation", sort=True):
        row = {"implementation": impl, "GPUs": g["gpu"].nunique(), "rows": int(g[g["model"] == "engine"]["n"].sum())}
        for model in ("engine", "nccl", "nccl+floor"):
            m = g[g["model"] == model]
            worst = m.loc[m["mape"].idxmax()]
            row[f"{model} mean"] = round(float(m["mape"].mean()), 1)
            row[f"{model} worst"] = f"{worst['mape']:.1f} ({worst['gpu']})"
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-predictors", action="store_true", help="skip section 3 (predictor fits)")
    args = ap.parse_args()
    t0 = time.time()
    matched, cells = load_cells()
    all_kernels = ratio_table(matched, ["engine", "family", "variant", "kernel_source"])
    defaults = ratio_table(cells, ["engine", "family", "variant", "generation"])
    res = logo(cells)
    by_family = summarise(res, ["engine", "family"])
    by_variant = summarise(res, GROUP)
    worse = worse_than_identity(res, SHIPPED)
    chained = None if args.no_predictors else predictor_logo(cells)
    ar_table, nccl = load_aiconfigurator_engines("custom_allreduce"), load_aiconfigurator("nccl")
    ar = allreduce_logo(ar_table, nccl)
    params = pd.DataFrame([{"implementation": k, "base us": round(v.base_ms * 1e3, 2),
                            "per GPU us": round(v.per_gpu_ms * 1e3, 2), "link efficiency": round(v.efficiency, 3),
                            "max MiB": v.max_bytes / 2 ** 20} for k, v in ALLREDUCE_PARAMS.items()])
    elapsed = time.time() - t0
    text = [
        "# Engine kernels: SGLang and TRT-LLM against vLLM, and the engines' own all-reduce", "",
        f"Made by `{COMMAND}{' --no-predictors' if args.no_predictors else ''}` ({elapsed:.0f} s) from the shipped "
        "tables only (`data/aiconfigurator_engines`, a crc32 "
        "shape sample of AIConfigurator's engine tables, against `data/aiconfigurator`'s vLLM tables). SGLang's "
        "kernels cover five GPUs (the source's SGLang rows filed as B300 carry the held-back GB300's device string "
        "and are rejected at ingest), TRT-LLM's six.", "",
        "## 1. How much the engine changes a kernel's time (engine / vLLM, same shape and GPU)", "",
        "Each engine's default kernel (the library its table measures on the full shape grid) per SM generation:",
        "", md(defaults), "",
        "Every kernel library measured (an engine may be configured to call any of them):", "", md(all_kernels), "",
        "## 2. Engine kernel factors, leave one GPU out", "",
        "An engine's kernel time is forecast as vLLM's measured time of the shape times the factor fitted on the "
        "other GPUs; MAPE % of the left-out GPU's rows, mean over left-out GPUs and the worst one. Candidates: "
        "`identity` (factor 1: the engine runs the kernel as vLLM does); `cell` (one factor per engine, family, "
        "variant and kernel-library class); `generation` (per cell by SM generation and shape regime: tokens and "
        "weight size for GEMMs; prompt, batch tokens and GQA group for prefill; cache length, batch and GQA group for "
        "decode); `library` (the shipped form: as `generation`, but attention on Ada (sm89) and RTX Blackwell "
        "(sm120), which run the same FlashAttention-2 / FlashInfer kernels under every engine, is one class); "
        "`gemm_merged` (GEMMs of sm89 and sm120 one class too: their cuBLAS / CUTLASS kernels differ); `pooled` (as "
        "`library`, but a GPU whose class no training GPU shares takes the median over the training classes "
        "instead of factor 1). A GPU whose class no other GPU has (A100's sm80; L40S and RTX PRO 6000 for GEMMs) "
        "gets factor 1 from every candidate but `pooled`.", "",
        "By engine and family:", "", md(by_family), "",
        "By engine, family and variant (GEMM dtype; attention KV-cache dtype):", "", md(by_variant), "",
        f"Where the shipped form (`{SHIPPED}`) is worse than the identity on a left-out GPU by more than 0.5 points:",
        "",
        md(worse) if len(worse) else "none.", "",
        "## 3. With the project's predictors, leave one GPU out", "",
        *(["Not run (`--no-predictors`).", ""] if chained is None else [
            "The engine's kernel time forecast by the project's predictor (xgboost, registry defaults, fitted on a "
            f"{PREDICTOR_SAMPLE}-row seeded sample of the other GPUs' vLLM rows of the family: the harness it learns) "
            "alone, and times the engine factors (`library`, fitted on the other GPUs): MAPE % against the engine's "
            "measured time.", "", md(summarise_two(chained, ["engine", "family"])), "",
            md(summarise_two(chained, GROUP)), ""]),
        "## 4. The engines' own all-reduce, leave one GPU out", "",
        "`engine`: the implementation's latency floor + bandwidth model on the GPU spec's link, fitted on the other "
        "GPUs (NCCL with its floor above the size it hands to NCCL, and for more than two PCIe-only GPUs); `nccl`: "
        "the project's NCCL model as serving used it before (ring at 72% of the link, no floor); `nccl+floor`: with "
        "NCCL's latency floor (`CommModel(floors=True)`). MAPE % over all message sizes:", "",
        md(allreduce_summary(ar, "all")), "",
        "Only the messages the engine's own kernel reduces in the model (at most its hand-off size; NVLink, or two "
        "PCIe GPUs):", "", md(allreduce_summary(ar, "own kernel")), "",
        "Only the messages handed to NCCL (larger ones, and more than two PCIe-only GPUs: L40S and RTX PRO 6000 "
        "nodes at 4 and 8 GPUs reduce through the host, far below the PCIe link of their spec):", "",
        md(allreduce_summary(ar, "to NCCL")), "",
        "The shipped constants (`ALLREDUCE_PARAMS`, fitted on every GPU; a test refits them):", "", md(params), "",
    ]
    OUT.write_text("\n".join(text), encoding="utf-8")
    print(f"wrote {OUT} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
