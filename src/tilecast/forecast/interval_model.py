"""Conditional interval model (issue 26, docs/method.md §17): what the width of a forecast's interval rests on.

The leave-one-GPU-out residuals ``r = log(measured / forecast)`` of a family (x dtype) are kept per left-out
GPU and per **cell** of the forecast's own features, so an interval is narrow where the model knows and wide
where it does not:

- **Cells**: the roofline regime (``log2`` compute / memory time of the kernel on the GPU,
  :func:`tilecast.tiles.roofline.roofline_regime`: memory-bound below -1, compute-bound above 1, balanced
  between) x the latency scale of the forecast (below 0.03 ms, 0.03-0.3, 0.3-3, above 3 ms: launch floors and
  tiny kernels err differently from long ones). A forecast without a regime uses its latency cell over every
  regime; a GPU with few rows in a cell answers it from its coarser cell (every regime, then everything), so
  every calibrating GPU votes in every cell.
- **Distance in spec space**: each calibrating GPU's residuals come from a fold that did not see it; its
  distance to that fold's GPUs is the root mean square over :data:`SPEC_AXES` of the ``log2`` spec ratios plus
  an architecture axis and a vendor axis (1 when they differ), to the nearest GPU of the fold
  (:func:`spec_distance`). A new GPU's interval weighs each calibrating GPU by how alike their distances
  are (a Gaussian kernel of width :data:`DISTANCE_BANDWIDTH`): a B200 beside a GB200 is calibrated by the
  folds that had a twin, an L40S or a Hopper part by the folds that had none.
- **One vote per GPU**: the quantiles are those of the mixture of the calibrating GPUs' residual distributions,
  each GPU weighing its distance weight whatever its row count (a GPU's rows share one error).

End to end (:func:`mix_moments`): a forecast's log error is the time-weighted mix of its op families' log
errors. The errors of one GPU are systematic: per GPU and family the mean residual (its **bias**) carries
over to every op of the family on that GPU, and the biases of different families of one GPU are correlated
(measured: the correlation across left-out GPUs of their family biases). The mix's log error then has mean
``sum w_f m_f`` and variance ``sum_f sum_f' w_f w_f' rho_ff' s_f s_f' + s_0^2`` (``m_f``, ``s_f``: the
distance-weighted mean and spread of family ``f``'s GPU biases; ``s_0``: the spread of what end-to-end labels
err beyond their kernels' biases, measured on the public labels), and the interval is that normal's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from tilecast.specs import GpuSpec, get_gpu

#: regime edges (log2 compute time / memory time) and latency edges (ms) of the cells
REGIME_EDGES = (-1.0, 1.0)
REGIMES = ("mem", "bal", "comp")
LATENCY_EDGES_MS = (0.03, 0.3, 3.0)
LATENCIES = ("lt0.03", "lt0.3", "lt3", "ge3")
ANY = "any"
#: a GPU with fewer rows than this in a cell answers it from its coarser cell
MIN_CELL_ROWS = 20
#: probabilities each GPU's residual quantile function is stored at (0.01, 0.03, ..., 0.99)
CELL_PROBS = tuple(round(0.01 + 0.02 * i, 3) for i in range(50))
#: spec axes of the distance (log2 of each)
SPEC_AXES = ("peak", "mem_bw_gbs", "num_sm", "l2_mb", "boost_clock_mhz")
#: width of the Gaussian kernel over spec distances (in the distance's own units: log2 ratios)
DISTANCE_BANDWIDTH = 0.25
#: the no-data interval: a factor of 3 either way at 80% (widened with the level like a normal's quantile); a
#: family calibrated by fewer GPUs than FEW_GPUS is never given a tighter one
NO_DATA_LOG_Q = math.log(3.0)
FEW_GPUS = 3
#: central normal quantiles at a few levels (what the few-GPU floor and the end-to-end tail scale with)
Z_LEVELS, Z = (0.5, 0.8, 0.9, 0.95, 0.99), (0.674, 1.282, 1.645, 1.960, 2.576)
#: a floor on each calibrating GPU's weight relative to the nearest, so no GPU is ever ignored entirely
WEIGHT_FLOOR = 0.05


def cell_keys(regime: Any, pred_ms: Any) -> np.ndarray:
    """``"<regime>|<latency>"`` cell of each forecast (``regime`` None or NaN: ``any``)."""
    pred = np.atleast_1d(np.asarray(pred_ms, dtype=float))
    lat = np.asarray(LATENCIES)[np.searchsorted(LATENCY_EDGES_MS, pred, side="right")]
    if regime is None:
        reg = np.full(len(pred), ANY)
    else:
        x = np.broadcast_to(np.atleast_1d(np.asarray(regime, dtype=float)), pred.shape)
        reg = np.where(np.isfinite(x), np.asarray(REGIMES)[np.searchsorted(REGIME_EDGES, np.nan_to_num(x),
                                                                             side="right")], ANY)
    return np.char.add(np.char.add(reg.astype(str), "|"), lat.astype(str))


def coarser(cell: str) -> list[str]:
    """The cells a forecast of ``cell`` falls back to, finest first."""
    reg, lat = cell.split("|")
    out = [cell]
    if reg != ANY:
        out.append(f"{ANY}|{lat}")
    out.append(f"{ANY}|{ANY}")
    return out


def _peak(gpu: GpuSpec, dtype: str) -> float:
    for d in (dtype, "bf16", "fp32"):
        try:
            if gpu.supports(d):
                return float(gpu.peak_gflops(d))
        except ValueError:
            continue
    return float(gpu.fp32_gflops)


def spec_vector(gpu: GpuSpec | str, dtype: str = "fp32") -> np.ndarray:
    """``log2`` of the GPU's :data:`SPEC_AXES` (the peak at ``dtype``, else bf16, else fp32)."""
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    values = [_peak(g, dtype), g.mem_bw_gbs, g.num_sm, g.l2_mb or 1.0, g.boost_clock_mhz or 1000.0]
    return np.log2(np.maximum(np.asarray(values, dtype=float), 1e-9))


