"""Prediction intervals: leave-one-GPU-out residuals, conditioned on what predicts the error (docs/method.md §17).

``benchmarks/generalisation.py`` fits every family without each public GPU in turn, forecasts the GPU it
left out (kernels and end-to-end labels) and keeps the residuals ``r = log(measured / forecast)``;
:mod:`tilecast.evaluation.interval_fit` turns them into the committed table :data:`INTERVALS_FILE` and this
module reads it (:mod:`tilecast.forecast.interval_model` holds the model):

- **Kernels** (:func:`kernel_interval`): the quantiles of the mixture of the calibrating GPUs' residual
  distributions in the forecast's **cell** (roofline regime x latency scale), each GPU one vote weighted by
  how alike its **spec distance** to its fold's GPUs is to the target's distance to the training GPUs (a
  twin of a training GPU is calibrated by the folds that had a twin, a GPU unlike any by the folds that had
  none; another vendor and another architecture count as distance). The quantile level that covers
  ``level`` of a new GPU's rows on average is read from the family's **level map**, measured leave one GPU
  out on the calibrating GPUs themselves. Per dtype for the precision families; bf16 and fp16 stand in for
  each other; a family x dtype without residuals, or a vendor without any residuals of its own or of
  another vendor, gets :data:`NO_DATA_LOG_Q` (a factor of 3 either way at 80%) and says so.
- **End to end** (:func:`e2e_interval`): the op mix of the forecast (its kernel time per family) with the
  measured correlation of one GPU's family biases (a GPU's errors are systematic: one bias per family,
  correlated across families), plus the end-to-end error beyond the kernels (``s0``), scaled by the
  multiplier ``k`` that covers the public end-to-end labels leave one GPU out
  (:func:`tilecast.forecast.interval_model.mix_moments`). Without a mix, the dominant family of the dtype
  (:data:`E2E_DOMINANT`) carries the whole time.

The table lives in one committed, versioned file, :data:`INTERVALS_FILE`, written by
``python benchmarks/generalisation.py`` with the command, the git commit and the hash of the data it read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from tilecast.errors import UserError
from tilecast.forecast import interval_model as im
from tilecast.paths import DATA_DIR
from tilecast.specs import GpuSpec, get_gpu

#: the interval level every forecast carries unless configured otherwise (conf/predict.yaml interval_level)
DEFAULT_LEVEL = 0.8
#: the committed table (made by ``python benchmarks/generalisation.py``)
INTERVALS_FILE = DATA_DIR / "intervals" / "intervals.json"
FORMAT_VERSION = 2
#: nominal levels the level maps and end-to-end multipliers are stored at (others interpolate)
LEVEL_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
#: a vendor with fewer training GPUs than this (of a family that also trains on another vendor's) is named in
#: the note: its GPUs are calibrated by that vendor's leave-one-out folds, few as they are
FEW_OF_VENDOR = 3
_VENDOR_NAMES = {"amd": "AMD", "nvidia": "NVIDIA", "intel": "Intel"}
#: log-quantiles for a family x dtype without residuals (no data): a factor of 3 at 80%, widened with the
#: level like a normal's quantile
NO_DATA_LOG_Q = im.NO_DATA_LOG_Q
#: end-to-end modes and the kernel family that dominates their time (fp32 / below fp32)
E2E_MODES = ("inference", "training")
E2E_DOMINANT = {"fp32": "linear", "half": "tc_gemm"}
LEVEL_RANGE = (0.5, 0.99)


@dataclass(frozen=True)
class IntervalTable:
    """The stored model: ``kernel[family][dtype]`` (per calibrating GPU its distance, bias and cells; the
    level map), ``e2e`` (bias correlations per dtype class, ``s0``, the multipliers ``k``), and what each
    family was trained on (``training[family] = {"architectures", "vendors", "gpus"}``)."""

    kernel: Mapping[str, Mapping[str, Mapping[str, Any]]]
    e2e: Mapping[str, Any]
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
        return {"format_version": FORMAT_VERSION, **self.meta, "training": self.training,
                "kernel": self.kernel, "e2e": self.e2e}


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> IntervalTable:
    return IntervalTable.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def load_intervals(path: str | Path | None = None) -> IntervalTable:
    """The committed table (:data:`INTERVALS_FILE`), read once per file version."""
    p = Path(path or INTERVALS_FILE)
    if not p.is_file():
        raise FileNotFoundError(f"no interval table at {p}; make it with python benchmarks/generalisation.py")
    return _load(str(p), p.stat().st_mtime)


def check_level(level: float | None) -> float:
    """``level`` (None: :data:`DEFAULT_LEVEL`) as a float in :data:`LEVEL_RANGE`; anything else is an error."""
    value = DEFAULT_LEVEL if level is None else level
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            LEVEL_RANGE[0] <= float(value) <= LEVEL_RANGE[1]):
        raise UserError(f"interval_level={level!r} must be a number in [{LEVEL_RANGE[0]}, {LEVEL_RANGE[1]}] "
                         f"(default {DEFAULT_LEVEL})")
    return float(value)


def _no_data(level: float) -> tuple[float, float]:
    z = float(np.interp(level, im.Z_LEVELS, im.Z))
    half = NO_DATA_LOG_Q * z / im.Z[1]
    return -half, half


def read_grid(grid: Mapping[str, float], level: float) -> float:
    """A value stored per nominal level (keys: :data:`LEVEL_GRID` as strings) at ``level``, interpolated."""
    xs = sorted((float(k), float(v)) for k, v in grid.items())
    return float(np.interp(level, [x for x, _ in xs], [v for _, v in xs]))


#: dtypes whose residuals stand in for each other (same bytes per element, same tensor-core peak)
_SAME_WIDTH = {"bf16": "fp16", "fp16": "bf16", "amp_bf16": "bf16"}


def _records(table: IntervalTable, family: str, dtype: str) -> tuple[Mapping[str, Any] | None, str, str]:
    """The record of ``family`` at ``dtype`` (an fp32 family at fp32 whatever the workload's dtype; bf16 and
    fp16 stand in for each other), the dtype it is of, and a note when a stand-in is used."""
    by_dtype = table.kernel.get(family, {})
    if set(by_dtype) == {"fp32"}:
        return by_dtype["fp32"], "fp32", ""
    if dtype in by_dtype:
        return by_dtype[dtype], dtype, ""
    other = _SAME_WIDTH.get(dtype)
    if other in by_dtype:
        return by_dtype[other], other, f"{other} residuals stand in for {dtype}"
    return None, dtype, ""


@dataclass(frozen=True)
class SpecPlacement:
    """Where a GPU stands relative to a family's calibrating GPUs: its spec distance to the training GPUs,
    the nearest of them, each calibrating GPU's weight, and why (a note); ``no_data``: nothing calibrates it."""

    distance: float
    nearest: str
    weights: Mapping[str, float]
    why: str
    no_data: bool = False


