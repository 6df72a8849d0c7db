"""Roofline time of kernel rows: ``max(flops / peak, bytes / bandwidth)`` (docs/method.md §4), vectorised.

Rows use the data's kernel schema: ``OPName`` plus ``B, M, N, K`` for GEMMs (``[B,M,N] @ [B,N,K]``, N
reduced; linear has B = 1 and M = tokens), ``B, H`` for vector ops, or ``B, M, N, K, H, Hkv`` for fused
attention (:mod:`tilecast.tiles.attention`). An optional ``dtype`` column (fp32 where absent) sets the
bytes per element and, for GEMMs and attention, the peak: the dtype's tensor-core rate
(:meth:`GpuSpec.peak_gflops`; GEMMs :meth:`GpuSpec.gemm_peak_gflops`, so fp32 GEMMs run at the fp32
matrix-core rate where the spec has one: AMD MFMA); vector ops run on CUDA cores at the fp32 vector rate
whatever their dtype. fp8
GEMMs write bf16 outputs and quantise their activation first (read bf16, write fp8), as vLLM runs
them; attention reads its K and V at ``kv_dtype`` (the compute dtype where absent). Units: peak in
GFLOP/s (1e9 FLOP/s).

Bandwidth units follow the reference (NeuSight) so its roofline baseline is reproduced exactly
(docs/method.md §4, within 1 point per device): GEMM bytes are divided by ``Mem_Bw * 2^30`` (as are MEM
ops, docs/method.md §2) while vector ops use ``Mem_Bw * 1e9``. Spec sheets list decimal GB/s
(``reference=False`` uses 1e9 for every kind). The reference's GEMM time is the smaller of the two,
so it is the bound learned predictors respect: cached operands can beat the DRAM roofline a little.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.attention import attention_bytes, attention_flops
from tilecast.tiles.dtypes import DTYPE_BYTES, bytes_per_element, row_dtypes
from tilecast.tiles.ops import ATTENTION_OPS, GEMM_OPS, mem_per_output, ops_per_output

BYTES_PER_ELEMENT = 4.0
HALF_BYTES = float(DTYPE_BYTES["bf16"])
GFLOP = 1e9
GB_SI = 1e9
GIB = float(2**30)

#: per-row spec columns, named after the GpuSpec fields they come from
SPEC_COLUMNS = ("fp32_gflops", "mem_bw_gbs", "num_sm", "mem_gb", "l2_mb", "boost_clock_mhz", "cores_per_sm")


def spec_frame(rows: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame:
    """Per-row GPU spec columns, from ``gpu`` or else each row's ``Device`` (unknown device -> error),
    plus ``peak_gflops``: the peak a row's GEMM or attention runs at in its dtype (fp32 GEMMs: the fp32
    matrix-core peak where the spec has one, else the fp32 peak; other fp32 rows: the fp32 peak). A dtype the
    GPU has no peak for raises the spec's named error."""
    if gpu is not None:
        specs = {None: gpu}
        keys = pd.Series([None] * len(rows), index=rows.index)
    else:
        if "Device" not in rows:
            raise UserError("rows have no 'Device' column: name the GPU (gpu=<key>)")
        keys = rows["Device"]
        specs = {d: get_gpu(str(d)) for d in pd.unique(keys)}
    out = {}
    for col in SPEC_COLUMNS:
        lut = {d: float(getattr(s, col) or 0.0) for d, s in specs.items()}
        out[col] = keys.map(lut).to_numpy(dtype=float) if gpu is None else np.full(len(rows), lut[None])
    frame = pd.DataFrame(out, index=rows.index)
    frame["peak_gflops"] = _peaks(rows, keys, specs)
    return frame


