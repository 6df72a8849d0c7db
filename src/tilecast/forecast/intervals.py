"""Prediction intervals: split-conformal on leave-one-GPU-out log-ratio residuals (docs/method.md §17).

``benchmarks/generalisation.py`` fits every family without each public GPU in turn, forecasts the GPU it
left out (kernels and end-to-end labels) and keeps the residuals ``r = log(measured / forecast)``. This
module turns them into quantiles and the quantiles into intervals ``[pred x exp(q_lo), pred x exp(q_hi)]``:

- **Conformal quantiles, one vote per GPU.** The quantiles of ``r`` are weighted so that every left-out
  GPU counts the same (P4 has 72 bmm test rows, A100-80GB 2,487): a forecast for a new GPU is judged
  against what happened on other new GPUs, not on the GPU with most rows. Stored on a grid of
  probabilities (:data:`PROBS`), so any level in [0.5, 0.99] is read by linear interpolation.
- **Strata: how far the GPU is from the training GPUs.** ``near``: every left-out GPU; ``new_architecture``:
  only the folds whose left-out GPU's architecture no other GPU of the fold had (T4, V100, L4 for the fp32
  families); ``few_of_vendor``: leave-one-GPU-out over a vendor the family trains on with fewer than
  :data:`FEW_OF_VENDOR` GPUs (the fp32 families' MI100 and MI210: each forecast by predictors fit on the NVIDIA
  GPUs and the other AMD GPU, ``leave-one-AMD-out``); ``other_vendor``: the fp32 predictors fit on every public
  NVIDIA GPU forecasting NeuSight's AMD kernels (MI100, MI210), the estimate for a vendor no training GPU has.
  A GPU whose vendor no training GPU of the family has gets ``other_vendor``; one of a vendor with fewer than
  :data:`FEW_OF_VENDOR` training GPUs beside another vendor's ``few_of_vendor`` (its architecture new or not:
  the stratum's folds had a new architecture each, MI100 cdna1 / MI210 cdna2); an architecture no training
  GPU has ``new_architecture``; anything else ``near``. A far stratum never gives a tighter interval than a nearer one
  (its quantiles are the wider of both); a vendor stratum without residuals is never answered by the nearer
  (other vendor's) strata alone. Each interval comes with a note naming why it is as wide as it is.
- **Precision families** (``tc_gemm``, attention, ``vec_half``): one set of strata per dtype, from the
  leave-one-GPU-out of ``benchmarks/precision.py``'s families. A dtype the family has no residuals for (no
  data) gets :data:`NO_DATA_LOG_Q` (a factor of 3 either way at 80%) and says so.
- **End to end**: three candidates, chosen by the benchmark's leave-one-GPU-out coverage and stored as
  ``e2e_method``: the end-to-end residual quantiles of the mode (``inference`` also for fused and serving
  forecasts), the comonotone op mix (every kernel group of the forecast at its family's quantile at once:
  a GPU's kernel errors are strongly correlated, one efficiency per family, so independent per-op intervals
  would be too tight), or the wider of both. A far GPU or a dtype below fp32 (the labels are fp32) always
  folds in the op mix. No label measures an AMD GPU end to end: a ``few_of_vendor`` GPU takes the op mix of
  its (leave-one-AMD-out) kernel intervals, never tighter than the ``new_architecture`` end-to-end residuals;
  an ``other_vendor`` one the wide no-data interval beside its op mix.
- **Few GPUs**: a GPU's rows share one error, so the level is raised by split conformal's ``(1 + 1/n)``
  over the ``n`` calibrating GPUs, in proportion to the share of the variance between GPUs
  (:func:`conformal_level`).

The calibrated quantiles live in one committed, versioned file, :data:`INTERVALS_FILE`, written by
``python benchmarks/generalisation.py`` with the command, the git commit and the hash of the data it read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.paths import DATA_DIR
from tilecast.specs import GpuSpec, get_gpu

#: the interval level every forecast carries unless configured otherwise (conf/predict.yaml interval_level)
DEFAULT_LEVEL = 0.8
#: the committed quantiles (made by ``python benchmarks/generalisation.py``)
INTERVALS_FILE = DATA_DIR / "intervals" / "intervals.json"
FORMAT_VERSION = 1
#: probabilities the residual quantiles are stored at: 0.005, 0.015, ..., 0.995 (levels 0.5-0.99 interpolate)
PROBS = tuple(round(0.005 + 0.01 * i, 3) for i in range(100))
STRATA = ("near", "new_architecture", "few_of_vendor", "other_vendor")
#: a vendor with fewer training GPUs than this (of a family that also trains on another vendor's GPUs) is
#: ``few_of_vendor``: its GPUs are judged by the leave-one-out residuals of that vendor's training GPUs, not the
#: other vendor's ``near`` ones
FEW_OF_VENDOR = 3
_VENDOR_NAMES = {"amd": "AMD", "nvidia": "NVIDIA", "intel": "Intel"}
#: log-quantiles for a family x dtype without residuals (no data): a factor of 3 at 80%, widened with the
#: level like a normal's quantile
NO_DATA_LOG_Q = math.log(3.0)
_Z_LEVELS, _Z = (0.5, 0.8, 0.9, 0.95, 0.99), (0.674, 1.282, 1.645, 1.960, 2.576)  # normal quantiles
#: end-to-end modes and the kernel family that dominates their time (fp32 / below fp32)
E2E_MODES = ("inference", "training")
E2E_DOMINANT = {"fp32": "linear", "half": "tc_gemm"}
LEVEL_RANGE = (0.5, 0.99)


def weighted_quantiles(residuals: np.ndarray, groups: np.ndarray, probs: Iterable[float] = PROBS) -> list[float]:
    """Quantiles of ``residuals`` at ``probs``, every group (left-out GPU) weighing the same in total."""
    r = np.asarray(residuals, dtype=float)
    g = np.asarray(groups).astype(str)
    ok = np.isfinite(r)
    r, g = r[ok], g[ok]
    if not len(r):
        raise ValueError("no finite residuals to calibrate on")
    _, inv, counts = np.unique(g, return_inverse=True, return_counts=True)
    w = 1.0 / counts[inv]
    order = np.argsort(r, kind="stable")
    r, w = r[order], w[order]
    cdf = (np.cumsum(w) - 0.5 * w) / w.sum()  # midpoint rule: symmetric, exact for equal weights
    return [float(x) for x in np.interp(list(probs), cdf, r)]


def stratum_table(residuals: np.ndarray, groups: np.ndarray) -> dict[str, Any]:
    """One stratum's stored record: quantiles on :data:`PROBS` and what they rest on."""
    g = np.asarray(groups).astype(str)
    return {"gpus": sorted(set(g.tolist())), "rows": int(np.isfinite(np.asarray(residuals, float)).sum()),
            "between_share": between_share(residuals, g), "q": weighted_quantiles(residuals, g)}