def spec_distance(gpu: GpuSpec | str, pool: Iterable[str], dtype: str = "fp32") -> float:
    """Distance of ``gpu`` to the nearest GPU of ``pool`` (itself excluded): root mean square of the ``log2`` spec
    ratios and of an architecture and a vendor axis (1 where they differ); ``inf`` for an empty pool."""
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    v = spec_vector(g, dtype)
    best = math.inf
    for other in pool:
        o = get_gpu(other)
        if o.key == g.key:
            continue
        d2 = np.concatenate([v - spec_vector(o, dtype), [float(o.architecture != g.architecture),
                                                         float(o.vendor != g.vendor)]]) ** 2
        best = min(best, float(np.sqrt(d2.mean())))
    return best


def gpu_cells(residuals: np.ndarray, cells: np.ndarray) -> dict[str, dict[str, Any]]:
    """One GPU's stored cells: quantile function on :data:`CELL_PROBS` and row count, for every cell with at
    least :data:`MIN_CELL_ROWS` rows, its coarser cells and ``any|any`` (always)."""
    r, c = np.asarray(residuals, float), np.asarray(cells).astype(str)
    ok = np.isfinite(r)
    r, c = r[ok], c[ok]
    groups: dict[str, np.ndarray] = {f"{ANY}|{ANY}": r}
    for key in np.unique(c):
        groups[key] = r[c == key]
        lat = f"{ANY}|{key.split('|')[1]}"
        groups[lat] = r[np.char.endswith(c, "|" + key.split("|")[1])]
    return {k: {"n": int(len(v)), "q": [round(float(x), 4) for x in np.quantile(v, CELL_PROBS)]}
            for k, v in groups.items() if len(v) >= MIN_CELL_ROWS or k == f"{ANY}|{ANY}"}


