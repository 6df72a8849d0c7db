"""Roofline time of kernel rows: ``max(flops / peak, bytes / bandwidth)`` (METHOD.md §1-§3), vectorised.

Rows use the data's kernel schema: ``OPName`` plus ``B, M, N, K`` for GEMMs (``[B,M,N] @ [B,N,K]``, N
reduced; linear has B = 1 and M = tokens) or ``B, H`` for vector ops. Units: peak in GFLOP/s
(1e9 FLOP/s), fp32 operands (4 bytes).

Bandwidth units follow the reference (NeuSight) so its roofline baseline is reproduced exactly
(METHOD.md §3, within 1 point per device): GEMM bytes are divided by ``Mem_Bw * 2^30`` (as are MEM
ops, METHOD.md §1) while vector ops use ``Mem_Bw * 1e9``. Spec sheets list decimal GB/s
(``reference=False`` uses 1e9 for every kind). The reference's GEMM time is the smaller of the two,
so it is the bound learned predictors respect: cached operands can beat the DRAM roofline a little.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.ops import GEMM_OPS, mem_per_output, ops_per_output

BYTES_PER_ELEMENT = 4.0
GFLOP = 1e9
GB_SI = 1e9
GIB = float(2**30)

#: per-row spec columns, named after the GpuSpec fields they come from
SPEC_COLUMNS = ("fp32_gflops", "mem_bw_gbs", "num_sm", "mem_gb", "l2_mb", "boost_clock_mhz", "cores_per_sm")


def spec_frame(rows: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame:
    """Per-row GPU spec columns, from ``gpu`` or else each row's ``Device`` (unknown device -> error)."""
    if gpu is not None:
        specs = {None: gpu}
        keys = pd.Series([None] * len(rows), index=rows.index)
    else:
        if "Device" not in rows:
            raise ValueError("rows have no 'Device' column: name the GPU (gpu=<key>)")
        keys = rows["Device"]
        specs = {d: get_gpu(str(d)) for d in pd.unique(keys)}
    out = {}
    for col in SPEC_COLUMNS:
        lut = {d: float(getattr(s, col) or 0.0) for d, s in specs.items()}
        out[col] = keys.map(lut).to_numpy(dtype=float) if gpu is None else np.full(len(rows), lut[None])
    return pd.DataFrame(out, index=rows.index)


def _dim(rows: pd.DataFrame, name: str) -> np.ndarray:
    if name not in rows:
        return np.zeros(len(rows))
    return pd.to_numeric(rows[name], errors="coerce").fillna(0).to_numpy(dtype=float)


def kernel_flops_bytes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and fp32 bytes moved by each kernel row (GEMM: ``2BMNK`` and its three operands)."""
    ops = rows["OPName"].astype(str).to_numpy()
    b, m, n, k, h = (_dim(rows, c) for c in ("B", "M", "N", "K", "H"))
    is_gemm = np.isin(ops, list(GEMM_OPS))
    gemm_flops = 2.0 * b * m * n * k
    gemm_bytes = BYTES_PER_ELEMENT * b * (m * n + n * k + m * k)
    ops_per_o = np.array([ops_per_output(o) for o in ops])
    mem_per_o = np.array([mem_per_output(o) for o in ops])
    numel = b * h
    flops = np.where(is_gemm, gemm_flops, ops_per_o * numel)
    nbytes = np.where(is_gemm, gemm_bytes, mem_per_o * numel)
    return flops, nbytes


def roofline_ms(rows: pd.DataFrame, gpu: GpuSpec | None = None, reference: bool = True) -> np.ndarray:
    """Roofline latency in ms of each row on ``gpu`` (or each row's ``Device``).

    ``reference=True`` uses the reference's bandwidth units (the baseline, and the lower bound that
    learned predictors respect); ``False`` the SI units of the spec sheet.
    """
    spec = spec_frame(rows, gpu)
    flops, nbytes = kernel_flops_bytes(rows)
    gemm = rows["OPName"].astype(str).isin(GEMM_OPS).to_numpy()
    byte_unit = np.where(gemm & reference, GIB, GB_SI)
    compute_s = flops / (spec["fp32_gflops"].to_numpy() * GFLOP)
    memory_s = nbytes / (spec["mem_bw_gbs"].to_numpy() * byte_unit)
    return 1e3 * np.maximum(compute_s, memory_s)