def is_new_architecture(gpus: Iterable[str]) -> dict[str, bool]:
    """For each GPU of a leave-one-GPU-out pool: whether no other GPU of the pool shares its architecture."""
    specs = {g: get_gpu(g) for g in gpus}
    return {g: sum(o.architecture == s.architecture for o in specs.values()) == 1 for g, s in specs.items()}


def calibrate(residuals: np.ndarray, gpus: np.ndarray, other_vendor: tuple[np.ndarray, np.ndarray] | None = None,
              pool: Iterable[str] | None = None,
              few_of_vendor: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """Strata of one family (x dtype) from leave-one-GPU-out residuals (``gpus``: each row's left-out GPU key)
    and, optionally, residuals on another vendor's GPUs (``(residuals, gpus)``) by predictors that never saw
    that vendor (``other_vendor``) and by predictors fit with that vendor's other GPUs (``few_of_vendor``:
    leave-one-out over a vendor of few training GPUs). ``pool``: the GPUs the folds were fit from (default:
    those of ``gpus``), which decides whose architecture was new to its fold."""
    r, g = np.asarray(residuals, float), np.asarray(gpus).astype(str)
    out = {"near": stratum_table(r, g)}
    new = is_new_architecture(sorted(set(g.tolist()) | set(pool or ())))
    mask = np.array([new[x] for x in g])
    if mask.any():
        out["new_architecture"] = stratum_table(r[mask], g[mask])
    if few_of_vendor is not None and len(few_of_vendor[0]):
        out["few_of_vendor"] = stratum_table(*few_of_vendor)
    if other_vendor is not None and len(other_vendor[0]):
        out["other_vendor"] = stratum_table(*other_vendor)
    return out


@dataclass(frozen=True)
class IntervalTable:
    """The stored quantiles: ``kernel[family][dtype][stratum]`` and ``e2e[mode][stratum]``, plus what each
    family was trained on (``training[family] = {"architectures", "vendors", "gpus"}``; ``gpus``, the catalog
    keys, decides which vendors have few training GPUs)."""

    kernel: Mapping[str, Mapping[str, Mapping[str, Any]]]
    e2e: Mapping[str, Mapping[str, Any]]
    training: Mapping[str, Mapping[str, list[str]]]
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IntervalTable:
        if d.get("format_version") != FORMAT_VERSION:
            raise UserError(f"intervals file format {d.get('format_version')!r}; this tilecast reads "
                             f"{FORMAT_VERSION} (rerun python benchmarks/generalisation.py)")
        return cls(d["kernel"], d["e2e"], d["training"], {k: v for k, v in d.items()
                                                            if k not in ("kernel", "e2e", "training")})

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, **self.meta, "probs": list(PROBS), "training": self.training,
                "kernel": self.kernel, "e2e": self.e2e}


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> IntervalTable:
    return IntervalTable.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def load_intervals(path: str | Path | None = None) -> IntervalTable:
    """The committed quantiles (:data:`INTERVALS_FILE`), read once per file version."""
    p = Path(path or INTERVALS_FILE)
    if not p.is_file():
        raise FileNotFoundError(f"no interval quantiles at {p}; make them with python benchmarks/generalisation.py")
    return _load(str(p), p.stat().st_mtime)


