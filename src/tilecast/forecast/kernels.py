"""Forecast kernel rows of any shipped source schema family by family, keeping the input's row order.

The input is converted to kernel rows (:mod:`tilecast.tiles.sources`); each row's GPU comes from
``gpu`` or else its ``device`` / ``Device`` / ``system`` column. A row whose GPU is unknown, whose
dtype that GPU has no peak for, or whose op no predictor covers gets an ``error`` and an empty
``pred_ms``; every other row is answered. NCCL collectives are timed by the communication model
over the GPU's link (:mod:`tilecast.forecast.comm`), expert-parallel all-to-all rows (``a2a_dispatch`` /
``a2a_combine``) and DeepEP tables by :mod:`tilecast.forecast.a2a`. Rows that name the serving engine that
ran them (AIConfigurator's engine tables) are forecast as that engine runs them
(:mod:`tilecast.serving.engine_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.forecast.comm import COLLECTIVE_FACTORS, DEFAULT_COMM, CommModel
from tilecast.specs import GpuSpec, SpecError, UnknownSpecError, get_gpu
from tilecast.tiles.a2a import A2A_OPS
from tilecast.tiles.dtypes import bytes_per_element, normalise_dtype, peak_dtype, row_dtypes
from tilecast.tiles.moe import moe_row_errors
from tilecast.tiles.moe_sources import DEEPEP_SCHEMAS
from tilecast.tiles.ops import ATTENTION_OPS, FAMILY_DIMS, GEMM_OPS, MLA_OPS, MOE_MLA_FAMILIES, MOE_OPS, row_families
from tilecast.tiles.sources import kernel_rows, source_schema

#: predicts ms for rows of one family on ``gpu`` (or each row's Device when gpu is None)
FamilyPredictor = Callable[[str, pd.DataFrame, GpuSpec | None], np.ndarray]


@dataclass
class KernelForecast:
    """Input rows plus ``pred_ms`` (and ``error`` where a row could not be answered); ``unknown_ops``
    counts rows of ops no predictor covers."""

    table: pd.DataFrame
    unknown_ops: dict[str, int] = field(default_factory=dict)


def _row_gpus(rows: pd.DataFrame, gpu: GpuSpec | None) -> tuple[pd.Series, dict[str, GpuSpec], dict[str, str]]:
    """Each row's device name, the GPUs they resolve to, and the error of each name that does not."""
    if gpu is not None:
        return pd.Series(gpu.device_name, index=rows.index), {gpu.device_name: gpu}, {}
    if "Device" not in rows or rows["Device"].isna().all():
        raise UserError("rows name no GPU (no device / Device / system column): name one with gpu=<key>")
    names = rows["Device"].astype(str)
    specs, errors = {}, {}
    for name in pd.unique(names):
        try:
            specs[name] = get_gpu(name)
        except (SpecError, UnknownSpecError) as exc:
            errors[name] = str(exc).split("; all known:")[0]
    return names, specs, errors


def _dtype_errors(rows: pd.DataFrame, names: pd.Series, specs: dict[str, GpuSpec]) -> tuple[pd.Series, pd.Series]:
    """Per row: why its dtype is unknown or its GPU cannot run its GEMM / attention dtype (empty where it
    can), and the row's dtype in the project's names (where absent: ``bf16`` for MoE / MLA rows, else ``fp32``;
    ``fp32`` where unknown: such a row is not forecast)."""
    out = pd.Series("", index=rows.index, dtype=object)
    dtypes = pd.Series("fp32", index=rows.index, dtype=object)
    default = rows["OPName"].astype(str).isin(MOE_OPS | MLA_OPS).map({True: "bf16", False: "fp32"})
    raw = (rows["dtype"].astype(object).where(rows["dtype"].notna(), default).astype(str) if "dtype" in rows
           else default)
    keys = pd.DataFrame({"gpu": names, "dtype": raw,
                         "tensor": rows["OPName"].astype(str).isin(GEMM_OPS | ATTENTION_OPS | MOE_OPS | MLA_OPS)})
    for (name, value, tensor), idx in keys.groupby(["gpu", "dtype", "tensor"]).groups.items():
        try:
            dtypes[idx] = dtype = normalise_dtype(value)
            if tensor and name in specs:
                specs[name].peak_gflops(peak_dtype(dtype))
        except (SpecError, ValueError) as exc:  # DtypeError is a ValueError
            out[idx] = str(exc)
    return out, dtypes


#: dims every row of a family must carry as positive numbers
_FAMILY_DIMS = {"bmm": "BMNK", "linear": "MNK", "tc_gemm": "BMNK", "attn_prefill": "BMNKH", "attn_decode": "BMNKH",
                **{fam: FAMILY_DIMS[fam] for fam in MOE_MLA_FAMILIES}}


