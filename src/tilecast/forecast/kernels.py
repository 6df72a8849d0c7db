"""Forecast kernel rows of any shipped source schema family by family, keeping the input's row order.

The input is converted to kernel rows (:mod:`tilecast.tiles.sources`); each row's GPU comes from
``gpu`` or else its ``device`` / ``Device`` / ``system`` column. A row whose GPU is unknown, whose
dtype that GPU has no peak for, or whose op no predictor covers gets an ``error`` and an empty
``pred_ms``; every other row is answered. NCCL collectives are timed by the communication model
over the GPU's link (:mod:`tilecast.forecast.comm`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.forecast.comm import COLLECTIVE_FACTORS, DEFAULT_COMM, CommModel
from tilecast.specs import GpuSpec, SpecError, UnknownSpecError, get_gpu
from tilecast.tiles.dtypes import bytes_per_element, normalise_dtype, row_dtypes
from tilecast.tiles.ops import ATTENTION_OPS, GEMM_OPS, row_families
from tilecast.tiles.sources import kernel_rows

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
    can), and the row's dtype in the project's names (``fp32`` where unknown: such a row is not forecast)."""
    out = pd.Series("", index=rows.index, dtype=object)
    dtypes = pd.Series("fp32", index=rows.index, dtype=object)
    raw = (rows["dtype"].astype(object).where(rows["dtype"].notna(), "fp32").astype(str) if "dtype" in rows
           else pd.Series("fp32", index=rows.index))
    keys = pd.DataFrame({"gpu": names, "dtype": raw,
                         "tensor": rows["OPName"].astype(str).isin(GEMM_OPS | ATTENTION_OPS)})
    for (name, value, tensor), idx in keys.groupby(["gpu", "dtype", "tensor"]).groups.items():
        try:
            dtypes[idx] = dtype = normalise_dtype(value)
            if tensor and name in specs:
                specs[name].peak_gflops(dtype)
        except (SpecError, ValueError) as exc:  # DtypeError is a ValueError
            out[idx] = str(exc)
    return out, dtypes


#: dims every row of a family must carry as positive numbers
_FAMILY_DIMS = {"bmm": "BMNK", "linear": "MNK", "tc_gemm": "BMNK", "attn_prefill": "BMNKH", "attn_decode": "BMNKH"}


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


def forecast_kernels(frame: pd.DataFrame, predict: FamilyPredictor, gpu: GpuSpec | None = None,
                     comm: CommModel = DEFAULT_COMM) -> KernelForecast:
    """``frame`` (any shipped schema) plus ``pred_ms`` and ``error``: one vectorised call per family and GPU."""
    rows = kernel_rows(frame)
    if "OPName" not in rows:
        raise UserError("kernel rows need an 'OPName' column (the data's schema)")
    names, specs, gpu_errors = _row_gpus(rows, gpu)
    error = names.map(gpu_errors).fillna("").astype(object)
    dtype_errors, dtypes = _dtype_errors(rows, names, specs)
    rows = rows.assign(dtype=dtypes)
    error = error.where(error != "", dtype_errors)
    families = row_families(rows)
    error = error.where(error != "", _dim_errors(rows, families))
    ops = rows["OPName"].astype(str)
    collective = ops.isin(COLLECTIVE_FACTORS)
    uncovered = families.isna() & ~collective & (error == "")
    error[uncovered] = "no predictor covers op " + ops[uncovered].map(repr)
    pred = pd.Series(np.nan, index=rows.index)
    ok = error == ""
    for name, spec in specs.items():
        mine = ok & (names == name)
        for fam in families[mine].dropna().unique():
            mask = mine & (families == fam)
            pred[mask] = np.asarray(predict(fam, rows.loc[mask], gpu), dtype=float)
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