def check_level(level: float | None) -> float:
    """``level`` (None: :data:`DEFAULT_LEVEL`) as a float in :data:`LEVEL_RANGE`; anything else is an error."""
    value = DEFAULT_LEVEL if level is None else level
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            LEVEL_RANGE[0] <= float(value) <= LEVEL_RANGE[1]):
        raise UserError(f"interval_level={level!r} must be a number in [{LEVEL_RANGE[0]}, {LEVEL_RANGE[1]}] "
                         f"(default {DEFAULT_LEVEL})")
    return float(value)


def conformal_level(level: float, n_gpus: int, icc: float = 1.0) -> float:
    """The quantile level that covers a new GPU at ``level`` when ``n_gpus`` GPUs calibrate it: split
    conformal's ``level x (1 + 1 / n)`` when a GPU's rows share one error (``icc`` 1: the GPU is the
    exchangeable unit), no correction when rows are independent (``icc`` 0), in between by the share of the
    residual variance between GPUs; capped at the stored grid's 99%."""
    return min(level * (1 + min(max(icc, 0.0), 1.0) / max(n_gpus, 1)), PROBS[-1] - PROBS[0])


def between_share(residuals: np.ndarray, groups: np.ndarray) -> float:
    """Share of the (GPU-weighted) variance of ``residuals`` that lies between the GPUs' means."""
    r, g = np.asarray(residuals, float), np.asarray(groups).astype(str)
    ok = np.isfinite(r)
    r, g = r[ok], g[ok]
    means = pd.Series(r).groupby(g).mean()
    within = pd.Series(r).groupby(g).var(ddof=0).fillna(0.0)
    between = float(means.var(ddof=0)) if len(means) > 1 else 0.0
    total = between + float(within.mean())
    return between / total if total > 0 else 0.0


