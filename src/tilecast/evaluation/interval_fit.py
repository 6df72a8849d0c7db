"""Fitting and judging the interval model on leave-one-GPU-out residuals (docs/method.md §17, issue 26).

Input: per family (x dtype) a frame of **units** (a fold's left-out GPU; a unit is judged as a new GPU) with
columns ``unit``, ``r`` (log measured / forecast), ``pred_ms`` and ``regime``; each unit's spec distance to its
fold's GPUs and whether its vendor was new to the fold. Output: the records :mod:`tilecast.forecast.intervals`
reads, and leave-one-GPU-out coverage and width per unit, **nested**: the record a unit is judged by, its
level map and end-to-end multiplier included, is fitted without that unit.

- **Level map** (:func:`level_map`): for each quantile level on :data:`ACTUAL_GRID`, the mean over units of the
  share of a unit's rows inside the interval of the record fitted without it; the level that reaches each
  nominal level of :data:`~tilecast.forecast.intervals.LEVEL_GRID` on average is stored. This replaces split
  conformal's ``(1 + 1/n)``: it measures what the units' systematic errors do to coverage instead of assuming.
- **End to end** (:func:`e2e_fit`): the correlation of the families' GPU biases, ``s0`` (the root mean square
  over GPUs of what their labels err beyond the time-weighted biases of their own kernels) and the multipliers
  ``k``: the GPU-weighted quantiles of ``|r - mean| / sd`` of each label, its moments fitted without its GPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from tilecast.forecast import interval_model as im
from tilecast.forecast.intervals import LEVEL_GRID, read_grid

#: quantile levels the level map is measured at
ACTUAL_GRID = tuple(round(0.4 + 0.02 * i, 2) for i in range(30))  # 0.40 ... 0.98


def with_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its forecasts' ``cell`` (:func:`~tilecast.forecast.interval_model.cell_keys`)."""
    regime = frame["regime"].to_numpy(float) if "regime" in frame else None
    return frame.assign(cell=im.cell_keys(regime, frame["pred_ms"].to_numpy(float)))


def unit_record(frame: pd.DataFrame, distances: Mapping[str, float],
                vendor_gap: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The record of ``frame``'s units (no level map)."""
    return im.calibrate_family(frame["r"].to_numpy(float), frame["unit"].to_numpy(), frame["cell"].to_numpy(),
                               distances, vendor_gap)


def _bounds_by_level(record: Mapping[str, Any], cells: np.ndarray, distance: float,
                     levels: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) arrays shaped (levels, rows) of ``cells`` at each quantile level."""
    levels = np.asarray(list(levels), float)
    probs = np.concatenate([(1 - levels) / 2, (1 + levels) / 2])
    w = im.weights(record, distance)
    lo, hi = np.empty((len(levels), len(cells))), np.empty((len(levels), len(cells)))
    for cell in np.unique(cells):
        q = im.mixture_quantiles(record, cell, w, probs)
        sel = cells == cell
        lo[:, sel], hi[:, sel] = q[:len(levels), None], q[len(levels):, None]
    return lo, hi


def level_map(frame: pd.DataFrame, distances: Mapping[str, float],
              vendor_gap: Mapping[str, bool] | None = None) -> dict[str, float]:
    """Nominal level -> quantile level, measured leave one unit out on ``frame``'s units (mean coverage over
    units); fewer than :data:`~tilecast.forecast.interval_model.FEW_GPUS` units keep the nominal levels."""
    units = sorted(set(frame["unit"]))
    if len(units) < im.FEW_GPUS:  # too few to measure it: the nominal levels (and the few-GPU floor)
        return {str(v): v for v in LEVEL_GRID}
    cover = []
    for u in units:
        mine = frame["unit"].eq(u).to_numpy()
        same = frame["unit"].map(base_gpu).eq(base_gpu(u)).to_numpy()  # its other units left out too
        record = unit_record(frame.loc[~same], distances, vendor_gap)
        lo, hi = _bounds_by_level(record, frame.loc[mine, "cell"].to_numpy().astype(str), distances[u], ACTUAL_GRID)
        r = frame.loc[mine, "r"].to_numpy(float)
        cover.append(((r >= lo) & (r <= hi)).mean(axis=1))
    mean = np.maximum.accumulate(np.mean(cover, axis=0))
    out = {}
    for nominal in LEVEL_GRID:
        reach = np.nonzero(mean >= nominal)[0]
        # the first grid level reaching it, interpolated; beyond the grid: the grid's top (or the nominal)
        if len(reach) == 0:
            value = max(ACTUAL_GRID[-1], nominal)
        elif reach[0] == 0:
            value = min(ACTUAL_GRID[0], nominal)
        else:
            i = reach[0]
            x0, x1, y0, y1 = ACTUAL_GRID[i - 1], ACTUAL_GRID[i], mean[i - 1], mean[i]
            value = x0 + (x1 - x0) * (nominal - y0) / (y1 - y0) if y1 > y0 else x1
        out[str(nominal)] = round(float(min(value, 0.99)), 4)
    return out


def fit_family(frame: pd.DataFrame, distances: Mapping[str, float],
               vendor_gap: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The stored record of a family (x dtype): its units and its level map."""
    return {**unit_record(frame, distances, vendor_gap), "level_map": level_map(frame, distances, vendor_gap)}