def _dim_errors(rows: pd.DataFrame, families: pd.Series) -> pd.Series:
    """Per row: the first dim of its family that is missing, not a number or not positive (empty if none)."""
    out = pd.Series("", index=rows.index, dtype=object)
    for fam in families.dropna().unique():
        mask = families == fam
        for dim in _FAMILY_DIMS.get(fam, "BH"):
            raw = rows.loc[mask, dim] if dim in rows else pd.Series(np.nan, index=rows.index[mask])
            value = pd.to_numeric(raw, errors="coerce")
            bad = (~np.isfinite(value.to_numpy(float)) | (value.to_numpy(float) <= 0)) & (out[mask] == "").to_numpy()
            idx = value.index[bad]
            out[idx] = [f"{dim}={v!r} is not a positive number" for v in raw[bad]]
    return out


def _routing_errors(rows: pd.DataFrame, families: pd.Series) -> pd.Series:
    """Per ``moe`` row: why its routing cannot be costed (:func:`tilecast.tiles.moe.moe_row_errors`)."""
    out = pd.Series("", index=rows.index, dtype=object)
    moe = (families == "moe").to_numpy()
    if moe.any():
        part = rows.loc[moe]
        dist = (part["distribution"].astype(object).where(part["distribution"].notna(), "balanced")
                if "distribution" in part else "balanced")
        out[moe] = moe_row_errors(*(pd.to_numeric(part[c], errors="coerce").to_numpy(float)
                                    for c in ("experts", "topk", "moe_ep")), np.asarray(dist, dtype=object))
    return out


def forecast_kernels(frame: pd.DataFrame, predict: FamilyPredictor, gpu: GpuSpec | None = None,
                     comm: CommModel = DEFAULT_COMM, by_engine: bool = True) -> KernelForecast:
    """``frame`` (any shipped schema) plus ``pred_ms`` and ``error``: one vectorised call per family and GPU.
    With ``by_engine`` (the default) rows that name a serving engine are forecast as it runs them."""
    schema = source_schema(frame)
    if schema in DEEPEP_SCHEMAS:
        from tilecast.forecast.a2a import forecast_deepep

        return KernelForecast(forecast_deepep(frame, schema, gpu))
    if by_engine:
        from tilecast.serving.engine_rows import forecast_engine_kernels, names_engines

        if names_engines(frame):
            return forecast_engine_kernels(frame, predict, gpu, comm)
    rows = kernel_rows(frame)
    if "OPName" not in rows:
        raise UserError("kernel rows need an 'OPName' column (the data's schema)")
    names, specs, gpu_errors = _row_gpus(rows, gpu)
    error = names.map(gpu_errors).astype(object).fillna("")
    dtype_errors, dtypes = _dtype_errors(rows, names, specs)
    rows = rows.assign(dtype=dtypes)
    error = error.where(error != "", dtype_errors)
    families = row_families(rows)
    error = error.where(error != "", _dim_errors(rows, families))
    error = error.where(error != "", _routing_errors(rows, families))
    ops = rows["OPName"].astype(str)
    collective = ops.isin(COLLECTIVE_FACTORS)
    a2a = ops.isin(A2A_OPS)
    if a2a.any():
        from tilecast.forecast.a2a import a2a_errors

        error[a2a] = error[a2a].where(error[a2a] != "", a2a_errors(rows.loc[a2a]))
    uncovered = families.isna() & ~collective & ~a2a & (error == "")
    error[uncovered] = "no predictor covers op " + ops[uncovered].map(repr)
    pred = pd.Series(np.nan, index=rows.index)
    ok = error == ""
    for name, spec in specs.items():
        mine = ok & (names == name)
        for fam in families[mine].dropna().unique():
            mask = mine & (families == fam)
            pred[mask] = np.asarray(predict(fam, rows.loc[mask], gpu), dtype=float)
        if (mine & a2a).any():
            from tilecast.forecast.a2a import a2a_ms

            pred[mine & a2a] = a2a_ms(rows.loc[mine & a2a], gpu or spec)
        coll = mine & collective
        for op in ops[coll].unique():
            mask = coll & (ops == op)
            part = rows.loc[mask]
            nbytes = pd.to_numeric(part["H"]).to_numpy(float) * bytes_per_element(row_dtypes(part))
            pred[mask] = comm.collective_ms(op, nbytes, spec, pd.to_numeric(part["B"]).to_numpy(float))
    out = frame.copy()
    out["pred_ms"] = pred.to_numpy()
    if (error != "").any():
        out["error"] = error.to_numpy()
    unknown = ops[uncovered].value_counts().to_dict()
    return KernelForecast(out, {str(k): int(v) for k, v in unknown.items()})