def _q(record: Mapping[str, Any], level: float) -> tuple[float, float]:
    q = record["q"]
    lv = conformal_level(level, len(record.get("gpus", ())) or 1, float(record.get("between_share", 1.0)))
    return float(np.interp((1 - lv) / 2, PROBS, q)), float(np.interp((1 + lv) / 2, PROBS, q))


def _no_data(level: float) -> tuple[float, float]:
    z = float(np.interp(level, _Z_LEVELS, _Z))
    half = NO_DATA_LOG_Q * z / _Z[1]
    return -half, half


def gpu_stratum(gpu: GpuSpec, trained: Mapping[str, Iterable[str]]) -> tuple[str, str]:
    """(stratum, why) of ``gpu`` relative to what a family was trained on."""
    vendors, archs = set(trained.get("vendors", ())), set(trained.get("architectures", ()))
    if gpu.vendor not in vendors:
        return "other_vendor", f"{gpu.vendor} GPU: the predictors trained on {', '.join(sorted(vendors))} GPUs only"
    gpus = list(trained.get("gpus", ()))
    same = sorted(g for g in gpus if get_gpu(g).vendor == gpu.vendor)
    shown = sorted({get_gpu(g).architecture for g in same}) if same else sorted(archs)  # its vendor's
    new_arch = (f"architecture {gpu.architecture} is not among the training GPUs' ({', '.join(shown)})"
                if gpu.architecture not in archs else "")
    # few of its vendor beside another vendor's (fp32: 2 AMD beside 5 NVIDIA); a family trained on one vendor's
    # few GPUs (vec_half: two NVIDIA) has its leave-one-GPU-out strata for them already
    if same and len(same) < FEW_OF_VENDOR and len(same) < len(gpus):
        name = _VENDOR_NAMES.get(gpu.vendor, gpu.vendor)
        others = max(len(same) - 1, 0)  # what each leave-one-out fold of that vendor was fit with
        why = (f"{len(same)} {name} training GPU{'s' if len(same) != 1 else ''} ({', '.join(same)}): quantiles "
               f"from leaving each out, {others} other {name} GPU{'s' if others != 1 else ''} measured")
        return "few_of_vendor", "; ".join(x for x in (why, new_arch) if x)
    if new_arch:
        return "new_architecture", new_arch
    return "near", ""


def _widest(records: Mapping[str, Any], stratum: str, level: float, what: str = "measurement"
            ) -> tuple[float, float, str]:
    """The quantiles of ``stratum``, never tighter than a nearer stratum's; falls back to the nearest one
    present (saying so), except for a vendor stratum (``what``: the residuals' kind, for the note)."""
    lo, hi, note = 0.0, 0.0, ""
    for s in STRATA[:STRATA.index(stratum) + 1]:
        if s in records:
            a, b = _q(records[s], level)
            lo, hi = min(lo, a), max(hi, b)
        elif s == stratum == "few_of_vendor" and "other_vendor" in records:  # never the other vendor's alone
            a, b = _q(records["other_vendor"], level)
            lo, hi = min(lo, a), max(hi, b)
            note = "no leave-one-out residuals of that vendor: its residuals by predictors that never saw it used"
        elif s == stratum in ("few_of_vendor", "other_vendor"):  # nothing measured on that vendor: never tight
            a, b = _no_data(level)
            lo, hi = min(lo, a), max(hi, b)
            note = f"no {what} of that vendor: the wide no-data interval"
        elif s == stratum:
            note = f"no {s.replace('_', ' ')} residuals: nearer stratum used"
    return lo, hi, note


#: dtypes whose residuals stand in for each other (same bytes per element, same tensor-core peak)
_SAME_WIDTH = {"bf16": "fp16", "fp16": "bf16", "amp_bf16": "bf16"}