def judge_family(frame: pd.DataFrame, distances: Mapping[str, float], levels: Iterable[float],
                 vendor_gap: Mapping[str, bool] | None = None, judged: Iterable[str] | None = None) -> pd.DataFrame:
    """Leave-one-unit-out coverage and median width (hi / lo) of each unit (``judged``: those units only) at each
    nominal level, every part of the record (level map too) fitted without the unit."""
    out = []
    for u in sorted(set(frame["unit"]) if judged is None else judged):
        mine = frame["unit"].eq(u).to_numpy()
        same = frame["unit"].map(base_gpu).eq(base_gpu(u)).to_numpy()
        record = fit_family(frame.loc[~same], distances, vendor_gap)
        cells = frame.loc[mine, "cell"].to_numpy().astype(str)
        r = frame.loc[mine, "r"].to_numpy(float)
        for level in levels:
            lo, hi = im.kernel_log_bounds(record, cells, distances[u], read_grid(record["level_map"], level))
            out.append({"unit": u, "level": level, "rows": int(mine.sum()),
                        "coverage": float(((r >= lo) & (r <= hi)).mean()),
                        "width": float(np.median(np.exp(hi - lo))), "distance": distances[u]})
    return pd.DataFrame(out)


# --- end to end ------------------------------------------------------------------------------------------


def unit_biases(frame: pd.DataFrame) -> dict[str, float]:
    """Median log residual (bias) of each unit of a family's frame."""
    return {u: float(np.median(g["r"])) for u, g in frame.groupby("unit")}


def shares(labels: pd.DataFrame, families: Iterable[str], dominant: str) -> pd.DataFrame:
    """Each label's share of kernel time per family (``ms_<group>`` columns; groups no family predicts count
    as ``dominant``)."""
    families = list(families)
    groups = [c for c in labels.columns if c.startswith("ms_")]
    total = labels[groups].fillna(0).sum(axis=1).replace(0, np.nan)
    out = pd.DataFrame({f: labels[f"ms_{f}"].fillna(0) / total if f"ms_{f}" in labels else 0.0 for f in families},
                       index=labels.index).fillna(0.0)
    out[dominant] = out[dominant] + (1 - out.sum(axis=1)).clip(lower=0)
    return out


def _moments(biases: Mapping[str, Mapping[str, float]], distances: Mapping[str, float], distance: float,
             without: set[str]) -> dict[str, tuple[float, float]]:
    out = {}
    for f, b in biases.items():
        kept = {u: v for u, v in b.items() if u not in without}
        record = {"gpus": {u: {"distance": distances[u]} for u in kept}}
        out[f] = im.bias_moments(kept, record, distance) if kept else (0.0, 0.0)
    return out


