"""Kernel rows that name the serving engine that ran them, forecast as that engine runs them.

AIConfigurator's engine tables (``gemm_engines``, ``*_attention_engines``, ``custom_allreduce``) carry the engine
(``framework``) and its release (``version``) on every row; :func:`tilecast.tiles.sources.kernel_rows` turns them
into ``engine`` / ``engine_version`` (and ``fp8_scaling``, ``engine_kernel``) columns.
:func:`forecast_engine_kernels` forecasts each (engine, release, fp8 scaling, all-reduce kernel) group with the
engine's kernel factors (:func:`engine_family_predictor`) and all-reduce (:func:`engine_comm`); a row whose
engine or release is unknown gets the reason in ``error``, the others are answered, in the input's order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.forecast.comm import DEFAULT_COMM, CommModel
from tilecast.forecast.kernels import FamilyPredictor, KernelForecast, forecast_kernels
from tilecast.serving.engine_allreduce import IMPLEMENTATIONS, engine_comm
from tilecast.serving.engine_kernels import engine_family_predictor
from tilecast.serving.engines import UnknownEngineError, UnknownEngineVersionError
from tilecast.specs import GpuSpec
from tilecast.tiles.sources import kernel_rows

#: kernel-row columns that choose how a row is forecast, and their value where absent
_GROUP_DEFAULTS = {"engine": "", "engine_version": None, "fp8_scaling": "tensor", "engine_kernel": ""}


def names_engines(frame: pd.DataFrame) -> bool:
    """Whether ``frame``'s kernel rows name a serving engine (an ``engine`` column with a value)."""
    rows = kernel_rows(frame)
    return "engine" in rows and bool((rows["engine"].fillna("").astype(str) != "").any())


def _mode(engine_kernel: str) -> str:
    """``graph`` unless the row's all-reduce kernel ran eagerly."""
    return "eager" if IMPLEMENTATIONS.get(engine_kernel, "").endswith("_eager") else "graph"


def forecast_engine_kernels(frame: pd.DataFrame, predict: FamilyPredictor, gpu: GpuSpec | None = None,
                            comm: CommModel = DEFAULT_COMM) -> KernelForecast:
    """``frame`` plus ``pred_ms`` and ``error``, each row forecast as the engine it names runs it (rows naming no
    engine as :func:`forecast_kernels` does, with ``comm``)."""
    rows = kernel_rows(frame)
    keys = pd.DataFrame({c: rows[c].astype(object).where(rows[c].notna(), d) if c in rows else d
                         for c, d in _GROUP_DEFAULTS.items()}, index=frame.index)
    keys = keys.fillna({"engine": "", "fp8_scaling": "tensor", "engine_kernel": ""})
    parts, unknown = [], {}
    for key, idx in keys.groupby(list(_GROUP_DEFAULTS), dropna=False, sort=False).groups.items():
        engine, version, scaling, kernel = key
        sub = frame.loc[idx]
        version = None if version is None or (isinstance(version, float) and np.isnan(version)) else str(version)
        try:
            if engine == "":
                result = forecast_kernels(sub, predict, gpu, comm, by_engine=False)
            else:
                wrapped = engine_family_predictor(predict, str(engine), version, fp8_scaling=str(scaling))
                result = forecast_kernels(sub, wrapped, gpu, engine_comm(str(engine), version, _mode(str(kernel))),
                                          by_engine=False)
        except (UnknownEngineError, UnknownEngineVersionError) as exc:
            parts.append(sub.assign(pred_ms=np.nan, error=str(exc)))
            continue
        parts.append(result.table)
        for op, n in result.unknown_ops.items():
            unknown[op] = unknown.get(op, 0) + n
    table = pd.concat(parts).loc[frame.index]
    if "error" in table:
        table["error"] = table["error"].fillna("")
    return KernelForecast(table, unknown)
