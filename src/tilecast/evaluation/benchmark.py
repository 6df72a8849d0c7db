"""The end-to-end accuracy benchmark page (``benchmarks/e2e.md``) from an evaluation and a roofline run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tilecast.data import parse_tag
from tilecast.evaluation.tables import markdown, paper_shaped

if TYPE_CHECKING:
    from tilecast.pipelines.evaluate import EvaluationResult

#: published reference means (docs/method.md §13) for the cells with no per-cell table in the paper
PAPER_MULTI_GPU = {"dp4": 12.9, "tp4": 8.4, "pp4_1": 10.3}
PAPER_FUSED = "3.1-24.6"
ROWS = {"NeuSight (paper)": "neusight_ape_pct", "roofline (paper)": "roofline_paper_ape_pct",
        "roofline (ours)": "roofline_ape_pct", "tilecast spec-only": "ape_pct", "tilecast calibrated": "ape_cal_pct"}


def with_roofline(table: pd.DataFrame, roofline: pd.DataFrame) -> pd.DataFrame:
    """``table`` plus our roofline's prediction and APE for the same labels (``roofline_ms``, ``roofline_ape_pct``)."""
    r = roofline[["device", "tag", "pred_ms", "ape_pct"]].rename(columns={"pred_ms": "roofline_ms",
                                                                          "ape_pct": "roofline_ape_pct"})
    return table.merge(r, on=["device", "tag"], how="left")


def headline_table(table: pd.DataFrame) -> pd.DataFrame:
    """Mean APE per cell set: ours spec-only / calibrated beside the paper's NeuSight and roofline."""
    sets = {
        "inference (published cells)": (table["mode"] == "inference") & table["paper_cell"],
        "training (published cells)": (table["mode"] == "training") & table["paper_cell"],
        "inference (all plain labels)": (table["mode"] == "inference") & (table["variant"] == "plain"),
        "training (all plain labels)": (table["mode"] == "training") & (table["variant"] == "plain"),
        "fused inference": table["variant"] == "fusion",
        "4-GPU (dp4 / tp4 / pp4_1)": ~table["variant"].isin(["plain", "fusion"]),
    }
    rows = []
    for name, mask in sets.items():
        part = table[mask & table["pred_ms"].notna()]
        paper = part["neusight_ape_pct"].mean() if "neusight_ape_pct" in part else np.nan
        if name.startswith("4-GPU"):
            paper = float(np.mean([PAPER_MULTI_GPU[v] for v in part["variant"] if v in PAPER_MULTI_GPU])) \
                if len(part) else np.nan
        rows.append({"cells": name, "labels": len(part), "tilecast spec-only": part["ape_pct"].mean(),
                     "tilecast calibrated": part["ape_cal_pct"].mean(), "NeuSight (paper)": paper,
                     "roofline (ours)": part["roofline_ape_pct"].mean(),
                     "roofline (paper)": part["roofline_paper_ape_pct"].mean()})
    return pd.DataFrame(rows).set_index("cells")


def label_table(table: pd.DataFrame, mask: pd.Series) -> pd.DataFrame:
    """One row per label: measured and forecast ms and APE (spec-only, calibrated, roofline)."""
    part = table[mask].sort_values(["device", "tag"])
    out = part[["device", "tag", "label_ms", "pred_ms", "ape_pct", "pred_cal_ms", "ape_cal_pct", "roofline_ape_pct"]]
    return out.rename(columns={"pred_ms": "spec-only ms", "ape_pct": "spec-only APE %", "pred_cal_ms":
                               "calibrated ms", "ape_cal_pct": "calibrated APE %", "roofline_ape_pct":
                               "roofline APE %", "label_ms": "measured ms"}).set_index(["device", "tag"])


def gpu_split(table: pd.DataFrame, unseen: tuple[str, ...]) -> pd.DataFrame:
    """Mean APE of the plain labels per GPU, training GPUs and unseen GPUs apart."""
    plain = table[(table["variant"] == "plain") & table["pred_ms"].notna()]
    g = plain.groupby("gpu")
    out = pd.DataFrame({"labels": g.size(), "spec-only APE %": g["ape_pct"].mean(),
                        "calibrated APE %": g["ape_cal_pct"].mean(), "roofline APE %": g["roofline_ape_pct"].mean()})
    out.insert(0, "kernels trained on it", ["no" if k in unseen else "yes" for k in out.index])
    return out