def _records(table: IntervalTable, family: str, dtype: str) -> tuple[Mapping[str, Any] | None, str]:
    """The strata of ``family`` at ``dtype`` (an fp32 family at fp32 whatever the workload's dtype; bf16 and
    fp16 stand in for each other), and a note when a stand-in is used."""
    by_dtype = table.kernel.get(family, {})
    if set(by_dtype) == {"fp32"}:
        return by_dtype["fp32"], ""
    if dtype in by_dtype:
        return by_dtype[dtype], ""
    other = _SAME_WIDTH.get(dtype)
    if other in by_dtype:
        return by_dtype[other], f"{other} residuals stand in for {dtype}"
    return None, ""


def kernel_log_q(family: str, gpu: GpuSpec, dtype: str, level: float, table: IntervalTable
                 ) -> tuple[float, float, str, str]:
    """(log lo, log hi, stratum, note) of kernel forecasts of ``family`` on ``gpu`` at ``dtype``."""
    records, stand_in = _records(table, family, dtype)
    if not records:
        lo, hi = _no_data(level)
        return lo, hi, "no_data", f"{family} {dtype}: no leave-one-GPU-out residuals (no data), a wide default"
    stratum, why = gpu_stratum(gpu, table.training.get(family, {}))
    lo, hi, missing = _widest(records, stratum, level)
    return lo, hi, stratum, "; ".join(x for x in (why, missing, stand_in) if x)


def kernel_interval(family: str, gpu: GpuSpec | str, dtype: str, pred_ms: Any, level: float | None = None,
                    table: IntervalTable | None = None) -> tuple[np.ndarray, np.ndarray, str]:
    """Interval of kernel forecasts of ``family`` on ``gpu`` at ``dtype``: ``(lo_ms, hi_ms, note)``
    (arrays shaped like ``pred_ms``)."""
    level = check_level(level)
    table = table or load_intervals()
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    pred = np.asarray(pred_ms, dtype=float)
    lo, hi, stratum, why = kernel_log_q(family, gpu, dtype, level, table)
    return pred * math.exp(lo), pred * math.exp(hi), _note(level, f"{family} kernels", stratum, why)


def mix_log_q(mix: Mapping[str, float], gpu: GpuSpec, dtype: str, level: float, table: IntervalTable
              ) -> tuple[float, float, str, list[str]]:
    """Comonotone op-mix bounds (log factors on the total): every group at its family's quantile at once
    (``sum ms_g exp(q_g) / sum ms_g``); groups no family predicts (mem, comm, other) take the dominant
    family's quantiles. Returns (log lo, log hi, farthest stratum, notes)."""
    dominant = E2E_DOMINANT["fp32" if dtype == "fp32" else "half"]
    total = lo_sum = hi_sum = 0.0
    worst, notes = "near", []
    for group, ms in mix.items():
        if not ms or not np.isfinite(ms) or ms <= 0:
            continue
        family = group if group in table.kernel else dominant
        fam_dtype = "fp32" if set(table.kernel.get(family, {})) == {"fp32"} else dtype
        a, b, stratum, why = kernel_log_q(family, gpu, fam_dtype, level, table)
        if (STRATA + ("no_data",)).index(stratum) > (STRATA + ("no_data",)).index(worst):
            worst = stratum
        if why and why not in notes:
            notes.append(why)
        total, lo_sum, hi_sum = total + ms, lo_sum + ms * math.exp(a), hi_sum + ms * math.exp(b)
    if total <= 0:
        a, b = _no_data(level)
        return a, b, "no_data", ["no kernel time to combine"]
    return math.log(lo_sum / total), math.log(hi_sum / total), worst, notes