def s0_of(labels: pd.DataFrame, w: pd.DataFrame, biases: Mapping[str, Mapping[str, float]],
          without: set[str] = frozenset()) -> float:
    """Root mean square over GPUs (one vote each) of their labels' mean log error beyond the time-weighted
    biases of their own kernels."""
    keep = ~labels["gpu"].isin(without)
    lab, ww = labels.loc[keep], w.loc[keep]
    implied = sum(ww[f] * lab["gpu"].map(b).fillna(0.0) for f, b in biases.items())
    rest = (lab["r"] - implied).groupby(lab["gpu"]).mean()
    return float(np.sqrt((rest ** 2).mean())) if len(rest) else 0.0


def e2e_scores(labels: pd.DataFrame, w: pd.DataFrame, biases: Mapping[str, Mapping[str, float]],
               distances: Mapping[str, float], without: set[str] = frozenset(),
               only: set[str] | None = None) -> pd.DataFrame:
    """Per label (of GPUs not in ``without``; ``only``: of those GPUs): the mix's mean and sd fitted without its
    GPU (and ``without``), and its score ``t = |r - mean| / sd``."""
    rows = []
    judged = labels.loc[~labels["gpu"].isin(without) & (labels["gpu"].isin(only) if only else True)]
    for gpu, lab in judged.groupby("gpu"):
        out = set(without) | {gpu}
        corr = im.bias_correlation({f: {u: v for u, v in b.items() if u not in out} for f, b in biases.items()})
        mom = _moments(biases, distances, distances[gpu], out)
        s0 = s0_of(labels, w, biases, out)
        for i in lab.index:
            mean, sd = im.mix_moments(w.loc[i].to_dict(), mom, corr, s0)
            rows.append({"gpu": gpu, "mode": lab.at[i, "mode"], "r": lab.at[i, "r"], "mean": mean, "sd": sd,
                         "t": abs(lab.at[i, "r"] - mean) / sd if sd > 0 else math.inf})
    return pd.DataFrame(rows)


def multipliers(scores: pd.DataFrame) -> dict[str, float]:
    """``k`` per nominal level: GPU-weighted quantiles of the scores ``t`` (each GPU one vote). Above 80% never
    below the 80% multiplier scaled as a normal's quantiles grow: a few GPUs' scores say nothing of the tail
    beyond their largest."""
    units = {g: {"distance": 0.0, "cells": {f"{im.ANY}|{im.ANY}": {
        "q": list(np.quantile(s["t"].to_numpy(float), im.CELL_PROBS))}}} for g, s in scores.groupby("gpu")}
    record = {"gpus": units}
    w = {g: 1.0 / len(units) for g in units}
    ks = dict(zip(LEVEL_GRID, im.mixture_quantiles(record, f"{im.ANY}|{im.ANY}", w, LEVEL_GRID), strict=True))
    z = lambda lv: float(np.interp(lv, im.Z_LEVELS, im.Z))  # noqa: E731
    return {str(lv): round(float(max(k, ks[0.8] * z(lv) / z(0.8)) if lv > 0.8 else k), 4) for lv, k in ks.items()}


def e2e_fit(labels: pd.DataFrame, w: pd.DataFrame, biases: Mapping[str, Mapping[str, float]],
            distances: Mapping[str, float], half_biases: Mapping[str, Mapping[str, float]] | None = None
            ) -> dict[str, Any]:
    """The stored end-to-end part: bias correlations (fp32 families; ``half``: the precision families'),
    ``s0`` and the multipliers ``k``."""
    return {"correlation": {"fp32": im.bias_correlation(biases),
                            "half": im.bias_correlation(half_biases or {})},
            "s0": round(s0_of(labels, w, biases), 4),
            "k": multipliers(e2e_scores(labels, w, biases, distances))}


