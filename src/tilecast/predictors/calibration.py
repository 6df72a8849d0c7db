"""Calibration tier: a small per-family correction for one GPU from a handful of measured kernels.

Part of a learned predictor's error on an unseen GPU is one factor for the whole family (how
efficiently that GPU's kernels run, docs/method.md §11): ``scale``, the value minimising the mean absolute
percentage error on the measured rows, i.e. the weighted median of ``measured / predicted`` with
weights ``predicted / measured``. The rest depends on the shape (row length of a softmax or layer norm,
the GEMM's M, N, K: which kernel variant the GPU's library runs), so method ``krr`` adds a smooth
residual over the log2 shape, a kernel ridge regression with an RBF kernel whose prior is the scale: far
from every measured kernel the correction falls back to ``scale`` alone. Its length scale and ridge were
chosen on the leave-one-training-GPU-out table of ``benchmarks/kernels.md`` (the unseen GPUs only confirm
them). ``krr`` fits a GPU's own kernels best, but end to end, leave one GPU out (``benchmarks/calibration.md``),
the factor alone is the design that never made a GPU worse than spec-only with the model-run check, under
both predictor defaults it was measured with, and had the best mean; so the default is ``scale``
(:data:`DEFAULT_METHOD`, with the base chosen per family as below). Corrected predictions stay at or above
the roofline and the launch floor.

Methods: ``scale`` (the factor only, the default), ``slope`` (plus a shrunk slope over log kernel size),
``krr`` (plus the shape residual; needs ``min_rows_krr`` rows, else ``scale``).

Base: what the correction multiplies. ``predictor``: the learned forecast. ``roofline``: the GPU's
roofline, when the learned forecast's error on that GPU is not smooth in the shape (its trees put
some shapes of an unseen GPU with one training GPU and others with another) while the GPU's own
efficiency is. ``auto`` (default) picks the one with the lower leave-one-out MAPE on the measured
rows themselves (ties: ``predictor``); it needs ``min_rows_select`` rows, else ``predictor``. No row
of another GPU takes part in the choice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.predictors.bounds import bounded_ms
from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.roofline import roofline_ms

METHODS = ("scale", "slope", "krr")
DEFAULT_METHOD = "scale"  # chosen end to end, leave one GPU out: benchmarks/calibration.md
BASES = ("predictor", "roofline")
DEFAULT_BASE = "auto"  # one of BASES, or "auto": chosen by leave-one-out MAPE on the measured rows
#: shape columns the residual is smooth in, per family (log2 of each)
SHAPE_DIMS: dict[str, tuple[str, ...]] = {
    "bmm": ("M", "N", "K"), "linear": ("M", "N", "K"),
    "elementwise": ("H", "B"), "softmax": ("H", "B"), "layernorm": ("H", "B"),
}
KRR_LENGTH = 2.0  # RBF length scale in log2 units (a factor of 4 in each dimension)
KRR_RIDGE = 0.3  # ridge, relative to the kernel's unit diagonal


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """Weighted median (lower), the minimiser of ``sum w |c - v|``."""
    order = np.argsort(values)
    v, w = np.asarray(values, float)[order], np.asarray(weights, float)[order]
    cum = np.cumsum(w)
    return float(v[np.searchsorted(cum, 0.5 * cum[-1])])


def log2_shape(rows: pd.DataFrame, dims: tuple[str, ...]) -> np.ndarray:
    """(n, len(dims)) log2 of the shape columns ``dims`` of ``rows``."""
    missing = [d for d in dims if d not in rows]
    if missing:
        raise UserError(f"calibration needs kernel shape columns {list(dims)}; missing: {missing}")
    vals = rows[list(dims)].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    return np.log2(np.maximum(vals, 1.0))


def _rbf(a: np.ndarray, b: np.ndarray, length: float) -> np.ndarray:
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1)
    return np.exp(-0.5 * d2 / length**2)


@dataclass(frozen=True)
class Calibration:
    """``corrected = bound(x * scale * (x / ref_ms) ** slope * exp(k(shape) @ alpha))`` for one family on one
    GPU; ``x`` is the predictor's forecast (``base == "predictor"``) or the roofline (``"roofline"``), ``k``
    the RBF kernel between a row's log2 shape (``dims``) and the ``centres``."""

    family: str
    gpu_key: str
    scale: float = 1.0
    slope: float = 0.0
    ref_ms: float = 1.0
    floor_ms: float = 0.0
    rows: int = 0
    method: str = "scale"
    dims: tuple[str, ...] = ()
    centres: tuple[tuple[float, ...], ...] = ()
    alpha: tuple[float, ...] = ()
    length: float = KRR_LENGTH
    base: str = "predictor"

    def residual(self, rows: pd.DataFrame) -> np.ndarray:
        """Log correction of each row beyond ``scale`` (0 without a shape residual)."""
        if not self.alpha:
            return np.zeros(len(rows))
        k = _rbf(log2_shape(rows, self.dims), np.asarray(self.centres, dtype=float), self.length)
        return k @ np.asarray(self.alpha, dtype=float)

    def apply(self, pred_ms: np.ndarray, rows: pd.DataFrame) -> np.ndarray:
        """Corrected latency (ms) of ``rows`` given the predictor's ``pred_ms`` on this GPU."""
        pred = np.asarray(pred_ms, dtype=float)
        if len(rows) == 0:
            return pred.copy()
        roof = roofline_ms(rows, get_gpu(self.gpu_key))
        x = roof if self.base == "roofline" else pred
        corrected = x * self.scale * (x / self.ref_ms) ** self.slope * np.exp(self.residual(rows))
        return bounded_ms(corrected, roof, self.floor_ms)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)

    def non_finite(self) -> list[str]:
        """Parameters that make the correction unusable (``scale=nan``, ``alpha[3]=inf``, a scale <= 0); [] if none."""
        out = [f"{name}={getattr(self, name):g}" for name in ("scale", "slope", "ref_ms", "floor_ms", "length")
               if not np.isfinite(getattr(self, name))]
        out += [f"alpha[{i}]={v:g}" for i, v in enumerate(self.alpha) if not np.isfinite(v)]
        out += [f"centres[{i}]" for i, c in enumerate(self.centres) if not np.all(np.isfinite(c))]
        if np.isfinite(self.scale) and self.scale <= 0:
            out.append(f"scale={self.scale:g} (must be > 0)")
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        """Inverse of :meth:`to_dict` (also reads calibrations stored before the shape residual existed)."""
        d = dict(d)
        for key in ("dims", "alpha"):
            if key in d:
                d[key] = tuple(d[key])
        if "centres" in d:
            d["centres"] = tuple(tuple(float(v) for v in c) for c in d["centres"])
        return cls(**d)