def e2e_interval(mode: str, gpu: GpuSpec | str, dtype: str, pred_ms: Any, level: float | None = None,
                 table: IntervalTable | None = None, mix: Mapping[str, float] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, str]:
    """Interval of end-to-end forecasts: ``(lo_ms, hi_ms, note)``. ``mode``: inference or training (serve and
    fused count as inference; parallel runs take their mode's); ``mix``: the forecast's kernel ms per group
    (``ms_per_group`` / ``ms_<group>``). How the two sources combine is the table's ``e2e_method``, chosen by
    the benchmark's leave-one-GPU-out coverage: ``e2e`` (the end-to-end residual quantiles), ``mix`` (the
    comonotone op mix) or ``wider`` (the wider of both). Without a mix, ``e2e``; a far GPU or a dtype below fp32
    always folds in the mix or, without one, the dominant family's kernel quantiles."""
    level = check_level(level)
    table = table or load_intervals()
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    pred = np.asarray(pred_ms, dtype=float)
    key = "training" if mode == "training" else "inference"
    method = str(table.meta.get("e2e_method", "e2e"))
    dominant = E2E_DOMINANT["fp32" if dtype == "fp32" else "half"]
    mix = {g: float(v) for g, v in (mix or {}).items() if v is not None and np.isfinite(v) and v > 0} or {dominant: 1}
    m_lo, m_hi, stratum, notes = mix_log_q(mix, gpu, dtype, level, table)
    records = table.e2e.get(key, {})
    if records and stratum == "few_of_vendor" and stratum not in records:
        # a vendor trained on with few GPUs and none of its end-to-end labels (AMD): its kernels are measured,
        # so the op mix of their leave-one-out intervals carries it, never tighter than a new architecture's
        e_lo, e_hi, _ = _widest(records, "new_architecture", level)
        missing = (f"no {key} label of that vendor: the op mix of its kernel intervals, never tighter than the "
                   "new-architecture end-to-end residuals")
    elif records:
        e_lo, e_hi, missing = _widest(records, stratum if stratum in STRATA else "other_vendor", level,
                                      f"{key} label")
    else:
        (e_lo, e_hi), missing = _no_data(level), f"no {key} labels"
    far = stratum != "near" or dtype != "fp32"
    use = "wider" if far and method == "e2e" else method
    lo, hi = {"e2e": (e_lo, e_hi), "mix": (m_lo, m_hi),
              "wider": (min(e_lo, m_lo), max(e_hi, m_hi))}[use]
    what = {"e2e": f"{key} end-to-end residuals", "mix": "comonotone op mix of the kernel intervals",
            "wider": f"wider of the {key} end-to-end residuals and the op mix"}[use]
    why = "; ".join(x for x in (*notes, missing) if x)
    return pred * math.exp(lo), pred * math.exp(hi), _note(level, what, stratum, why)


def forecast_interval(what: str, gpu: GpuSpec | str, dtype: str, pred_ms: Any, level: float | None = None,
                      table: IntervalTable | None = None, mix: Mapping[str, float] | None = None
                      ) -> tuple[np.ndarray, np.ndarray, str]:
    """One entry point for every caller (predict, evaluate, score cells): ``what`` is a kernel family
    (``bmm``, ``tc_gemm``...) or an end-to-end mode (``inference``, ``training``, ``serve``; ``mix`` its
    kernel ms per group when known)."""
    if what in ("inference", "training", "serve"):
        return e2e_interval(what, gpu, dtype, pred_ms, level, table, mix)
    return kernel_interval(what, gpu, dtype, pred_ms, level, table)


def record_interval(record: Mapping[str, Any], gpu: GpuSpec | str, level: float | None = None,
                    table: IntervalTable | None = None) -> dict[str, Any]:
    """Interval fields for a predict record (``Forecast.to_dict()`` or a serve forecast's): ``pred_lo_ms`` /
    ``pred_hi_ms`` around ``e2e_ms`` (serve: ``ttft_lo_ms`` ... ``tpot_hi_ms`` around TTFT and TPOT),
    ``interval_level`` and ``interval_note``."""
    level = check_level(level)
    mix = record.get("ms_per_group") or None
    dtype = str(record.get("dtype", "fp32"))
    if record.get("mode") == "serve":
        out: dict[str, Any] = {}
        for key in ("ttft", "tpot"):
            lo, hi, note = e2e_interval("serve", gpu, dtype, record[f"{key}_ms"], level, table, None)
            out.update({f"{key}_lo_ms": float(lo), f"{key}_hi_ms": float(hi)})
        return {**out, "interval_level": level, "interval_note": note}
    lo, hi, note = e2e_interval(str(record.get("mode", "inference")), gpu, dtype, record["e2e_ms"], level, table, mix)
    return {"pred_lo_ms": float(lo), "pred_hi_ms": float(hi), "interval_level": level, "interval_note": note}