def _peaks(rows: pd.DataFrame, keys: pd.Series, specs: dict) -> np.ndarray:
    """Peak GFLOP/s of each row: the GEMM peak of its dtype for GEMMs (:meth:`GpuSpec.gemm_peak_gflops`),
    its dtype's for attention, fp32 for the rest."""
    dtypes = row_dtypes(rows)
    ops = rows["OPName"].astype(str).to_numpy() if "OPName" in rows else np.full(len(rows), "")
    gemm = np.isin(ops, list(GEMM_OPS))
    dtypes = np.where(gemm | np.isin(ops, list(ATTENTION_OPS)), dtypes, "fp32")
    triple = pd.Series(list(zip(keys.to_numpy(dtype=object), dtypes, gemm, strict=True)), index=rows.index,
                       dtype=object)
    lut = {t: specs[t[0]].gemm_peak_gflops(t[1]) if t[2] else specs[t[0]].peak_gflops(t[1])
           for t in pd.unique(triple)}
    return triple.map(lut).to_numpy(dtype=float)


def _dim(rows: pd.DataFrame, name: str) -> np.ndarray:
    if name not in rows:
        return np.zeros(len(rows))
    return pd.to_numeric(rows[name], errors="coerce").fillna(0).to_numpy(dtype=float)


def kernel_flops_bytes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes moved by each kernel row at its dtype (GEMM: ``2BMNK`` and its three operands;
    fp8 GEMMs: fp8 operands, a bf16 output and the activation's quantisation pass)."""
    ops = rows["OPName"].astype(str).to_numpy()
    b, m, n, k, h = (_dim(rows, c) for c in ("B", "M", "N", "K", "H"))
    dtypes = row_dtypes(rows)
    bpe = bytes_per_element(dtypes)
    is_gemm = np.isin(ops, list(GEMM_OPS))
    is_attn = np.isin(ops, list(ATTENTION_OPS))
    fp8 = dtypes == "fp8"
    out_bpe = np.where(fp8, HALF_BYTES, bpe)
    quant_bytes = np.where(fp8 & (ops == "linear"), (HALF_BYTES + bpe) * m * n, 0.0)
    gemm_flops = 2.0 * b * m * n * k
    gemm_bytes = b * (bpe * (m * n + n * k) + out_bpe * m * k) + quant_bytes
    ops_per_o = np.array([ops_per_output(o) for o in ops])
    mem_per_o = np.array([mem_per_output(o) for o in ops]) * bpe / BYTES_PER_ELEMENT
    numel = b * h
    flops = np.where(is_gemm, gemm_flops, ops_per_o * numel)
    nbytes = np.where(is_gemm, gemm_bytes, mem_per_o * numel)
    if is_attn.any():
        hkv = np.where(_dim(rows, "Hkv") > 0, _dim(rows, "Hkv"), h)
        q_bpe = np.where(fp8, HALF_BYTES, bpe)
        kv_bpe = np.where(_has(rows, "kv_dtype"), bytes_per_element(row_dtypes(rows, "kv_dtype")), q_bpe)
        flops = np.where(is_attn, attention_flops(b, m, n, k, h), flops)
        nbytes = np.where(is_attn, attention_bytes(b, m, n, k, h, hkv, q_bpe, kv_bpe), nbytes)
    return flops, nbytes


def _has(rows: pd.DataFrame, column: str) -> np.ndarray:
    """Whether each row sets ``column`` (present and not null)."""
    return rows[column].notna().to_numpy() if column in rows else np.zeros(len(rows), dtype=bool)


def roofline_ms(rows: pd.DataFrame, gpu: GpuSpec | None = None, reference: bool = True) -> np.ndarray:
    """Roofline latency in ms of each row on ``gpu`` (or each row's ``Device``).

    ``reference=True`` uses the reference's bandwidth units (the baseline, and the lower bound that
    learned predictors respect); ``False`` the SI units of the spec sheet.
    """
    spec = spec_frame(rows, gpu)
    flops, nbytes = kernel_flops_bytes(rows)
    gemm = rows["OPName"].astype(str).isin(GEMM_OPS).to_numpy() & (row_dtypes(rows) == "fp32")
    byte_unit = np.where(gemm & reference, GIB, GB_SI)
    compute_s = flops / (spec["peak_gflops"].to_numpy() * GFLOP)
    memory_s = nbytes / (spec["mem_bw_gbs"].to_numpy() * byte_unit)
    return 1e3 * np.maximum(compute_s, memory_s)