def placement(record: Mapping[str, Any], gpu: GpuSpec, trained: Mapping[str, Any], dtype: str) -> SpecPlacement:
    """How ``gpu`` is calibrated in a family (``record``, trained on ``trained``) at ``dtype``."""
    pool = [g for g in trained.get("gpus", ()) if g != gpu.key] or list(trained.get("gpus", ()))
    distance = im.spec_distance(gpu, pool, dtype) if pool else math.inf
    nearest = min(pool, key=lambda g: im.spec_distance(gpu, [g], dtype)) if pool else ""
    notes = []
    vendors = set(trained.get("vendors", ()))
    if gpu.vendor not in vendors:
        notes.append(f"another vendor ({gpu.vendor} GPU): the predictors trained on {', '.join(sorted(vendors))} "
                     "GPUs only")
        if not any(u.get("vendor_gap") for u in record["gpus"].values()):
            return SpecPlacement(distance, nearest, {}, "; ".join(notes + ["no measurement of that vendor"]), True)
    same = sorted(g for g in trained.get("gpus", ()) if get_gpu(g).vendor == gpu.vendor)
    if same and len(same) < FEW_OF_VENDOR and len(same) < len(trained.get("gpus", ())):
        name = _VENDOR_NAMES.get(gpu.vendor, gpu.vendor)
        others = len([g for g in same if g != gpu.key])
        notes.append(f"few GPUs of its vendor trained on: {len(same)} {name} ({', '.join(same)}), "
                     f"{others} other {name} GPU{'s' if others != 1 else ''} measured")
    if gpu.architecture not in set(trained.get("architectures", ())):
        notes.append(f"architecture {gpu.architecture} is not among the training GPUs'")
    w = im.weights(record, distance)
    lead = (f"spec distance {distance:.2f} to the nearest training GPU ({nearest}); "
            f"{im.effective_gpus(w):.1f} of {len(w)} calibrating GPUs weigh in")
    return SpecPlacement(distance, nearest, w, "; ".join([lead, *notes]))


