"""Roofline time of kernel rows: ``max(flops / peak, bytes / bandwidth)`` (docs/method.md §4), vectorised.

Rows use the data's kernel schema: ``OPName`` plus ``B, M, N, K`` for GEMMs (``[B,M,N] @ [B,N,K]``, N
reduced; linear has B = 1 and M = tokens), ``B, H`` for vector ops, or ``B, M, N, K, H, Hkv`` for fused
attention (:mod:`tilecast.tiles.attention`). An optional ``dtype`` column (fp32 where absent) sets the
bytes per element and, for GEMMs and attention, the peak: the dtype's tensor-core rate
(:meth:`GpuSpec.peak_gflops`; GEMMs :meth:`GpuSpec.gemm_peak_gflops`, so fp32 GEMMs run at the fp32
matrix-core rate where the spec has one: AMD MFMA); vector ops run on CUDA cores at the fp32 vector rate
whatever their dtype. fp8 and fp4 GEMMs (:data:`~tilecast.tiles.dtypes.QUANTISED_DTYPES`) write bf16
outputs and quantise their activation first (read bf16, write the low-precision copy), as vLLM runs them;
attention reads its K and V at ``kv_dtype`` (the compute dtype where absent). MoE rows run at the peak of
their expert format's compute dtype (:func:`~tilecast.tiles.dtypes.peak_dtype`: ``w4a16_mxfp4`` at bf16's) on
the work of :mod:`tilecast.tiles.moe`, MLA rows at their dtype's on :mod:`tilecast.tiles.mla`'s, and an
all-to-all row is its bytes over NVLink (``link_gbs``) and the network (``network_gbs``), the slower of the two
(:mod:`tilecast.tiles.a2a`). Units: peak in GFLOP/s (1e9 FLOP/s).

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
from tilecast.tiles.a2a import A2A_OPS, DEFAULT_SMS, a2a_bytes
from tilecast.tiles.attention import attention_bytes, attention_flops
from tilecast.tiles.dtypes import DTYPE_BYTES, MOE_DTYPES, QUANTISED_DTYPES, bytes_per_element, peak_dtype, row_dtypes
from tilecast.tiles.mla import MLA_DEFAULTS, mla_decode_flops_bytes, mla_prefill_flops_bytes
from tilecast.tiles.moe import moe_flops_bytes
from tilecast.tiles.ops import ATTENTION_OPS, GEMM_OPS, MLA_OPS, MOE_OPS, mem_per_output, ops_per_output

BYTES_PER_ELEMENT = 4.0
HALF_BYTES = float(DTYPE_BYTES["bf16"])
GFLOP = 1e9
GB_SI = 1e9
GIB = float(2**30)

#: per-row spec columns, named after the GpuSpec fields they come from
SPEC_COLUMNS = ("fp32_gflops", "mem_bw_gbs", "num_sm", "mem_gb", "l2_mb", "boost_clock_mhz", "cores_per_sm",
                "link_gbs", "network_gbs")
#: ops whose peak is their (format's compute) dtype's tensor-core rate
_TENSOR_OPS = ATTENTION_OPS | MOE_OPS | MLA_OPS


def spec_frame(rows: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame:
    """Per-row GPU spec columns, from ``gpu`` or else each row's ``Device`` (unknown device -> error),
    plus ``peak_gflops``: the peak a row's GEMM or attention runs at in its dtype (fp32 GEMMs: the fp32
    matrix-core peak where the spec has one, else the fp32 peak; other fp32 rows: the fp32 peak). A dtype the
    GPU has no peak for raises the spec's named error."""
    if gpu is not None:
        specs = {"": gpu}  # one key for every row (not None: factorising reads None as a missing value)
        keys = pd.Series([""] * len(rows), index=rows.index, dtype=object)
    else:
        if "Device" not in rows:
            raise UserError("rows have no 'Device' column: name the GPU (gpu=<key>)")
        keys = rows["Device"]
        specs = {d: get_gpu(str(d)) for d in pd.unique(keys)}
    # each device's spec once, then an index per row (hashing the devices once: no per-row dict lookups)
    codes, uniq = pd.factorize(keys.to_numpy(dtype=object), use_na_sentinel=False)
    out = {}
    for col in SPEC_COLUMNS:
        out[col] = (np.array([float(getattr(specs[d], col) or 0.0) for d in uniq], dtype=float)[codes]
                    if gpu is None else np.full(len(rows), float(getattr(gpu, col) or 0.0)))
    frame = pd.DataFrame(out, index=rows.index)
    frame["peak_gflops"] = _peaks(rows, keys, specs)
    return frame


