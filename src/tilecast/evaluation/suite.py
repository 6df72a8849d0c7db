"""Forecast every labelled workload and compare: one row per label, APE spec-only and calibrated.

Each distinct workload is built once; each GPU's workloads are stacked and forecast in one
vectorised pass (one predictor call per family per GPU). A label whose workload cannot be built or
forecast keeps its row with the reason in ``error``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pandas as pd

from tilecast.forecast import (
    GROUPS,
    FamilyPredictor,
    op_latency_ms,
    stack_frames,
    summarise_many,
    workload_frame,
)
from tilecast.metrics import ape_pct
from tilecast.specs import GpuSpec, get_gpu

log = logging.getLogger(__name__)

#: the columns every evaluation table starts with (one row per label file)
RESULT_COLUMNS = ["device", "tag", "model", "mode", "seq_len", "batch", "variant", "label_ms", "pred_ms", "ape_pct"]
EXTRA_COLUMNS = ["pred_cal_ms", "ape_cal_pct", "calibrated", "gpu", "error"]
WORKLOAD = ["model", "batch", "seq_len", "mode", "parallel", "fused"]

#: GPU -> the calibrated FamilyPredictor for it (None: no calibration possible for that GPU)
CalibratedFor = Callable[[GpuSpec], FamilyPredictor | None]


def _key(row) -> tuple:
    parallel = None if pd.isna(row.parallel) or row.parallel == "" else str(row.parallel)
    return (row.model, int(row.batch), int(row.seq_len), row.mode, parallel, bool(row.fused))


def build_frames(labels: pd.DataFrame) -> tuple[dict[tuple, pd.DataFrame], dict[tuple, str]]:
    """The op frame of every distinct labelled workload, and the error of those that cannot be built."""
    frames, errors = {}, {}
    for row in labels.drop_duplicates(WORKLOAD).itertuples(index=False):
        key = _key(row)
        try:
            frames[key] = workload_frame(*key[:4], parallel=key[4], fused=key[5])
        except (ValueError, KeyError) as exc:
            errors[key] = f"{type(exc).__name__}: {exc}"
    return frames, errors


#: per-group kernel time columns (:data:`tilecast.forecast.GROUPS`) ``forecast_labels(groups=True)`` adds
GROUP_COLUMNS = [f"ms_{g}" for g in GROUPS]
#: the interval columns ``forecast_labels(interval_level=...)`` adds (bounds beside ``pred_ms``, note last)
INTERVAL_COLUMNS = ["pred_lo_ms", "pred_hi_ms"]


def _forecast_gpu(frames: dict[tuple, pd.DataFrame], keys: list[tuple], gpu: GpuSpec,
                  predict: FamilyPredictor) -> pd.DataFrame:
    stacked = stack_frames({k: frames[k] for k in keys})
    ms = op_latency_ms(stacked, gpu, predict)
    return summarise_many(stacked, ms)


def forecast_labels(labels: pd.DataFrame, predict: FamilyPredictor, calibrated: CalibratedFor | None = None,
                    frames: tuple[dict, dict] | None = None, interval_level: float | None = None,
                    groups: bool = False) -> pd.DataFrame:
    """``labels`` (see :mod:`tilecast.evaluation.labels`) plus ``pred_ms``, ``ape_pct`` and, when
    ``calibrated`` is given, ``pred_cal_ms`` / ``ape_cal_pct`` (equal to spec-only where a GPU has no
    calibration, ``calibrated`` False). Columns: :data:`RESULT_COLUMNS` then :data:`EXTRA_COLUMNS`.

    ``interval_level`` (e.g. 0.8): ``pred_lo_ms`` / ``pred_hi_ms`` of the spec-only forecast beside ``pred_ms``
    and an ``interval_note`` last (:func:`tilecast.forecast.intervals.e2e_interval`); ``groups``: the
    forecast's kernel time per group (:data:`GROUP_COLUMNS`) last."""
    labels = labels.reset_index(drop=True)
    built, errors = frames or build_frames(labels)
    group_ms = np.full((len(labels), len(GROUPS)), np.nan)
    pred = np.full(len(labels), np.nan)
    pred_cal = np.full(len(labels), np.nan)
    is_cal = np.zeros(len(labels), dtype=bool)
    error = np.array([errors.get(_key(r), "") for r in labels.itertuples(index=False)], dtype=object)
    keys = [_key(r) for r in labels.itertuples(index=False)]
    for gpu_key, idx in labels.groupby("gpu", sort=True).indices.items():
        gpu = get_gpu(gpu_key)
        todo = [i for i in idx if keys[i] in built]
        wanted = list(dict.fromkeys(keys[i] for i in todo))
        if not wanted:
            continue
        try:
            summary = _forecast_gpu(built, wanted, gpu, predict)
        except Exception as exc:  # a predictor failing on one GPU must not lose the other GPUs' rows
            log.warning("forecast on %s failed: %s", gpu_key, exc)
            for i in todo:
                error[i] = f"{type(exc).__name__}: {exc}"
            continue
        pred[todo] = [summary["e2e_ms"].loc[[keys[i]]].iloc[0] for i in todo]
        group_ms[todo] = [summary.loc[[keys[i]], GROUP_COLUMNS].to_numpy(float)[0] for i in todo]
        cal_predict = calibrated(gpu) if calibrated is not None else None
        if cal_predict is None:
            pred_cal[todo] = pred[todo]
            continue
        e2e_cal = _forecast_gpu(built, wanted, gpu, cal_predict)["e2e_ms"]
        pred_cal[todo] = [e2e_cal.loc[[keys[i]]].iloc[0] for i in todo]
        is_cal[todo] = True
    out = labels.assign(pred_ms=pred, ape_pct=ape_pct(pred, labels["label_ms"]))
    out = out.assign(pred_cal_ms=pred_cal, ape_cal_pct=ape_pct(pred_cal, labels["label_ms"]), calibrated=is_cal,
                     error=error)
    columns = RESULT_COLUMNS + EXTRA_COLUMNS
    if interval_level is not None:
        out = pd.concat([out, label_intervals(out, group_ms, interval_level)], axis=1)
        at = columns.index("pred_ms") + 1
        columns = [*columns[:at], *INTERVAL_COLUMNS, *columns[at:], "interval_note"]
    if groups:
        out = pd.concat([out, pd.DataFrame(group_ms, columns=GROUP_COLUMNS, index=out.index)], axis=1)
        columns = [*columns, *GROUP_COLUMNS]
    return out[columns]