def kernel_log_q(family: str, gpu: GpuSpec, dtype: str, level: float, table: IntervalTable,
                 pred_ms: Any = 1.0, regime: Any = None) -> tuple[np.ndarray, np.ndarray, str]:
    """(log lo, log hi, note) of kernel forecasts ``pred_ms`` of ``family`` on ``gpu`` at ``dtype`` (``regime``:
    their roofline regime, :func:`tilecast.tiles.roofline.roofline_regime`; None: every regime)."""
    pred = np.atleast_1d(np.asarray(pred_ms, dtype=float))
    record, rec_dtype, stand_in = _records(table, family, dtype)
    if not record:
        lo, hi = _no_data(level)
        return (np.full(len(pred), lo), np.full(len(pred), hi),
                f"{family} {dtype}: no leave-one-GPU-out residuals (no data), a wide default")
    where = placement(record, gpu, table.training.get(family, {}), rec_dtype)
    if where.no_data:
        lo, hi = _no_data(level)
        return np.full(len(pred), lo), np.full(len(pred), hi), f"{where.why}: the wide no-data interval"
    actual = read_grid(record["level_map"], level)
    lo, hi = im.kernel_log_bounds(record, im.cell_keys(regime, pred), where.distance, actual)
    return lo, hi, "; ".join(x for x in (where.why, stand_in) if x)


def kernel_interval(family: str, gpu: GpuSpec | str, dtype: str, pred_ms: Any, level: float | None = None,
                    table: IntervalTable | None = None, regime: Any = None) -> tuple[np.ndarray, np.ndarray, str]:
    """Interval of kernel forecasts of ``family`` on ``gpu`` at ``dtype``: ``(lo_ms, hi_ms, note)`` (arrays shaped
    like ``pred_ms``; ``regime``: the forecasts' roofline regime where known, which narrows the cell)."""
    level = check_level(level)
    table = table or load_intervals()
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    pred = np.asarray(pred_ms, dtype=float)
    lo, hi, why = kernel_log_q(family, gpu, dtype, level, table, pred, regime)
    shape = pred.shape
    return (pred * np.exp(lo).reshape(shape), pred * np.exp(hi).reshape(shape),
            _note(level, f"{family} kernel residuals in the forecast's regime and latency cell", why))


def family_moments(family: str, gpu: GpuSpec, dtype: str, table: IntervalTable) -> tuple[float, float, str]:
    """(mean, spread, note) of ``family``'s GPU bias (log) for ``gpu``; no data: a spread of
    :data:`NO_DATA_LOG_Q` over the 80% normal quantile."""
    record, rec_dtype, stand_in = _records(table, family, dtype)
    where = placement(record, gpu, table.training.get(family, {}), rec_dtype) if record else None
    if not record or where is None or where.no_data:
        why = where.why if where is not None else f"{family} {dtype}: no leave-one-GPU-out residuals (no data)"
        return 0.0, NO_DATA_LOG_Q / im.Z[1], why
    biases = {u: float(v["bias"]) for u, v in record["gpus"].items()}
    m, s = im.bias_moments(biases, record, where.distance)
    return m, s, "; ".join(x for x in (where.why, stand_in) if x)