def _peaks(rows: pd.DataFrame, keys: pd.Series, specs: dict) -> np.ndarray:
    """Peak GFLOP/s of each row: the GEMM peak of its dtype for GEMMs (:meth:`GpuSpec.gemm_peak_gflops`),
    its dtype's for attention, fp32 for the rest."""
    dtypes = row_dtypes(rows)
    ops = rows["OPName"].astype(str).to_numpy() if "OPName" in rows else np.full(len(rows), "")
    gemm = np.isin(ops, list(GEMM_OPS))
    tensor = np.isin(ops, list(_TENSOR_OPS))
    moe_era = np.isin(ops, list(MOE_OPS | MLA_OPS)) & ~_has(rows, "dtype")
    dtypes = np.where(moe_era, "bf16", dtypes)  # MoE / MLA rows default to bf16 (FAMILY_OPTIONAL)
    dtypes = np.where(gemm | tensor, [peak_dtype(d) for d in dtypes], "fp32")
    # one peak per distinct (device, dtype, GEMM or not): factorised to integer codes, not per-row tuples
    kc, kuniq = pd.factorize(keys.to_numpy(dtype=object), use_na_sentinel=False)
    dc, duniq = pd.factorize(np.asarray(dtypes, dtype=object), use_na_sentinel=False)
    combo = (kc.astype(np.int64) * len(duniq) + dc) * 2 + gemm.astype(np.int64)
    cuniq, inverse = np.unique(combo, return_inverse=True)
    lut = np.empty(len(cuniq), dtype=float)
    for i, c in enumerate(cuniq):
        spec, dtype, is_gemm = specs[kuniq[c // 2 // len(duniq)]], duniq[c // 2 % len(duniq)], bool(c % 2)
        lut[i] = spec.gemm_peak_gflops(dtype) if is_gemm else spec.peak_gflops(dtype)
    peaks = lut[inverse.ravel()]
    fp8_kv = np.isin(ops, list(MLA_OPS)) & _has(rows, "kv_dtype")
    if fp8_kv.any():  # MLA over an fp8 cache runs fp8 MMAs where the GPU has them (a lower bound either way)
        fp8_kv &= row_dtypes(rows, "kv_dtype") == "fp8"
        fp8 = {k: s.peak_gflops("fp8") if s.supports("fp8") else 0.0 for k, s in specs.items()}
        peaks = np.where(fp8_kv, np.maximum(peaks, keys.map(fp8).to_numpy(dtype=float)), peaks)
    return peaks


def _dim(rows: pd.DataFrame, name: str) -> np.ndarray:
    if name not in rows:
        return np.zeros(len(rows))
    return pd.to_numeric(rows[name], errors="coerce").fillna(0).to_numpy(dtype=float)


def _column(rows: pd.DataFrame, name: str, default: object) -> np.ndarray:
    """A column as an object array, ``default`` where absent or null."""
    if name not in rows:
        return np.full(len(rows), default, dtype=object)
    return rows[name].astype(object).where(rows[name].notna(), default).to_numpy(dtype=object)


def _dim_or(rows: pd.DataFrame, name: str, default: float) -> np.ndarray:
    value = pd.to_numeric(rows[name], errors="coerce").to_numpy(dtype=float) if name in rows else np.full(len(rows),
                                                                                                          np.nan)
    return np.where(np.isfinite(value) & (value > 0), value, default)


def moe_rows_flops_bytes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of ``moe`` rows (:func:`tilecast.tiles.moe.moe_flops_bytes`; defaults of
    :data:`~tilecast.tiles.ops.FAMILY_OPTIONAL`)."""
    dtypes = row_dtypes(rows.assign(dtype=_column(rows, "dtype", "bf16")))
    fmt = [MOE_DTYPES[d] if d in MOE_DTYPES else MOE_DTYPES["bf16"] for d in dtypes]
    gated = np.array([str(g).strip().lower() not in ("false", "0", "0.0", "no") for g in _column(rows, "gated", True)])
    return moe_flops_bytes(*(_dim(rows, c) for c in ("tokens", "hidden", "inter", "topk", "experts", "moe_tp",
                                                      "moe_ep")),
                           _column(rows, "distribution", "balanced").astype(str), gated,
                           np.array([f.weight_bytes for f in fmt]), np.array([f.act_bytes for f in fmt]))


def mla_rows_flops_bytes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of ``mla_prefill`` / ``mla_decode`` rows (:mod:`tilecast.tiles.mla`)."""
    decode = rows["OPName"].astype(str).to_numpy() == "mla_decode"
    q_bpe = bytes_per_element(row_dtypes(rows.assign(dtype=_column(rows, "dtype", "bf16"))))
    kv_bpe = np.where(_has(rows, "kv_dtype"), bytes_per_element(row_dtypes(rows, "kv_dtype")), q_bpe)
    args = (*(_dim(rows, c) for c in ("B", "M", "N", "H")), *(_dim_or(rows, c, v) for c, v in MLA_DEFAULTS.items()))
    pf, pb = mla_prefill_flops_bytes(*args, q_bpe, kv_bpe)
    df, db = mla_decode_flops_bytes(*args, q_bpe, kv_bpe)
    return np.where(decode, df, pf), np.where(decode, db, pb)


def a2a_rows_bytes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each GPU sends over NVLink and over the network for all-to-all rows (:mod:`tilecast.tiles.a2a`)."""
    return a2a_bytes(rows["OPName"].astype(str).to_numpy(), *(_dim(rows, c) for c in ("tokens", "hidden", "topk",
                                                                                       "experts", "ep")),
                     _dim_or(rows, "nodes", 1.0), _column(rows, "a2a_mode", "normal"), _column(rows, "dtype", None))


def a2a_sms(rows: pd.DataFrame) -> np.ndarray:
    """SMs of each all-to-all row's kernel (normal mode; :data:`~tilecast.tiles.a2a.DEFAULT_SMS` where absent)."""
    return _dim_or(rows, "sms", float(DEFAULT_SMS))


def kernel_flops_bytes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes moved by each kernel row at its dtype (GEMM: ``2BMNK`` and its three operands;
    fp8 / fp4 GEMMs: low-precision operands, a bf16 output and the activation's quantisation pass; MoE, MLA and
    all-to-all rows: their modules' work, an all-to-all's bytes those leaving the GPU)."""
    ops = rows["OPName"].astype(str).to_numpy()
    special = np.isin(ops, list(MOE_OPS | MLA_OPS | A2A_OPS))
    if special.any():
        flops, nbytes = _plain_flops_bytes(rows.loc[~special]) if (~special).any() else (np.zeros(0), np.zeros(0))
        out_f, out_b = np.zeros(len(rows)), np.zeros(len(rows))
        out_f[~special], out_b[~special] = flops, nbytes
        for names, fn in ((MOE_OPS, moe_rows_flops_bytes), (MLA_OPS, mla_rows_flops_bytes)):
            sel = np.isin(ops, list(names))
            if sel.any():
                out_f[sel], out_b[sel] = fn(rows.loc[sel])
        sel = np.isin(ops, list(A2A_OPS))
        if sel.any():
            out_b[sel] = np.add(*a2a_rows_bytes(rows.loc[sel]))
        return out_f, out_b
    return _plain_flops_bytes(rows)


def _plain_flops_bytes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    ops = rows["OPName"].astype(str).to_numpy()
    b, m, n, k, h = (_dim(rows, c) for c in ("B", "M", "N", "K", "H"))
    dtypes = row_dtypes(rows)
    bpe = bytes_per_element(dtypes)
    is_gemm = np.isin(ops, list(GEMM_OPS))
    is_attn = np.isin(ops, list(ATTENTION_OPS))
    quantised = np.isin(dtypes, list(QUANTISED_DTYPES))
    out_bpe = np.where(quantised, HALF_BYTES, bpe)
    quant_bytes = np.where(quantised & (ops == "linear"), (HALF_BYTES + bpe) * m * n, 0.0)
    gemm_flops = 2.0 * b * m * n * k
    gemm_bytes = b * (bpe * (m * n + n * k) + out_bpe * m * k) + quant_bytes
    ops_per_o = np.array([ops_per_output(o) for o in ops])
    mem_per_o = np.array([mem_per_output(o) for o in ops]) * bpe / BYTES_PER_ELEMENT
    numel = b * h
    flops = np.where(is_gemm, gemm_flops, ops_per_o * numel)
    nbytes = np.where(is_gemm, gemm_bytes, mem_per_o * numel)
    if is_attn.any():
        hkv = np.where(_dim(rows, "Hkv") > 0, _dim(rows, "Hkv"), h)
        q_bpe = np.where(quantised, HALF_BYTES, bpe)
        kv_bpe = np.where(_has(rows, "kv_dtype"), bytes_per_element(row_dtypes(rows, "kv_dtype")), q_bpe)
        window = _dim(rows, "window")  # a sliding window's keys per query (0 / absent: causal over all)
        flops = np.where(is_attn, attention_flops(b, m, n, k, h, window), flops)
        nbytes = np.where(is_attn, attention_bytes(b, m, n, k, h, hkv, q_bpe, kv_bpe, window), nbytes)
    return flops, nbytes


def _has(rows: pd.DataFrame, column: str) -> np.ndarray:
    """Whether each row sets ``column`` (present and not null)."""
    return rows[column].notna().to_numpy() if column in rows else np.zeros(len(rows), dtype=bool)


def roofline_ms(rows: pd.DataFrame, gpu: GpuSpec | None = None, reference: bool = True) -> np.ndarray:
    """Roofline latency in ms of each row on ``gpu`` (or each row's ``Device``).

    ``reference=True`` uses the reference's bandwidth units (the baseline, and the lower bound that
    learned predictors respect); ``False`` the SI units of the spec sheet.
    """
    compute_s, memory_s = _bound_seconds(rows, gpu, reference)
    return 1e3 * np.maximum(compute_s, memory_s)


def roofline_regime(rows: pd.DataFrame, gpu: GpuSpec | None = None) -> np.ndarray:
    """``log2(compute time / memory time)`` of each row on ``gpu`` (or its ``Device``): > 0 compute-bound,
    < 0 memory-bound (SI units; rows without work: 0). What the prediction intervals condition on."""
    compute_s, memory_s = _bound_seconds(rows, gpu, False)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log2(compute_s / memory_s)
    return np.where(np.isfinite(out), out, 0.0)


def _bound_seconds(rows: pd.DataFrame, gpu: GpuSpec | None, reference: bool) -> tuple[np.ndarray, np.ndarray]:
    """(compute seconds, memory seconds) of each row: the two sides of the roofline."""
    spec = spec_frame(rows, gpu)
    flops, nbytes = kernel_flops_bytes(rows)
    ops = rows["OPName"].astype(str)
    gemm = ops.isin(GEMM_OPS).to_numpy() & (row_dtypes(rows) == "fp32")
    byte_unit = np.where(gemm & reference, GIB, GB_SI)
    compute_s = flops / (spec["peak_gflops"].to_numpy() * GFLOP)
    memory_s = nbytes / (spec["mem_bw_gbs"].to_numpy() * byte_unit)
    a2a = ops.isin(A2A_OPS).to_numpy()
    if a2a.any():
        link, net = a2a_rows_bytes(rows.loc[a2a])
        network = spec["network_gbs"].to_numpy()[a2a]
        with np.errstate(divide="ignore", invalid="ignore"):
            net_s = np.where(net > 0, net / (np.where(network > 0, network, np.nan) * GB_SI), 0.0)
        memory_s[a2a] = np.maximum(link / (spec["link_gbs"].to_numpy()[a2a] * GB_SI), net_s)
        compute_s[a2a] = 0.0
    return compute_s, memory_s