def label_intervals(table: pd.DataFrame, group_ms: np.ndarray, level: float) -> pd.DataFrame:
    """``pred_lo_ms``, ``pred_hi_ms`` and ``interval_note`` of every forecast label (fp32, as measured), from the
    forecast's per-group times (:func:`tilecast.forecast.intervals.e2e_interval`)."""
    from tilecast.forecast.intervals import e2e_interval, load_intervals

    ivt = load_intervals()
    lo = np.full(len(table), np.nan)
    hi = np.full(len(table), np.nan)
    notes = np.full(len(table), "", dtype=object)
    for i, row in enumerate(table.itertuples(index=False)):
        if not np.isfinite(row.pred_ms):
            continue
        mix = dict(zip(GROUPS, group_ms[i], strict=True))
        a, b, notes[i] = e2e_interval(row.mode, row.gpu, "fp32", row.pred_ms, level, ivt, mix)
        lo[i], hi[i] = float(a), float(b)
    return pd.DataFrame({"pred_lo_ms": lo, "pred_hi_ms": hi, "interval_note": notes}, index=table.index)


def ape_summary(table: pd.DataFrame, by: tuple[str, ...] = ("device", "mode", "variant")) -> pd.DataFrame:
    """Mean and max APE (spec-only and calibrated) and label count per group of ``by``."""
    ok = table[table["pred_ms"].notna()]
    g = ok.groupby(list(by), sort=True)
    out = pd.DataFrame({"labels": g.size(), "mean_ape_pct": g["ape_pct"].mean(), "max_ape_pct": g["ape_pct"].max(),
                        "mean_ape_cal_pct": g["ape_cal_pct"].mean(), "max_ape_cal_pct": g["ape_cal_pct"].max()})
    return out.round(2).reset_index()


def _paper(t: pd.DataFrame) -> pd.Series:
    """The published cells when the table knows them (:func:`tilecast.evaluation.paper.with_paper`)."""
    return t["paper_cell"].astype(bool) if "paper_cell" in t else t["variant"] == "plain"


#: headline cells: name -> row filter. ``inference`` / ``training``: the cells NeuSight published (where
#: the table marks them), ``*_all``: every plain label of that mode.
HEADLINES: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "inference": lambda t: (t["mode"] == "inference") & _paper(t),
    "training": lambda t: (t["mode"] == "training") & _paper(t),
    "inference_all": lambda t: (t["mode"] == "inference") & (t["variant"] == "plain"),
    "training_all": lambda t: (t["mode"] == "training") & (t["variant"] == "plain"),
    "fused": lambda t: t["variant"] == "fusion",
    "multi_gpu": lambda t: ~t["variant"].isin(["plain", "fusion"]),
}


def headline(table: pd.DataFrame, unseen_gpus: tuple[str, ...] = ()) -> dict[str, float]:
    """Mean APE per headline cell set, spec-only (``<cell>.mean_ape_pct``) and calibrated
    (``<cell>.mean_ape_cal_pct``), with counts; plus seen / unseen GPU means of the plain cells."""
    ok = table[table["pred_ms"].notna()]
    out: dict[str, float] = {}
    for name, select in HEADLINES.items():
        part = ok[select(ok)]
        out[f"{name}.labels"] = float(len(part))
        if len(part):
            out[f"{name}.mean_ape_pct"] = float(part["ape_pct"].mean())
            out[f"{name}.mean_ape_cal_pct"] = float(part["ape_cal_pct"].mean())
            out[f"{name}.max_ape_pct"] = float(part["ape_pct"].max())
    if unseen_gpus:
        plain = ok[ok["variant"] == "plain"]
        unseen = plain["gpu"].isin(unseen_gpus)
        for name, part in (("unseen_gpus", plain[unseen]), ("seen_gpus", plain[~unseen])):
            if len(part):
                out[f"{name}.mean_ape_pct"] = float(part["ape_pct"].mean())
                out[f"{name}.mean_ape_cal_pct"] = float(part["ape_cal_pct"].mean())
    out["all.mean_ape_pct"] = float(ok["ape_pct"].mean()) if len(ok) else float("nan")
    return out