def render(result: EvaluationResult, roofline: pd.DataFrame, meta: Mapping[str, str],
           unseen: tuple[str, ...], paper_perop: pd.DataFrame | None = None) -> str:
    """The whole Markdown page."""
    t = with_roofline(result.table, roofline)
    t["paper_cell"] = t["paper_cell"].astype(bool)
    lines = ["# End-to-end accuracy (tilecast vs NeuSight)", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", "APE = |forecast - measured| / measured, in %. *Spec-only*: the registered kernel predictors "
              "and the GPU's spec sheet. *Calibrated*: plus a per-GPU, per-family correction fitted on at most "
              "20 of that GPU's kernel test rows (a scale, applied to the forecast or to the roofline by "
              "leave-one-out error on those rows), kept for a label only where it beats spec-only on the GPU's "
              "other models' labels (`jobs/evaluate.py`'s check; `benchmarks/calibration.md`, leave one GPU out). "
              "Kernel microbenchmarks can disagree with the same kernels inside models: L4's GEMM "
              "microbenchmarks run 1.45x slower than its in-model GEMMs, P4's 0.68x (`benchmarks/consistency.md`). "
              "On the training GPUs (in-sample kernels) the correction has little left to correct. "
              "Paper columns are NeuSight's published per-cell APE "
              "(`paper/nvidia_inf.csv`, `paper/nvidia_train.csv`); H100 cells are not public and not here.", "",
              "## Headline (mean APE %)", "", markdown(headline_table(t)), "",
              "Paper columns: the mean of the published values over the cells of the set that the paper lists "
              "(the 4-GPU paper value is the mean of its DP / TP / PP figures).", "",
              "## Training GPUs vs unseen GPUs (plain labels, mean APE %)", "", markdown(gpu_split(t, unseen)), ""]
    for mode, title in (("inference", "Inference"), ("training", "Training")):
        lines += [f"## {title}: published cells (APE %, shaped like `paper/nvidia_"
                  f"{'inf' if mode == 'inference' else 'train'}.csv`)", ""]
        for device, block in paper_shaped(t, mode, ROWS).items():
            lines += [f"### {device}", "", markdown(block), ""]
    lines += ["## Fused inference (torch.compile labels)", "",
              f"NeuSight reports {PAPER_FUSED}% on its fused cells (no per-cell table).", "",
              markdown(label_table(t, t["variant"] == "fusion")), ""]
    multi = ~t["variant"].isin(["plain", "fusion"])
    lines += ["## 4-GPU data / tensor / pipeline parallel", "",
              "NeuSight (paper, GPT2-Large on A100): " + ", ".join(f"{k} {v}%" for k, v in PAPER_MULTI_GPU.items()),
              "", markdown(label_table(t, multi)), ""]
    other = ~t["paper_cell"] & (t["variant"] == "plain")
    if other.any():
        lines += ["## Other plain labels (not in the paper's tables)", "", markdown(label_table(t, other)), ""]
        aliased = [r for r in t.itertuples(index=False) if parse_tag(r.tag).model_raw != r.model]
        lines += [f"Note: `{r.device}/{r.tag}.json` names its model `{parse_tag(r.tag).model_raw}`, read as "
                  f"`{r.model}` by the data's model alias; it measured {r.label_ms:.1f} ms. If that label is of "
                  f"another model it inflates every mean that includes it." for r in aliased] + [""]
    if result.perop_summary is not None:
        per = result.perop_summary.pivot(index="family", columns="distribution", values="mape_pct")
        per.columns = [f"tilecast {c}" for c in per.columns]
        if paper_perop is not None:
            ref = paper_perop[paper_perop["method"].isin(["NeuSight", "Roofline"])]
            ref = ref.pivot_table(index="family", columns=["method", "distribution"], values="ape_pct")
            ref.columns = [f"{m} (paper) {d}" for m, d in ref.columns]
            per = per.join(ref)
        lines += ["## Per-op category error (MAPE %, forward kernels of the per-node labels)", "",
                  "`in`: GPUs the kernel predictors trained on; `out`: unseen GPUs (the paper's out-of-"
                  "distribution also counts unseen models).", "", markdown(per), ""]
    worst = t[t["pred_ms"].notna()].nlargest(8, "ape_pct")
    lines += ["## Worst cells (spec-only)", "", markdown(label_table(t, t.index.isin(worst.index))), ""]
    failed = t[t["error"] != ""]
    if len(failed):
        lines += ["## Labels without a forecast", ""] + [f"- {r.device} {r.tag}: {r.error}"
                                                        for r in failed.itertuples(index=False)] + [""]
    if result.labels.skipped:
        lines += ["## Skipped label files", ""] + [f"- {p}: {r}" for p, r in result.labels.skipped] + [""]
    return "\n".join(lines)
