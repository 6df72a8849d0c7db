"""Fleet totals for a workload mix (``conf/fleet/<name>.yaml``) from a score table.

A workload is a model in one precision (``dtype``, fp32 unless given). Per workload: the cheapest GPU
(per 1M tokens) whose cell fits and meets the workload's step-time target, the GPUs needed for its
sustained demand (``ceil(demand / tokens_per_s) * n_gpus``) and their hourly and monthly cost; then
the mix priced on every single GPU type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.reports.tables import fitting
from tilecast.scoring.matrix import NO_PARALLEL, canonical_parallel
from tilecast.specs import get_model
from tilecast.specs.catalog import positive, positive_int
from tilecast.tiles.dtypes import WORKLOAD_DTYPES


class FleetError(UserError):
    """An invalid fleet config (names the workload and the field)."""


@dataclass(frozen=True)
class FleetWorkload:
    name: str
    model: str
    mode: str
    batch: int
    seq_len: int
    tokens_per_s: float
    latency_target_ms: float
    parallel: str = NO_PARALLEL
    fused: bool = False
    dtype: str = "fp32"


@dataclass(frozen=True)
class Fleet:
    name: str
    workloads: tuple[FleetWorkload, ...]
    hours_per_month: float = 730.0


def load_fleet(config: Mapping[str, Any]) -> Fleet:
    """Validate a fleet mapping; model names are checked against the catalog."""
    name = str(config.get("name") or "fleet")
    items = config.get("workloads") or []
    if not items:
        raise FleetError(f"fleet {name!r}: field 'workloads' is empty")
    out = []
    for i, w in enumerate(items):
        where = f"fleet {name!r}, workloads[{i}]"
        for field in ("name", "model", "mode", "batch", "seq_len", "tokens_per_s", "latency_target_ms"):
            if w.get(field) is None:
                raise FleetError(f"{where}: missing field {field!r}")
        for field in ("batch", "seq_len"):
            if not positive_int(w[field]):
                raise FleetError(f"{where}: field {field!r} has invalid value {w[field]!r} (a positive integer)")
        for field in ("tokens_per_s", "latency_target_ms"):
            if not positive(w[field]):
                raise FleetError(f"{where}: field {field!r} has invalid value {w[field]!r} (a positive number)")
        if w["mode"] not in ("inference", "training"):
            raise FleetError(f"{where}: field 'mode' has invalid value {w['mode']!r}")
        dtype = w.get("dtype") or "fp32"
        if dtype not in WORKLOAD_DTYPES:
            raise FleetError(f"{where}: field 'dtype' has invalid value {dtype!r} (expected one of "
                             f"{', '.join(WORKLOAD_DTYPES)})")
        out.append(FleetWorkload(str(w["name"]), get_model(str(w["model"])).key, str(w["mode"]), int(w["batch"]),
                                 int(w["seq_len"]), float(w["tokens_per_s"]), float(w["latency_target_ms"]),
                                 canonical_parallel(w.get("parallel")), bool(w.get("fused", False)), str(dtype)))
    hours = config.get("hours_per_month", 730)
    if not positive(hours):
        raise FleetError(f"fleet {name!r}: field 'hours_per_month' has invalid value {hours!r}")
    return Fleet(name, tuple(out), float(hours))


def _cells_of(scores: pd.DataFrame, w: FleetWorkload) -> pd.DataFrame:
    ok = fitting(scores)
    return ok.loc[(ok["model"] == w.model) & (ok["mode"] == w.mode) & (ok["batch"] == w.batch)
                  & (ok["seq_len"] == w.seq_len) & (ok["parallel"] == w.parallel)
                  & (ok["fused"].astype(bool) == w.fused) & (ok["dtype"] == w.dtype)]


def _size(cells: pd.DataFrame, w: FleetWorkload, hours: float) -> pd.DataFrame:
    """GPUs needed and cost per hour / month of each cell for workload ``w``."""
    replicas = np.ceil(w.tokens_per_s / cells["tokens_per_s"].to_numpy(dtype=float))
    gpus = replicas * cells["n_gpus"].to_numpy(dtype=float)
    usd_h = gpus * cells["usd_per_gpu_hour"].to_numpy(dtype=float)
    return cells.assign(gpus_needed=gpus.astype(int), usd_per_hour=usd_h, usd_per_month=usd_h * hours,
                        meets=cells["e2e_ms"].to_numpy(dtype=float) <= w.latency_target_ms)


def fleet_plan(scores: pd.DataFrame, fleet: Fleet) -> pd.DataFrame:
    """One row per workload (the cheapest GPU meeting its target) plus a ``total`` row."""
    rows = []
    for w in fleet.workloads:
        base = {"workload": w.name, "model": w.model, "dtype": w.dtype, "mode": w.mode, "batch": w.batch,
                "seq_len": w.seq_len, "tokens_per_s_demand": w.tokens_per_s, "target_ms": w.latency_target_ms}
        cells = _cells_of(scores, w)
        sized = _size(cells, w, fleet.hours_per_month) if len(cells) else cells
        meets = sized.loc[sized["meets"]] if len(sized) else sized
        if meets.empty:
            why = "not in this run's matrix" if cells.empty else "no GPU fits and meets the target"
            rows.append({**base, "gpu": why})
            continue
        best = meets.loc[meets["usd_per_hour"].idxmin()]
        rows.append({**base, "gpu": best["gpu"], "e2e_ms": best["e2e_ms"], "gpus_needed": int(best["gpus_needed"]),
                     "usd_per_hour": best["usd_per_hour"], "usd_per_month": best["usd_per_month"]})
    out = pd.DataFrame(rows)
    for col in ("e2e_ms", "gpus_needed", "usd_per_hour", "usd_per_month"):
        if col not in out:
            out[col] = np.nan
    total = {"workload": "total", "gpus_needed": out["gpus_needed"].sum(min_count=1),
             "usd_per_hour": out["usd_per_hour"].sum(min_count=1),
             "usd_per_month": out["usd_per_month"].sum(min_count=1)}
    out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    for col in ("batch", "seq_len", "gpus_needed"):
        out[col] = out[col].astype("Int64")
    return out


def fleet_by_gpu(scores: pd.DataFrame, fleet: Fleet) -> pd.DataFrame:
    """The whole mix on one GPU type: GPUs and $/month per GPU; blank where some workload cannot run there."""
    per = []
    for w in fleet.workloads:
        cells = _cells_of(scores, w)
        if cells.empty:
            continue
        sized = _size(cells, w, fleet.hours_per_month)
        sized = sized.loc[sized["meets"]]
        per.append(sized[["gpu", "gpus_needed", "usd_per_month"]].assign(workload=w.name))
    if not per:
        return pd.DataFrame(columns=["gpu", "workloads_served", "gpus_needed", "usd_per_month"])
    allw = pd.concat(per, ignore_index=True)
    agg = allw.groupby("gpu").agg(workloads_served=("workload", "nunique"), gpus_needed=("gpus_needed", "sum"),
                                  usd_per_month=("usd_per_month", "sum")).reset_index()
    complete = agg["workloads_served"] == len(fleet.workloads)
    agg["gpus_needed"] = agg["gpus_needed"].astype("Int64").where(complete, pd.NA)
    agg.loc[~complete, "usd_per_month"] = math.nan
    return agg.sort_values(["usd_per_month", "gpu"], na_position="last").reset_index(drop=True)