def _dtype_class(dtype: str) -> str:
    return "fp32" if dtype == "fp32" else "half"


def mix_log_q(mix: Mapping[str, float], gpu: GpuSpec, dtype: str, level: float, table: IntervalTable
              ) -> tuple[float, float, list[str]]:
    """(log lo, log hi, notes) of an end-to-end forecast whose kernel time per group is ``mix``: the op mix's
    mean and spread (:func:`~tilecast.forecast.interval_model.mix_moments`) times the calibrated multiplier.
    Groups no family predicts (mem, comm, other) count as the dominant family of the dtype."""
    dominant = E2E_DOMINANT[_dtype_class(dtype)]
    shares: dict[str, float] = {}
    for group, ms in mix.items():
        if ms is None or not np.isfinite(ms) or ms <= 0:
            continue
        family = group if group in table.kernel else dominant
        shares[family] = shares.get(family, 0.0) + float(ms)
    total = sum(shares.values())
    if total <= 0:
        a, b = _no_data(level)
        return a, b, ["no kernel time to combine"]
    moments, notes = {}, []
    for family in shares:
        fam_dtype = "fp32" if set(table.kernel.get(family, {})) == {"fp32"} else dtype
        m, s, why = family_moments(family, gpu, fam_dtype, table)
        moments[family] = (m, s)
        if why and why not in notes:
            notes.append(why)
    e2e = table.e2e
    corr = e2e.get("correlation", {}).get(_dtype_class(dtype), {"pairs": {}, "mean": 1.0})
    mean, sd = im.mix_moments({f: v / total for f, v in shares.items()}, moments, corr, float(e2e.get("s0", 0.0)))
    k = read_grid(e2e["k"], level)
    return mean - k * sd, mean + k * sd, notes


def e2e_interval(mode: str, gpu: GpuSpec | str, dtype: str, pred_ms: Any, level: float | None = None,
                 table: IntervalTable | None = None, mix: Mapping[str, float] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, str]:
    """Interval of end-to-end forecasts: ``(lo_ms, hi_ms, note)``. ``mode``: inference or training (serve and
    fused count as inference); ``mix``: the forecast's kernel ms per group (``ms_per_group`` / ``ms_<group>``);
    without one the dtype's dominant family carries the whole time (:func:`mix_log_q`)."""
    level = check_level(level)
    table = table or load_intervals()
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    pred = np.asarray(pred_ms, dtype=float)
    dominant = E2E_DOMINANT[_dtype_class(dtype)]
    given = {g: float(v) for g, v in (mix or {}).items() if v is not None and np.isfinite(v) and v > 0}
    lo, hi, notes = mix_log_q(given or {dominant: 1.0}, gpu, dtype, level, table)
    what = ("op mix of the forecast" if given else f"{dominant} kernels (no op mix given)") + \
        ", family biases correlated as measured on the public GPUs, scaled to cover their end-to-end labels"
    return pred * math.exp(lo), pred * math.exp(hi), _note(level, what, "; ".join(notes))


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


def _note(level: float, what: str, why: str) -> str:
    return "; ".join(x for x in (f"{100 * level:.0f}% interval from {what}", why) if x)


def write_intervals(table: IntervalTable, path: Path = INTERVALS_FILE) -> Path:
    """Write the quantiles (atomically, sorted keys: reruns on the same inputs give the same bytes)."""
    from tilecast.io import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(table.to_dict(), indent=1, sort_keys=True) + "\n"
    return write_atomic(path, lambda p: p.write_text(text, encoding="utf-8"))