def judge_e2e(labels: pd.DataFrame, w: pd.DataFrame, biases: Mapping[str, Mapping[str, float]],
              distances: Mapping[str, float], levels: Iterable[float]) -> pd.DataFrame:
    """Leave-one-GPU-out coverage and width of each end-to-end label, nested: its GPU's moments, ``s0`` and the
    multipliers are all fitted without it."""
    out = []
    for gpu in sorted(set(labels["gpu"])):
        inner = e2e_scores(labels, w, biases, distances, {gpu})
        ks = multipliers(inner) if len(inner) else {str(v): 1.2816 for v in LEVEL_GRID}
        mine = e2e_scores(labels, w, biases, distances, only={gpu})
        for level in levels:
            k = read_grid(ks, level)
            for s in mine.itertuples(index=False):
                out.append({"gpu": gpu, "mode": s.mode, "level": level,
                            "inside": float(abs(s.r - s.mean) <= k * s.sd), "width": float(math.exp(2 * k * s.sd))})
    return pd.DataFrame(out)


# --- the units of a leave-one-GPU-out run --------------------------------------------------------------------

#: suffix of an AMD unit forecast by predictors that never saw AMD (its vendor new to the fold)
NVIDIA_ONLY = "@nvidia_only"


def base_gpu(unit: str) -> str:
    """The GPU a unit measures (``mi100@nvidia_only`` -> ``mi100``)."""
    return unit.split("@")[0]


def kernel_units(kern: pd.DataFrame, amd: pd.DataFrame | None, prec: pd.DataFrame | None, pool: Iterable[str],
                 tensor_pools: Mapping[str, Iterable[str]]
                 ) -> dict[tuple[str, str], tuple[pd.DataFrame, dict[str, float], dict[str, bool]]]:
    """Per (family, dtype): the units' frame (with cells), their distances to their folds and vendor gaps.
    fp32: each left-out NVIDIA GPU of ``pool`` (its fold: the rest of ``pool``); with ``amd``, each AMD GPU left
    out of NVIDIA + the other AMD GPU (``leave-one-AMD-out``) and each AMD GPU by NVIDIA-only predictors
    (``<gpu>@nvidia_only``, its vendor new to the fold). Precision families: each left-out GPU of
    ``tensor_pools[family]`` (catalog keys)."""
    pool = list(pool)
    out = {}
    cols = ["unit", "r", "pred_ms", "regime"]
    for f, k in kern.groupby("family"):
        parts = [k.assign(unit=k["gpu"])[cols]]
        dist = {g: im.spec_distance(g, pool, "fp32") for g in sorted(set(k["gpu"]))}
        gap = {g: False for g in dist}
        if amd is not None:
            a = amd.loc[amd["family"].eq(f)]
            amd_gpus = sorted(set(a["gpu"]))
            loao = a.loc[a["setting"].eq("leave-one-AMD-out")]
            parts.append(loao.assign(unit=loao["gpu"])[cols])
            nv = a.loc[a["setting"].eq("nvidia only")]
            parts.append(nv.assign(unit=nv["gpu"] + NVIDIA_ONLY)[cols])
            for g in amd_gpus:
                dist[g] = im.spec_distance(g, [*pool, *[x for x in amd_gpus if x != g]], "fp32")
                gap[g] = False
                dist[g + NVIDIA_ONLY] = im.spec_distance(g, pool, "fp32")
                gap[g + NVIDIA_ONLY] = True
        out[(f, "fp32")] = (with_cells(pd.concat(parts, ignore_index=True)), dist, gap)
    if prec is not None:
        for (f, dtype), p in prec.groupby(["family", "dtype"]):
            tp = list(tensor_pools[f])
            dist = {g: im.spec_distance(g, tp, dtype) for g in sorted(set(p["gpu"]))}
            out[(f, dtype)] = (with_cells(p.assign(unit=p["gpu"])[cols]), dist, {g: False for g in dist})
    return out
