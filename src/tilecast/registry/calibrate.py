"""Fit a per-GPU calibration from a handful of kernels measured on that GPU and store it in the registry.

Each family present in the measurements gets a small correction (``fit_calibration``) of the predictor
behind ``tilecast-<family>@<alias>``; the set becomes a new version of ``tilecast-calibration-<gpu>``.

Nothing goes live unchecked (issue 17). Every measured row of a known family must have positive whole
shape dimensions and a positive, finite, plausible latency (:class:`CalibrationGate`: at most
``max_latency_ms``, and at most ``max_roofline_ratio`` times the GPU's roofline of that kernel);
a bad row stops the job naming the file, the row and the value. Then each family's correction must pass
the gate before anything is logged or stored: at least ``min_distinct_rows`` distinct kernel shapes,
finite parameters, finite corrected forecasts, and a leave-one-shape-out MAPE below the uncalibrated
MAPE on the same rows (a correction that does not generalise to its own measurements is refused).

Kernel microbenchmarks can disagree with the same kernels inside models (benchmarks/calibration.md: leave one
GPU out, calibrating Tesla P4 to its kernels made its end-to-end forecasts about 24 points worse). Given end-to-end
runs measured on the GPU (``model_runs``, label files laid out like ``data/neusight/labels``), the set must also
make their forecasts better than spec-only by ``gate.model_run_margin_pct`` points of mean APE, else it is
refused with the figures; without them it is stored and tagged ``tilecast.model_runs=unchecked``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import mlflow
import numpy as np
import pandas as pd

from tilecast.data.schema import kernel_dims
from tilecast.errors import UserError
from tilecast.evaluation.calibration import RUN_MARGIN_PCT, corrected
from tilecast.evaluation.suite import forecast_labels
from tilecast.metrics import MAX_MEASURED_MS, ape_pct
from tilecast.predictors.calibration import Calibration, fit_calibration, loo_mape_pct
from tilecast.registry.calibrations import CalibrationSet, FamilyCalibration, save_calibration
from tilecast.registry.forecaster import as_family_predictor
from tilecast.registry.kernel_forecast import load_registry_predictor
from tilecast.registry.lineage import frame_hash, log_lineage
from tilecast.registry.models import DEFAULT_ALIAS
from tilecast.registry.tracking import ensure_experiment
from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.ops import FP32_FAMILIES, row_families
from tilecast.tiles.roofline import roofline_ms

log = logging.getLogger("tilecast.calibrate")

_GEMM = ("B", "M", "N", "K")
#: shape columns a measured row of each family must carry (others: ``kernel_dims`` of the family)
MEASURED_DIMS: dict[str, tuple[str, ...]] = {"bmm": _GEMM, "linear": _GEMM, "tc_gemm": _GEMM,
                                             "attn_prefill": (*_GEMM, "H"), "attn_decode": (*_GEMM, "H")}
#: the roofline of a kernel, for the plausibility check, is taken as at least this (a kernel launch)
LAUNCH_MS = 0.01
_SHOWN = 12  # bad rows named in one error


class CalibrationRefused(UserError):
    """The calibration failed the gate; nothing was logged or stored. The message says which family and why."""


@dataclass(frozen=True)
class CalibrationGate:
    """What a calibration must satisfy before it is stored (``gate`` in conf/calibrate.yaml)."""

    min_distinct_rows: int = 5  # distinct kernel shapes per family
    max_latency_ms: float = MAX_MEASURED_MS  # a measured kernel above this (10 min) is a mistake
    max_roofline_ratio: float = 1e4  # ... as is one this many times slower than its roofline (launch included)
    max_folds: int = 20  # leave-one-shape-out beyond this many shapes: that many folds
    model_run_margin_pct: float = RUN_MARGIN_PCT  # points of end-to-end mean APE the set must win by on model runs

    def __post_init__(self) -> None:
        if self.min_distinct_rows < 2:
            raise UserError(f"gate.min_distinct_rows must be >= 2 (leave-one-out needs two shapes), got "
                             f"{self.min_distinct_rows!r}")
        for name in ("max_latency_ms", "max_roofline_ratio"):
            if not getattr(self, name) > 0:
                raise UserError(f"gate.{name} must be > 0, got {getattr(self, name)!r}")
        if self.max_folds < 2:
            raise UserError(f"gate.max_folds must be >= 2, got {self.max_folds!r}")
        if not (np.isfinite(self.model_run_margin_pct) and self.model_run_margin_pct >= 0):
            raise UserError(f"gate.model_run_margin_pct must be a number of points >= 0, got "
                             f"{self.model_run_margin_pct!r}")


def measured_dims(family: str) -> tuple[str, ...]:
    """Shape columns a measured row of ``family`` must carry."""
    return MEASURED_DIMS.get(family, kernel_dims(family))


def _value(v: object) -> str:
    return repr(v) if isinstance(v, str) else f"{v:g}" if isinstance(v, float) else str(v)


def _bad_dims(rows: pd.DataFrame, families: pd.Series) -> dict[int, list[str]]:
    """Row position -> problems with its shape columns (rows of a known family only)."""
    bad: dict[int, list[str]] = {}
    for fam in families.dropna().unique():
        at = np.flatnonzero((families == fam).to_numpy())
        for dim in measured_dims(fam):
            if dim not in rows:
                raise UserError(f"measurements have {fam} rows but no {dim!r} column (a {fam} kernel needs "
                                 f"{', '.join(measured_dims(fam))})")
            raw = rows[dim].to_numpy(dtype=object)[at]
            num = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=float)
            for pos, r, x in zip(at, raw, num, strict=True):
                if not np.isfinite(x):
                    bad.setdefault(int(pos), []).append(f"{dim}={_value(r)} is not a number")
                elif x <= 0 or x != np.floor(x):
                    bad.setdefault(int(pos), []).append(f"{dim}={_value(r)} is not a positive whole number")
    return bad


def check_measurements(rows: pd.DataFrame, gpu: GpuSpec, source: str = "",
                       gate: CalibrationGate | None = None) -> pd.DataFrame:
    """Measurements in the data's kernel schema, all on ``gpu`` (a ``Device`` column is optional), every row
    of a known family sound; else a ValueError naming ``source``, each bad row (0-based), column and value."""
    gate = gate or CalibrationGate()
    missing = [c for c in ("OPName", "Latency") if c not in rows]
    if missing:
        raise UserError(f"measurements need columns {missing} (the data's kernel schema: OPName, B, M, N, K "
                         f"or B, H, Latency in ms)")
    if "Device" in rows:
        other = sorted({str(d) for d in pd.unique(rows["Device"]) if get_gpu(str(d)).key != gpu.key})
        if other:
            raise UserError(f"measurements for gpu={gpu.key} ({gpu.device_name!r}) contain rows of other devices: "
                             f"{', '.join(other)}")
    rows = rows.reset_index(drop=True)
    families = row_families(rows)
    bad = _bad_dims(rows, families)
    raw = rows["Latency"].to_numpy(dtype=object)
    latency = pd.to_numeric(rows["Latency"], errors="coerce").to_numpy(dtype=float)
    known = families.notna().to_numpy()
    for pos in np.flatnonzero(known):
        x = latency[pos]
        if not np.isfinite(x) or x <= 0:
            what = "is not a number" if np.isnan(x) else "is not a positive, finite number"
            bad.setdefault(int(pos), []).append(f"Latency={_value(raw[pos])} {what} (ms)")
        elif x > gate.max_latency_ms:
            bad.setdefault(int(pos), []).append(f"Latency={x:g} ms is absurd (above gate.max_latency_ms="
                                                f"{gate.max_latency_ms:g})")
    sound = [p for p in np.flatnonzero(known) if int(p) not in bad]
    if sound:
        part = rows.iloc[sound].copy()
        for fam in families.iloc[sound].unique():
            dims = list(measured_dims(fam))
            part[dims] = part[dims].apply(pd.to_numeric)
        roof = np.maximum(np.asarray(roofline_ms(part.assign(Latency=latency[sound]), gpu), dtype=float), LAUNCH_MS)
        ratio = latency[sound] / roof
        for pos, r in zip(sound, ratio, strict=True):
            if r > gate.max_roofline_ratio:
                bad.setdefault(int(pos), []).append(
                    f"Latency={latency[pos]:g} ms is absurd ({r:.3g}x the roofline of that kernel on {gpu.key}, "
                    f"above gate.max_roofline_ratio={gate.max_roofline_ratio:g})")
    if bad:
        where = f"measurements {source}" if source else "measurements"
        shown = "; ".join(f"row {pos}: {', '.join(why)}" for pos, why in sorted(bad.items())[:_SHOWN])
        more = f"; and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
        raise UserError(f"{where}: {len(bad)} bad row(s), nothing stored (rows count from 0, the header not "
                         f"counted): {shown}{more}")
    return rows.assign(Latency=latency)


def shape_keys(rows: pd.DataFrame, family: str) -> np.ndarray:
    """One label per row naming its kernel shape (and dtype when given): repeated measurements share it."""
    cols = [*measured_dims(family), *(["dtype"] if "dtype" in rows else [])]
    return rows[cols].astype(str).agg("x".join, axis=1).to_numpy()


@dataclass(frozen=True)
class _Fitted:
    family: str
    part: pd.DataFrame
    calibration: Calibration | None
    metrics: dict[str, float]
    problems: list[str]


def _fit_family(fam: str, part: pd.DataFrame, predictor, gpu: GpuSpec, gate: CalibrationGate) -> _Fitted:
    """The correction of one family and everything the gate says against it."""
    keys = shape_keys(part, fam)
    n_distinct = len(pd.unique(keys))
    lat = part["Latency"].to_numpy(float)
    before = np.asarray(predictor.predict_ms(part, gpu), dtype=float)
    metrics = {"rows": float(len(part)), "distinct_rows": float(n_distinct)}
    if n_distinct < gate.min_distinct_rows:
        return _Fitted(fam, part, None, metrics, [
            f"{fam}: {n_distinct} distinct kernel shape(s) among {len(part)} rows, at least "
            f"gate.min_distinct_rows={gate.min_distinct_rows} needed"])
    if not (np.all(np.isfinite(before)) and np.all(before > 0)):
        return _Fitted(fam, part, None, metrics, [f"{fam}: the predictor's forecasts of the measured rows are not "
                                                  f"all positive and finite"])
    cal = fit_calibration(predictor, part, gpu)
    after = np.asarray(cal.apply(before, part), dtype=float)
    metrics |= {"mape_before_pct": float(ape_pct(before, lat).mean()),
                "mape_after_pct": float(ape_pct(after, lat).mean())}
    problems = []
    if cal.non_finite():
        problems.append(f"{fam}: the fitted correction has non-finite parameters ({', '.join(cal.non_finite()[:5])})")
    elif not np.all(np.isfinite(after)):
        problems.append(f"{fam}: corrected forecasts are not finite")
    else:
        metrics["mape_loo_pct"] = loo_mape_pct(predictor, part, gpu, groups=keys, max_folds=gate.max_folds)
        if not metrics["mape_loo_pct"] < metrics["mape_before_pct"] * (1 - 1e-9):
            problems.append(f"{fam}: leave-one-shape-out MAPE {metrics['mape_loo_pct']:.2f}% does not improve on the "
                            f"uncalibrated {metrics['mape_before_pct']:.2f}% ({n_distinct} distinct shapes)")
    return _Fitted(fam, part, cal, metrics, problems)


def check_model_runs(gpu: GpuSpec, runs: pd.DataFrame, fitted: list[_Fitted], alias: str,
                     gate: CalibrationGate, source: str = "") -> dict[str, float]:
    """Forecast ``runs`` (end-to-end labels, :mod:`tilecast.evaluation.labels`) on ``gpu`` spec-only and with the
    ``fitted`` corrections; :class:`CalibrationRefused` unless the corrected mean APE beats spec-only by
    ``gate.model_run_margin_pct`` points. Returns the figures (metrics of the calibration run)."""
    mine = runs.loc[runs["gpu"] == gpu.key] if "gpu" in runs else runs.iloc[:0]
    if mine.empty:
        found = ", ".join(sorted(map(str, pd.unique(runs["gpu"])))) if "gpu" in runs and len(runs) else "none"
        raise UserError(f"model_runs {source}: no end-to-end label of {gpu.key} (labels found for: {found})")
    base = load_registry_predictor(alias, FP32_FAMILIES, calibrate=False)  # the labels are fp32
    predictors = {f: lp.predictor for f, lp in base.loaded.items()}
    corrections = {f.family: f.calibration for f in fitted if f.calibration is not None}
    table = forecast_labels(mine, as_family_predictor(predictors),
                            calibrated=lambda g: corrected(predictors, corrections))
    ok = table["pred_ms"].notna()
    if not ok.any():
        raise UserError(f"model_runs {source}: none of the {len(mine)} labels of {gpu.key} could be forecast: "
                         f"{table['error'].iloc[0]}")
    spec, cal = float(table.loc[ok, "ape_pct"].mean()), float(table.loc[ok, "ape_cal_pct"].mean())
    if not cal <= spec - gate.model_run_margin_pct:
        where = f" from {source}" if source else ""
        raise CalibrationRefused(
            f"calibration of {gpu.key} refused, nothing stored: its kernel measurements disagree with its "
            f"{int(ok.sum())} model runs{where}: calibrated to the kernels, the runs are forecast {cal:.1f}% off "
            f"against {spec:.1f}% spec-only (the set must win by gate.model_run_margin_pct="
            f"{gate.model_run_margin_pct:g} points)")
    return {"model_runs.labels": float(ok.sum()), "model_runs.spec_only_mape_pct": spec,
            "model_runs.calibrated_mape_pct": cal}


def calibrate_gpu(gpu: GpuSpec, measurements: pd.DataFrame, alias: str = DEFAULT_ALIAS,
                  experiment: str = "tilecast-calibration", config_yaml: str | None = None,
                  source: str = "", gate: CalibrationGate | None = None,
                  model_runs: pd.DataFrame | None = None, runs_source: str = "") -> CalibrationSet:
    """Fit one correction per family on ``gpu``; when every one passes ``gate`` (and, given ``model_runs``, the set
    improves their end-to-end forecasts: :func:`check_model_runs`), log a run and register a new calibration
    version (``@current``). A bad row or a failed gate raises (ValueError / :class:`CalibrationRefused`) before
    anything is logged or stored."""
    gate = gate or CalibrationGate()
    rows = check_measurements(measurements, gpu, source, gate)
    families = row_families(rows)
    unknown = rows.loc[families.isna().to_numpy(), "OPName"].astype(str).value_counts()
    for op, n in unknown.items():
        log.warning("%d measured rows of op %r: no predictor covers it; not used", n, op)
    present = list(families.dropna().unique())
    if not present:
        raise UserError(f"measurements have no rows of a known op family (ops: {', '.join(unknown.index)})")
    rp = load_registry_predictor(alias, present, calibrate=False)
    for note in rp.notes:
        log.warning(note)
    fitted = [_fit_family(fam, rows.loc[(families == fam).to_numpy()], rp.loaded[fam].predictor, gpu, gate)
              for fam in present]
    problems = [p for f in fitted for p in f.problems]
    if problems:
        where = f" from {source}" if source else ""
        raise CalibrationRefused(f"calibration of {gpu.key}{where} refused, nothing stored: {'; '.join(problems)}")
    if model_runs is not None:
        run_metrics = check_model_runs(gpu, model_runs, fitted, alias, gate, runs_source)
        log.info("model runs of %s: %.1f%% calibrated against %.1f%% spec-only", gpu.key,
                 run_metrics["model_runs.calibrated_mape_pct"], run_metrics["model_runs.spec_only_mape_pct"])
    else:
        run_metrics = {}
        log.warning("calibration of %s not checked against its model runs (model_runs=<label dir>): kernel "
                    "microbenchmarks can disagree with the same kernels inside models (benchmarks/calibration.md)",
                    gpu.key)
    out: dict[str, FamilyCalibration] = {}
    with mlflow.start_run(experiment_id=ensure_experiment(experiment), run_name=f"calibrate-{gpu.key}"):
        log_lineage(config_yaml, job="calibrate", gpu=gpu.key, measurements_hash=frame_hash(rows), source=source)
        mlflow.log_params({"gpu": gpu.key, "alias": alias, "rows": len(rows), "unknown_rows": int(unknown.sum()),
                           "gate.min_distinct_rows": gate.min_distinct_rows,
                           **{f"base.{f}": f"{lp.version.name} v{lp.version.version}" for f, lp in rp.loaded.items()}})
        mlflow.set_tag("tilecast.model_runs", "checked" if run_metrics else "unchecked")
        if run_metrics:
            mlflow.log_metrics(run_metrics)
            mlflow.log_param("model_runs", runs_source or "in memory")
        for f in fitted:
            lp = rp.loaded[f.family]
            metrics = {k: v for k, v in f.metrics.items() if k not in ("rows",)}
            mlflow.log_metrics({f"{f.family}.{k}": v for k, v in metrics.items()} | {f"{f.family}.rows": len(f.part)})
            out[f.family] = FamilyCalibration(f.calibration, lp.version.name, str(lp.version.version), len(f.part),
                                              metrics)
            mlflow.log_param(f"{f.family}.base", f.calibration.base)
            log.info("%s on %s: %d rows (%d shapes), MAPE %.1f%% -> %.1f%% in-sample, %.1f%% leave-one-out (vs %s "
                     "v%s; correction of the %s)", f.family, gpu.key, len(f.part), metrics["distinct_rows"],
                     metrics["mape_before_pct"], metrics["mape_after_pct"], metrics["mape_loo_pct"],
                     lp.version.name, lp.version.version, f.calibration.base)
        saved = save_calibration(CalibrationSet(gpu.key, out), rows,
                                 reason=f"jobs/calibrate.py: {len(rows)} measured rows ({source or 'in memory'})")
    log.info("stored %s (@current)", saved.label)
    return saved
