"""Fit a per-GPU calibration from a handful of kernels measured on that GPU and store it in the registry.

Each family present in the measurements gets a small correction (``fit_calibration``) of the predictor
behind ``tilecast-<family>@<alias>``; the set becomes a new version of ``tilecast-calibration-<gpu>``.
"""

from __future__ import annotations

import logging

import mlflow
import numpy as np
import pandas as pd

from tilecast.metrics import ape_pct
from tilecast.predictors.calibration import fit_calibration
from tilecast.registry.calibrations import CalibrationSet, FamilyCalibration, save_calibration
from tilecast.registry.kernel_forecast import load_registry_predictor
from tilecast.registry.lineage import frame_hash, log_lineage
from tilecast.registry.models import DEFAULT_ALIAS
from tilecast.registry.tracking import ensure_experiment
from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.ops import family_of

log = logging.getLogger("tilecast.calibrate")


def check_measurements(rows: pd.DataFrame, gpu: GpuSpec) -> pd.DataFrame:
    """Measurements in the data's kernel schema, all on ``gpu`` (a ``Device`` column is optional)."""
    missing = [c for c in ("OPName", "Latency") if c not in rows]
    if missing:
        raise ValueError(f"measurements need columns {missing} (the data's kernel schema: OPName, B, M, N, K "
                         f"or B, H, Latency in ms)")
    if "Device" in rows:
        other = sorted({str(d) for d in pd.unique(rows["Device"]) if get_gpu(str(d)).key != gpu.key})
        if other:
            raise ValueError(f"measurements for gpu={gpu.key} ({gpu.device_name!r}) contain rows of other devices: "
                             f"{', '.join(other)}")
    latency = pd.to_numeric(rows["Latency"], errors="coerce")
    bad = rows.index[~(latency > 0)]
    if len(bad):
        raise ValueError(f"measurements: Latency must be a positive number (ms); bad rows (0-based): "
                         f"{', '.join(map(str, bad[:10]))}")
    return rows.reset_index(drop=True).assign(Latency=latency.to_numpy(float))


def calibrate_gpu(gpu: GpuSpec, measurements: pd.DataFrame, alias: str = DEFAULT_ALIAS,
                  experiment: str = "tilecast-calibration", config_yaml: str | None = None,
                  source: str = "") -> CalibrationSet:
    """Fit one correction per family on ``gpu``, log a run, register a new calibration version (``@current``)."""
    rows = check_measurements(measurements, gpu)
    families = rows["OPName"].astype(str).map(family_of)
    unknown = rows.loc[families.isna(), "OPName"].astype(str).value_counts()
    for op, n in unknown.items():
        log.warning("%d measured rows of op %r: no predictor covers it; not used", n, op)
    present = list(families.dropna().unique())
    if not present:
        raise ValueError(f"measurements have no rows of a known op family (ops: {', '.join(unknown.index)})")
    rp = load_registry_predictor(alias, present, calibrate=False)
    for note in rp.notes:
        log.warning(note)
    out: dict[str, FamilyCalibration] = {}
    with mlflow.start_run(experiment_id=ensure_experiment(experiment), run_name=f"calibrate-{gpu.key}"):
        log_lineage(config_yaml, job="calibrate", gpu=gpu.key, measurements_hash=frame_hash(rows), source=source)
        mlflow.log_params({"gpu": gpu.key, "alias": alias, "rows": len(rows), "unknown_rows": int(unknown.sum()),
                           **{f"base.{f}": f"{lp.version.name} v{lp.version.version}" for f, lp in rp.loaded.items()}})
        for fam in present:
            part = rows.loc[(families == fam).to_numpy()]
            lp = rp.loaded[fam]
            before = np.asarray(lp.predictor.predict_ms(part, gpu), dtype=float)
            cal = fit_calibration(lp.predictor, part, gpu)
            after = np.asarray(cal.apply(before, part), dtype=float)
            metrics = {"mape_before_pct": float(ape_pct(before, part["Latency"]).mean()),
                       "mape_after_pct": float(ape_pct(after, part["Latency"]).mean())}
            mlflow.log_metrics({f"{fam}.{k}": v for k, v in metrics.items()} | {f"{fam}.rows": len(part)})
            out[fam] = FamilyCalibration(cal, lp.version.name, str(lp.version.version), len(part), metrics)
            mlflow.log_param(f"{fam}.base", cal.base)
            log.info("%s on %s: %d rows, in-sample MAPE %.1f%% -> %.1f%% (vs %s v%s; correction of the %s)", fam,
                     gpu.key, len(part), metrics["mape_before_pct"], metrics["mape_after_pct"], lp.version.name,
                     lp.version.version, cal.base)
        saved = save_calibration(CalibrationSet(gpu.key, out), rows,
                                 reason=f"jobs/calibrate.py: {len(rows)} measured rows ({source or 'in memory'})")
    log.info("stored %s (@current)", saved.label)
    return saved