def _note(level: float, what: str, stratum: str, why: str) -> str:
    basis = {"near": "calibrated on left-out public GPUs", "new_architecture": "widened: new architecture",
             "few_of_vendor": "widened: few GPUs of its vendor trained on",
             "other_vendor": "widened: another vendor", "no_data": "wide: no data"}[stratum]
    return "; ".join(x for x in (f"{100 * level:.0f}% interval from {what}, {basis}", why) if x)


def _residuals(pair: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """``(residuals, gpus)`` as float and str arrays (empty for None)."""
    if pair is None:
        return np.empty(0), np.empty(0, dtype=str)
    return np.asarray(pair[0], float), np.asarray(pair[1]).astype(str)


def _share_inside(residuals: np.ndarray, records: Mapping[str, Any], stratum: str, level: float) -> float:
    """Share of ``residuals`` inside the ``level`` interval of ``stratum`` (:func:`_widest`) of ``records``."""
    lo, hi, _ = _widest(records, stratum, level)
    return float(np.mean((residuals >= lo) & (residuals <= hi)))


def coverage(residuals: np.ndarray, gpus: np.ndarray, level: float,
             other_vendor: tuple[np.ndarray, np.ndarray] | None = None,
             pool: Iterable[str] | None = None,
             few_of_vendor: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, float]:
    """Leave-one-GPU-out coverage of the conformal intervals: for each GPU, calibrate on every other GPU's
    residuals (its stratum as a fold without it sees it), and count the share of its residuals inside.
    Other-vendor GPUs are judged on quantiles of the NVIDIA residuals plus the other other-vendor GPUs; with
    ``few_of_vendor`` (that vendor trained on: its leave-one-out residuals), each of its GPUs on the
    ``few_of_vendor`` stratum calibrated on that vendor's other GPUs (and ``other_vendor``, if given, as a
    fallback when it has none)."""
    r, g = np.asarray(residuals, float), np.asarray(gpus).astype(str)
    out = {}
    for gpu in sorted(set(g.tolist())):
        rest = g != gpu
        others = sorted((set(g.tolist()) | set(pool or ())) - {gpu})
        records = calibrate(r[rest], g[rest], pool=others)
        new = is_new_architecture([*others, gpu])[gpu]
        out[gpu] = _share_inside(r[~rest], records, "new_architecture" if new else "near", level)
    ov_r, ov_g = _residuals(other_vendor)
    if len(ov_r):
        for gpu in sorted(set(ov_g.tolist())):
            others = ov_g != gpu
            records = calibrate(r, g, (ov_r[others], ov_g[others]) if others.any() else None)
            out[gpu] = _share_inside(ov_r[~others], records, "other_vendor", level)
    fv_r, fv_g = _residuals(few_of_vendor)
    if len(fv_r):
        for gpu in sorted(set(fv_g.tolist())):
            others = fv_g != gpu
            # the fallback, without the GPU judged
            ov = (ov_r[ov_g != gpu], ov_g[ov_g != gpu]) if other_vendor is not None else None
            records = calibrate(r, g, ov, few_of_vendor=(fv_r[others], fv_g[others]))
            out[gpu] = _share_inside(fv_r[~others], records, "few_of_vendor", level)
    return out


def write_intervals(table: IntervalTable, path: Path = INTERVALS_FILE) -> Path:
    """Write the quantiles (atomically, sorted keys: reruns on the same inputs give the same bytes)."""
    from tilecast.io import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(table.to_dict(), indent=1, sort_keys=True) + "\n"
    return write_atomic(path, lambda p: p.write_text(text, encoding="utf-8"))