def calibrate_family(residuals: np.ndarray, gpus: np.ndarray, cells: np.ndarray, distances: Mapping[str, float],
                     vendor_gap: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The stored record of one family (x dtype): per calibrating GPU (a fold's left-out GPU) its distance to the
    fold's GPUs, its bias (median log residual: its systematic error), whether its vendor was new to the fold
    (``vendor_gap``) and its cells."""
    r, g, c = np.asarray(residuals, float), np.asarray(gpus).astype(str), np.asarray(cells).astype(str)
    out = {}
    for gpu in sorted(set(g.tolist())):
        mine = (g == gpu) & np.isfinite(r)
        out[gpu] = {"distance": round(float(distances[gpu]), 4), "bias": round(float(np.median(r[mine])), 4),
                    "vendor_gap": bool((vendor_gap or {}).get(gpu, False)), "cells": gpu_cells(r[mine], c[mine])}
    return {"gpus": out}


def weights(record: Mapping[str, Any], distance: float, bandwidth: float = DISTANCE_BANDWIDTH) -> dict[str, float]:
    """Each calibrating GPU's weight for a GPU at ``distance`` (Gaussian in the distance gap, floored, summing
    to 1); ``bandwidth`` inf: every GPU the same."""
    gpus = record["gpus"]
    if not math.isfinite(bandwidth):
        return {g: 1.0 / len(gpus) for g in gpus}
    raw = {g: math.exp(-0.5 * ((min(distance, 4.0) - min(v["distance"], 4.0)) / bandwidth) ** 2)
           for g, v in gpus.items()}
    top = max(raw.values())
    w = {g: max(x / top, WEIGHT_FLOOR) for g, x in raw.items()}
    total = sum(w.values())
    return {g: x / total for g, x in w.items()}


def effective_gpus(w: Mapping[str, float]) -> float:
    """Kish's effective number of calibrating GPUs of weights ``w``."""
    v = np.asarray(list(w.values()), float)
    return float(v.sum() ** 2 / (v ** 2).sum()) if len(v) else 0.0


def _cell_q(entry: Mapping[str, Any], cell: str) -> np.ndarray:
    for key in coarser(cell):
        if key in entry["cells"]:
            return np.asarray(entry["cells"][key]["q"], float)
    raise KeyError(cell)


def mixture_quantiles(record: Mapping[str, Any], cell: str, w: Mapping[str, float],
                      probs: Iterable[float]) -> np.ndarray:
    """Quantiles at ``probs`` of the ``w``-weighted mixture of the calibrating GPUs' residual distributions in
    ``cell`` (each GPU's quantile function read as a piecewise-linear CDF)."""
    qs = {g: _cell_q(record["gpus"][g], cell) for g in w}
    grid = np.unique(np.concatenate(list(qs.values())))
    cdf = np.zeros(len(grid))
    lo_p, hi_p = CELL_PROBS[0], CELL_PROBS[-1]
    for g, q in qs.items():  # below / above the stored range: 0 / 1
        cdf += w[g] * np.interp(grid, q, CELL_PROBS, left=0.0, right=1.0)
    cdf = np.clip(cdf / max(sum(w.values()), 1e-12), 0.0, 1.0)
    cdf = np.maximum.accumulate(cdf)
    p = np.clip(np.asarray(list(probs), float), lo_p, hi_p)
    # invert: the smallest grid value whose cdf reaches p, linearly between neighbours
    keep = np.concatenate([[True], np.diff(cdf) > 0])
    return np.interp(p, cdf[keep], grid[keep])


def kernel_log_bounds(record: Mapping[str, Any], cells: np.ndarray, distance: float, level: float,
                      bandwidth: float = DISTANCE_BANDWIDTH) -> tuple[np.ndarray, np.ndarray]:
    """(log lo, log hi) per forecast of ``cells`` for a GPU at ``distance``: the central ``level`` of the
    calibrating GPUs' weighted mixture in each cell (``level`` here is the quantile level to read, what the
    family's level map gives for the nominal one)."""
    w = weights(record, distance, bandwidth)
    cells = np.asarray(cells).astype(str)
    lo, hi = np.empty(len(cells)), np.empty(len(cells))
    for cell in np.unique(cells):
        a, b = mixture_quantiles(record, cell, w, ((1 - level) / 2, (1 + level) / 2))
        lo[cells == cell], hi[cells == cell] = a, b
    if len(record["gpus"]) < FEW_GPUS:  # two GPUs cannot say how far a third one errs: never tighter than no data
        half = NO_DATA_LOG_Q * float(np.interp(level, Z_LEVELS, Z)) / Z[1]
        lo, hi = np.minimum(lo, -half), np.maximum(hi, half)
    return lo, hi


# --- end to end: the op mix with the measured correlation of a GPU's family errors ---------------------------


def family_bias(residuals: np.ndarray, gpus: np.ndarray) -> dict[str, float]:
    """Each GPU's bias in a family: the mean of its log residuals (its systematic error)."""
    r, g = np.asarray(residuals, float), np.asarray(gpus).astype(str)
    ok = np.isfinite(r)
    return {gpu: float(r[ok & (g == gpu)].mean()) for gpu in sorted(set(g[ok].tolist()))}


def bias_correlation(biases: Mapping[str, Mapping[str, float]], min_gpus: int = 3) -> dict[str, Any]:
    """Correlation of the families' GPU biases over the GPUs both were measured on (``min_gpus`` at least),
    and the mean of those correlations (``mean``: what a pair without common GPUs is given)."""
    fams = sorted(biases)
    rho: dict[str, dict[str, float]] = {f: {} for f in fams}
    vals = []
    for i, a in enumerate(fams):
        for b in fams[i + 1:]:
            common = sorted(set(biases[a]) & set(biases[b]))
            if len(common) < min_gpus:
                continue
            x = np.array([biases[a][g] for g in common])
            y = np.array([biases[b][g] for g in common])
            if x.std() == 0 or y.std() == 0:
                continue
            c = float(np.corrcoef(x, y)[0, 1])
            rho[a][b] = rho[b][a] = round(c, 4)
            vals.append(c)
    return {"pairs": rho, "mean": round(float(np.mean(vals)), 4) if vals else 1.0}


def bias_moments(biases: Mapping[str, float], record: Mapping[str, Any], distance: float,
                 bandwidth: float = DISTANCE_BANDWIDTH) -> tuple[float, float]:
    """(mean, spread) of a family's GPU biases, weighted by distance as the kernel quantiles are; the spread is
    the weighted root mean square about zero (a bias is an error whether or not the others share it)."""
    w = weights(record, distance, bandwidth)
    gs = [g for g in w if g in biases]
    if not gs:
        return 0.0, 0.0
    wv = np.array([w[g] for g in gs])
    b = np.array([biases[g] for g in gs])
    wv = wv / wv.sum()
    m = float((wv * b).sum())
    return m, float(np.sqrt((wv * b ** 2).sum()))


def mix_moments(shares: Mapping[str, float], moments: Mapping[str, tuple[float, float]],
                correlation: Mapping[str, Any], s0: float) -> tuple[float, float]:
    """(mean, standard deviation) of the log error of a forecast whose time shares per family are ``shares``,
    each family's GPU bias of (mean, spread) ``moments[f]``, correlated as ``correlation`` says; ``s0``: the
    end-to-end error beyond the kernels' (independent of them)."""
    fams = [f for f in shares if f in moments and shares[f] > 0]
    mean = sum(shares[f] * moments[f][0] for f in fams)
    var = s0 ** 2
    pairs, default = correlation.get("pairs", {}), float(correlation.get("mean", 1.0))
    for a in fams:
        for b in fams:
            rho = 1.0 if a == b else float(pairs.get(a, {}).get(b, default))
            var += shares[a] * shares[b] * rho * moments[a][1] * moments[b][1]
    return mean, math.sqrt(max(var, 0.0))
