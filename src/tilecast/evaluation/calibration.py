"""The calibration tier of the evaluation: per GPU and family, a small correction fitted on at most
``n_rows`` of that GPU's kernel test rows (drawn with a fixed seed), applied on top of the spec-only
forecast. A GPU without kernel rows (or a family without any) stays spec-only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.evaluation.suite import CalibratedFor
from tilecast.forecast import FamilyPredictor
from tilecast.predictors import KernelPredictor, evaluation_rows
from tilecast.predictors.calibration import Calibration, fit_calibration
from tilecast.specs import GpuSpec

log = logging.getLogger(__name__)


def calibration_rows(family: str, gpu: GpuSpec, n_rows: int = 20, seed: int = 0) -> pd.DataFrame:
    """At most ``n_rows`` kernel test rows of ``family`` measured on ``gpu`` (seeded sample, source order)."""
    rows = evaluation_rows(family, devices=[gpu.device_name])
    if len(rows) > n_rows:
        rows = rows.sample(n=n_rows, random_state=seed).sort_index()
    return rows.reset_index(drop=True)


def calibrated_for(predictors: Mapping[str, KernelPredictor], n_rows: int = 20, seed: int = 0,
                   **fit_kwargs: Any) -> CalibratedFor:
    """GPU -> a FamilyPredictor with that GPU's corrections (None when it has no kernel rows at all);
    ``fit_kwargs`` go to :func:`~tilecast.predictors.calibration.fit_calibration`."""
    cache: dict[str, FamilyPredictor | None] = {}

    def for_gpu(gpu: GpuSpec) -> FamilyPredictor | None:
        if gpu.key in cache:
            return cache[gpu.key]
        corrections = {}
        for fam, predictor in predictors.items():
            rows = calibration_rows(fam, gpu, n_rows, seed)
            if len(rows):
                corrections[fam] = fit_calibration(predictor, rows, gpu, **fit_kwargs)
        if not corrections:
            log.info("no kernel test rows of %s: its calibrated forecast is the spec-only one", gpu.key)
            cache[gpu.key] = None
            return None
        cache[gpu.key] = corrected(predictors, corrections)
        return cache[gpu.key]

    return for_gpu


def corrected(predictors: Mapping[str, KernelPredictor], corrections: Mapping[str, Calibration]) -> FamilyPredictor:
    """A FamilyPredictor: each family's forecast with its correction applied (families without one as they are)."""

    def predict(family: str, rows: pd.DataFrame, g: GpuSpec | None) -> np.ndarray:
        pred = np.asarray(predictors[family].predict_ms(rows, g), dtype=float)
        cal = corrections.get(family)
        return pred if cal is None else np.asarray(cal.apply(pred, rows), dtype=float)

    return predict


#: points of mean APE a kernel calibration must win by, on a GPU's other model runs, before it is used
RUN_MARGIN_PCT = 0.5  # chosen leave-one-GPU-out: benchmarks/calibration.md


def check_against_runs(table: pd.DataFrame, margin_pct: float = RUN_MARGIN_PCT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keep a label's calibrated forecast only where the calibration earned it on its GPU's *other* model runs.

    Kernel microbenchmarks can disagree with the same kernels inside a model (a GPU that throttles under
    sustained load, a library that picks other kernels in a graph): calibrating toward them then makes
    end-to-end forecasts worse. So for each calibrated label, the labels of the same GPU measured on other
    models (leave one model out: the label itself never takes part) decide: calibrated is used when its mean
    APE there is at least ``margin_pct`` points below spec-only's, else the label falls back to spec-only
    (``calibrated`` False) and ``calibration_note`` says why. With no other model measured on the GPU the
    calibration is unchecked and kept, which the note says.

    Returns the table (``pred_cal_ms``, ``ape_cal_pct``, ``calibrated`` updated; ``calibration_note`` added) and
    one row per calibrated GPU: its labels, spec-only and kernel-calibrated mean APE over all of them, the
    labels kept calibrated, and ``disagrees`` (calibrated worse than spec-only by more than ``margin_pct``).
    """
    if not np.isfinite(margin_pct) or margin_pct < 0:
        raise UserError(f"calibration margin must be a finite number of points >= 0, got {margin_pct!r}")
    out = table.reset_index(drop=True)
    notes = np.full(len(out), "", dtype=object)
    ok = out["calibrated"].to_numpy(bool) & out["pred_ms"].notna().to_numpy() & out["pred_cal_ms"].notna().to_numpy()
    gpus = []
    for gpu, idx in out.loc[ok].groupby("gpu", sort=True).indices.items():
        rows = out.loc[ok].iloc[idx]
        spec, cal = rows["ape_pct"].to_numpy(float), rows["ape_cal_pct"].to_numpy(float)
        models = rows["model"].astype(str).to_numpy()
        keep = np.ones(len(rows), dtype=bool)
        for i, model in enumerate(models):
            others = models != model
            if not others.any():
                notes[rows.index[i]] = f"calibration unchecked: no other model measured on {gpu}"
                continue
            s, c = spec[others].mean(), cal[others].mean()
            if c > s - margin_pct:
                keep[i] = False
                notes[rows.index[i]] = (f"spec-only: on {gpu}'s other model runs the kernel calibration gives "
                                        f"{c:.1f}% against {s:.1f}% spec-only (needs {margin_pct:g} points better)")
        back = rows.index[~keep]
        out.loc[back, "pred_cal_ms"] = out.loc[back, "pred_ms"]
        out.loc[back, "ape_cal_pct"] = out.loc[back, "ape_pct"]
        out.loc[back, "calibrated"] = False
        gpus.append({"gpu": gpu, "labels": len(rows), "spec_only_pct": spec.mean(), "kernel_calibrated_pct": cal.mean(),
                     "kept": int(keep.sum()), "disagrees": bool(cal.mean() > spec.mean() + margin_pct)})
    out["calibration_note"] = notes
    return out, pd.DataFrame(gpus, columns=["gpu", "labels", "spec_only_pct", "kernel_calibrated_pct", "kept",
                                            "disagrees"])


def disagreement_lines(per_gpu: pd.DataFrame) -> list[str]:
    """One line per GPU whose kernel measurements disagree with its model runs (:func:`check_against_runs`)."""
    return [f"{r.gpu}: its kernel measurements disagree with its model runs: calibrated to them, its {r.labels} "
            f"end-to-end labels are {r.kernel_calibrated_pct:.1f}% off against {r.spec_only_pct:.1f}% spec-only; "
            f"{r.labels - r.kept} of them fall back to spec-only"
            for r in per_gpu.itertuples(index=False) if r.disagrees]