def _mape_scale(pred: np.ndarray, lat: np.ndarray) -> float:
    ratio = lat / pred
    return weighted_median(ratio, 1.0 / ratio)


def _slope(pred: np.ndarray, lat: np.ndarray, scale: float, shrink: float) -> tuple[float, float, float]:
    """Shrunk least-squares slope of the log residual over log predicted size; refitted scale and reference."""
    z = np.log(pred)
    ref = float(np.exp(np.median(z)))
    dz = z - np.log(ref)
    if np.var(dz) <= 1e-6:
        return 0.0, ref, scale
    resid = np.log(lat / (pred * scale))
    slope = shrink * float(np.cov(dz, resid, bias=True)[0, 1] / np.var(dz))
    return slope, ref, _mape_scale(pred * (pred / ref) ** slope, lat)


def _krr(shape: np.ndarray, resid: np.ndarray, length: float, ridge: float) -> np.ndarray:
    """Coefficients of the kernel ridge regression of ``resid`` on ``shape``."""
    k = _rbf(shape, shape, length)
    return np.linalg.solve(k + ridge * np.eye(len(shape)), resid)


def _fit(family: str, gpu: GpuSpec, floor: float, rows: pd.DataFrame, x: np.ndarray, lat: np.ndarray,
         base: str, method: str, min_rows_slope: int, shrink: float, min_rows_krr: int, length: float,
         ridge: float) -> Calibration:
    """The correction of forecasts ``x`` (of ``base``) towards ``lat`` on ``rows``."""
    scale = _mape_scale(x, lat)
    n = int(len(lat))
    if method == "slope" and n >= min_rows_slope:
        slope, ref, scale = _slope(x, lat, scale, shrink)
        return Calibration(family, gpu.key, float(scale), float(slope), float(ref), floor, n, method, base=base)
    if method == "krr" and n >= min_rows_krr and family in SHAPE_DIMS:
        dims = SHAPE_DIMS[family]
        shape = log2_shape(rows, dims)
        alpha = _krr(shape, np.log(lat / (x * scale)), length, ridge)
        return Calibration(family, gpu.key, float(scale), floor_ms=floor, rows=n, method=method, dims=dims,
                           centres=tuple(tuple(map(float, c)) for c in shape), alpha=tuple(map(float, alpha)),
                           length=float(length), base=base)
    return Calibration(family, gpu.key, float(scale), floor_ms=floor, rows=n, method=method, base=base)


def _loo_mape(fit: Callable[[np.ndarray], Calibration], rows: pd.DataFrame, pred: np.ndarray,
              lat: np.ndarray) -> float:
    """Mean APE of each row under the correction ``fit`` fitted on the other rows."""
    n = len(lat)
    errs = [abs(fit(np.arange(n) != i).apply(pred[[i]], rows.iloc[[i]])[0] / lat[i] - 1.0) for i in range(n)]
    return float(np.mean(errs))


def fit_calibration(predictor: Any, rows_measured: pd.DataFrame, gpu: GpuSpec, method: str = DEFAULT_METHOD,
                    base: str = DEFAULT_BASE, min_rows_slope: int = 10, shrink: float = 0.5,
                    min_rows_krr: int = 5, min_rows_select: int = 5, length: float = KRR_LENGTH,
                    ridge: float = KRR_RIDGE) -> Calibration:
    """Fit the correction of ``predictor`` (one family) on ``rows_measured`` (with ``Latency``) on ``gpu``."""
    if method not in METHODS:
        raise UserError(f"unknown calibration method {method!r}; known: {', '.join(METHODS)}")
    if base not in (*BASES, "auto"):
        raise UserError(f"unknown calibration base {base!r}; known: {', '.join(BASES)}, auto")
    family = str(getattr(predictor, "family", ""))
    floor = float(getattr(predictor, "floor_ms", 0.0))
    lat = pd.to_numeric(rows_measured["Latency"], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(lat) & (lat > 0)
    if not ok.any():
        return Calibration(family, gpu.key, floor_ms=floor, method=method,
                           base="predictor" if base == "auto" else base)
    rows, lat = rows_measured.loc[ok], lat[ok]
    pred = np.asarray(predictor.predict_ms(rows, gpu), dtype=float)
    xs = {"predictor": pred, "roofline": roofline_ms(rows, gpu)}

    def fit(name: str, keep: np.ndarray | None = None) -> Calibration:
        keep = np.ones(len(lat), dtype=bool) if keep is None else keep
        return _fit(family, gpu, floor, rows.loc[keep], xs[name][keep], lat[keep], name, method, min_rows_slope,
                    shrink, min_rows_krr, length, ridge)

    if base == "auto":
        base = "predictor"
        if len(lat) >= min_rows_select:
            loo = {name: _loo_mape(lambda keep, name=name: fit(name, keep), rows, pred, lat) for name in BASES}
            base = min(BASES, key=loo.__getitem__)  # BASES order: ties keep the predictor
    return fit(base)


class _Precomputed:
    """A predictor whose forecasts of some rows are known (by row index): refits on subsets never predict again."""

    def __init__(self, family: str, floor_ms: float, pred_ms: pd.Series) -> None:
        self.family, self.floor_ms, self.pred_ms = family, floor_ms, pred_ms

    def predict_ms(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> np.ndarray:
        return self.pred_ms.loc[rows.index].to_numpy(dtype=float)


def loo_mape_pct(predictor: Any, rows_measured: pd.DataFrame, gpu: GpuSpec, groups: Any = None,
                 max_folds: int = 20, **fit_kwargs: Any) -> float:
    """Leave-one-out MAPE (%) of the calibration of ``predictor`` on ``rows_measured`` (with ``Latency``): each
    row's corrected forecast comes from a correction (``fit_calibration(..., **fit_kwargs)``) fitted without it.

    ``groups`` (one label per row, e.g. the kernel shape): rows of one group are held out together, so repeated
    measurements of a shape cannot vouch for each other. Beyond ``max_folds`` groups, groups are dealt into
    ``max_folds`` folds (leave-one-fold-out) to bound the cost.
    """
    rows = rows_measured.reset_index(drop=True)
    lat = pd.to_numeric(rows["Latency"], errors="coerce").to_numpy(dtype=float)
    labels = np.arange(len(rows)) if groups is None else np.asarray(groups)
    if len(labels) != len(rows):
        raise ValueError(f"groups has {len(labels)} labels for {len(rows)} rows")
    uniq = pd.unique(labels)
    if len(uniq) < 2:
        raise ValueError(f"leave-one-out needs at least 2 groups of rows, got {len(uniq)}")
    fold_of = {g: i % max_folds for i, g in enumerate(uniq)} if len(uniq) > max_folds else {g: i for i, g in
                                                                                             enumerate(uniq)}
    folds = np.array([fold_of[g] for g in labels])
    pred = pd.Series(np.asarray(predictor.predict_ms(rows, gpu), dtype=float), index=rows.index)
    fixed = _Precomputed(str(getattr(predictor, "family", "")), float(getattr(predictor, "floor_ms", 0.0)), pred)
    ape = np.empty(len(rows))
    for fold in np.unique(folds):
        test = folds == fold
        cal = fit_calibration(fixed, rows.loc[~test], gpu, **fit_kwargs)
        ape[test] = 100.0 * np.abs(np.asarray(cal.apply(pred[test].to_numpy(), rows.loc[test]), float) / lat[test] - 1)
    return float(np.mean(ape))
