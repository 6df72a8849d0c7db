"""Per-op latency of an op frame (``OpGraph.to_frame()`` columns), vectorised over the whole frame.

- linear / bmm / fused attention / vector ops of a known family: the kernel predictor, one call per
  family on the *distinct* kernel rows (tensor-core dtypes route GEMMs to ``tc_gemm``, half-precision
  vector ops to ``vec_half``) (an op shape is predicted once however many layers, phases or cells use it).
  A vector row whose bytes or flops per output differ from the plain op's (a fused group, a
  broadcasting input) is the plain op's prediction scaled by the ratio of the two rooflines: the
  group runs as one kernel shaped like its last op (docs/method.md §9).
- mem: ``bytes / (Mem_Bw * 2^30)`` (docs/method.md §2).
- conv and vector ops no predictor covers: the roofline of the row's own flops and bytes.
- allreduce / sendrecv: :class:`~tilecast.forecast.comm.CommModel` over the spec's link, over the op's
  ``group`` attribute where it has one (else the graph's degree).
- the mixture-of-experts era's kinds (:data:`~tilecast.graph.ops.ATTR_KINDS`: fused MoE, MLA, expert-parallel
  all-to-all, Gated DeltaNet) become kernel rows in their tables' own schemas
  (:func:`tilecast.graph.work.attr_kernel_row`: their dims renamed, their ``attrs`` spread into columns; an
  all-to-all's ``nodes`` from each GPU's NVLink domain): fused MoE and MLA go to their family's predictor, an
  all-to-all to DeepEP's closed form (:mod:`tilecast.forecast.a2a`), Gated DeltaNet (no table) to the roofline
  of its own FLOPs and bytes at the peak of its dtype.

Latencies are per instance (one of ``count``), in ms.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.forecast.a2a import a2a_ms
from tilecast.forecast.comm import DEFAULT_COMM, CommModel
from tilecast.forecast.kernels import FamilyPredictor
from tilecast.graph.ops import ATTR_KINDS, decode_attrs
from tilecast.graph.work import attr_kernel_row
from tilecast.specs import GpuSpec
from tilecast.tiles.dtypes import DTYPE_BYTES, TENSOR_DTYPES, peak_dtype
from tilecast.tiles.ops import FAMILY_OF_OP, HALF_VECTOR_DTYPES, VECTOR_OPS, mem_per_output, ops_per_output
from tilecast.tiles.roofline import roofline_ms

KERNEL_COLUMNS = ("OPName", "B", "M", "N", "K", "H", "Hkv")
GEMM_KINDS = ("linear", "bmm")
COMM_KINDS = ("allreduce", "sendrecv")
GIB = float(2**30)


def roofline_predictor(family: str, rows: pd.DataFrame, gpu: GpuSpec | None) -> np.ndarray:
    """The spec-sheet roofline as a :data:`FamilyPredictor` (no training, no registry)."""
    return roofline_ms(rows, gpu)


def _col(frame: pd.DataFrame, name: str, dtype=float) -> np.ndarray:
    return frame[name].to_numpy(dtype=dtype) if name in frame else np.zeros(len(frame), dtype=dtype)


def lookup(values: np.ndarray, table: dict, default=None) -> np.ndarray:
    """``table[v]`` for each value (object array), computed once per distinct value."""
    values = np.asarray(values, dtype=object)
    if values.size == 0:
        return np.empty(0, dtype=object)
    uniq, inverse = np.unique(values.astype(str), return_inverse=True)
    return np.array([table.get(u, default) for u in uniq] + [None], dtype=object)[:-1][inverse]


def op_family(op_frame: pd.DataFrame) -> np.ndarray:
    """Kernel family of each op row (object array; None where no predictor applies)."""
    kind = op_frame["kind"].to_numpy(dtype=object)
    fam = lookup(kind, {"linear": "linear", "bmm": "bmm"})
    by_op = (kind == "vec") | (kind == "attn") | np.isin(kind, ATTR_KINDS)
    if by_op.any():
        fam[by_op] = lookup(op_frame["op"].to_numpy(dtype=object)[by_op], FAMILY_OF_OP)
    if "dtype" in op_frame:
        dtype = op_frame["dtype"].to_numpy(dtype=object)
        fam[np.isin(kind, GEMM_KINDS) & np.isin(dtype, list(TENSOR_DTYPES))] = "tc_gemm"
        half_vec = (kind == "vec") & np.isin(dtype, list(HALF_VECTOR_DTYPES))
        fam[half_vec & np.isin(op_frame["op"].to_numpy(dtype=object), list(VECTOR_OPS))] = "vec_half"
    return fam


def op_kernel_rows(op_frame: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows (``OPName, B, M, N, K, H`` as in the data, plus ``kind`` and ``family``) of the op rows
    a family predictor covers; the index is the op frame's, so results align back by index. Rows of the
    attribute kinds carry their tables' columns instead (:data:`ATTR_ROWS`)."""
    fam = op_family(op_frame)
    kind = op_frame["kind"].to_numpy(dtype=object)
    pos = np.flatnonzero(pd.notna(fam) & ~np.isin(kind, ATTR_KINDS))
    names, dims, dtypes = _kernel_arrays(op_frame, pos, fam[pos])
    rows = pd.DataFrame(dims, columns=list(KERNEL_COLUMNS[1:]), index=op_frame.index[pos])
    rows.insert(0, "OPName", names)
    rows = rows.assign(dtype=dtypes, kind=kind[pos], family=fam[pos])
    special = np.flatnonzero(pd.notna(fam) & np.isin(kind, ATTR_KINDS))
    if not len(special):
        return rows
    extra = attr_kernel_rows(op_frame, special).assign(kind=kind[special], family=fam[special])
    return pd.concat([rows, extra]).loc[op_frame.index[np.sort(np.concatenate([pos, special]))]]


def attr_kernel_rows(op_frame: pd.DataFrame, pos: np.ndarray) -> pd.DataFrame:
    """Kernel rows of the attribute-kind op rows at ``pos``, in their tables' schemas
    (:func:`tilecast.graph.work.attr_kernel_row`), indexed like the op frame."""
    sub = op_frame.iloc[pos]
    attrs = sub["attrs"] if "attrs" in sub else pd.Series("", index=sub.index)
    dims = sub[["b", "m", "n", "k", "h", "hkv"]].to_numpy(dtype=np.int64)
    records = [attr_kernel_row(kind, op, dtype, tuple(d), tuple(decode_attrs(a).items()))
               for kind, op, dtype, a, d in zip(sub["kind"], sub["op"], sub["dtype"], attrs, dims, strict=True)]
    return pd.DataFrame(records, index=op_frame.index[pos])


def _kernel_arrays(op_frame: pd.DataFrame, pos: np.ndarray, fams: np.ndarray) \
        -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OPName, the int64 ``B, M, N, K, H, Hkv`` matrix and the kernel dtype of the op rows at ``pos``."""
    kind = op_frame["kind"].to_numpy(dtype=object)[pos]
    gemm = np.isin(kind, GEMM_KINDS)
    att = kind == "attn"
    names = np.where(gemm, kind, op_frame["op"].to_numpy(dtype=object)[pos])
    dims = np.zeros((len(pos), 6), dtype=np.int64)
    dims[:, 0] = np.where(kind == "linear", 1, _col(op_frame, "b", np.int64)[pos])
    for j, c in enumerate("mnk", start=1):
        dims[:, j] = np.where(gemm | att, _col(op_frame, c, np.int64)[pos], 0)
    dims[:, 4] = np.where(gemm, 0, _col(op_frame, "h", np.int64)[pos])
    dims[:, 5] = np.where(att, _col(op_frame, "hkv", np.int64)[pos], 0)
    dtypes = op_frame["dtype"].to_numpy(dtype=object)[pos] if "dtype" in op_frame else np.full(len(pos), "fp32")
    return names, dims, np.asarray(dtypes, dtype=object)


def _distinct_kernels(names: np.ndarray, dims: np.ndarray, dtypes: np.ndarray, fams: np.ndarray
                      ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The distinct kernel rows (``OPName``, dims, ``dtype``), each one's family, and the inverse that maps
    the input rows onto them."""
    op_codes, op_inverse = np.unique(names.astype(str), return_inverse=True)
    dt_codes, dt_inverse = np.unique(dtypes.astype(str), return_inverse=True)
    key = np.column_stack([op_inverse.astype(np.int64), dt_inverse.astype(np.int64), dims])
    distinct, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    kernel = pd.DataFrame(distinct[:, 2:], columns=list(KERNEL_COLUMNS[1:]))
    kernel.insert(0, "OPName", op_codes[distinct[:, 0]])
    kernel["dtype"] = dt_codes[distinct[:, 1]]
    return kernel, fams[first], inverse.ravel()


def _checked(fam: str, got: np.ndarray, n: int, kernel: pd.DataFrame) -> np.ndarray:
    """``got`` as ``n`` finite non-negative ms, else the error naming the family and the first bad row."""
    got = np.asarray(got, dtype=float).ravel()
    if got.shape != (n,):
        raise ValueError(f"{fam} predictor returned {got.shape[0]} values for {n} rows")
    bad = ~np.isfinite(got) | (got < 0)
    if bad.any():
        raise ValueError(f"{fam} predictor returned a non-finite or negative latency for "
                         f"{kernel.loc[bad].iloc[0].to_dict()}")
    return got


def on_gpu(rows: pd.DataFrame, gpu: GpuSpec) -> pd.DataFrame:
    """Kernel rows as ``gpu`` runs them: its ``Device``, and an all-to-all's ``nodes`` (the NVLink domains its
    ``ep`` GPUs span, :attr:`GpuSpec.gpus_per_node`)."""
    out = rows.assign(Device=gpu.device_name)
    if "ep" in rows:
        out["nodes"] = np.ceil(rows["ep"].to_numpy(dtype=float) / gpu.gpus_per_node).astype(np.int64)
    return out


def _predict_kernels(kernel: pd.DataFrame, dfams: np.ndarray, gpus: list[GpuSpec], predict: FamilyPredictor,
                     errors: dict[str, str] | None) -> np.ndarray:
    """ms of every distinct kernel row on every GPU, shape (rows, GPUs): per family one call for all GPUs
    (rows tagged with their ``Device``; ``gpu=None``), or, with one GPU or when that call fails, one call
    per GPU, so a failure stays with the GPU that causes it (its column NaN, its message in ``errors``;
    ``errors=None``: the failure raises)."""
    pred = np.full((len(kernel), len(gpus)), np.nan)
    for fam in np.unique(dfams.astype(str)):
        mask = dfams == fam
        part = kernel.loc[mask].reset_index(drop=True).dropna(axis=1, how="all")
        if len(gpus) > 1:
            stacked = pd.concat([on_gpu(part, g) for g in gpus], ignore_index=True)
            try:
                got = _checked(fam, predict(fam, stacked, None), len(stacked), stacked)
                pred[mask] = got.reshape(len(gpus), len(part)).T
                continue
            except Exception:  # noqa: BLE001 - the per-GPU calls below say which GPU fails
                pass
        for j, gpu in enumerate(gpus):
            if errors is None:
                pred[mask, j] = _checked(fam, predict(fam, on_gpu(part, gpu), gpu), len(part), part)
                continue
            if gpu.key in errors:
                continue
            try:
                pred[mask, j] = _checked(fam, predict(fam, on_gpu(part, gpu), gpu), len(part), part)
            except Exception as exc:  # noqa: BLE001 - this GPU's ops carry the error, the others stand
                errors[gpu.key] = f"{type(exc).__name__}: {exc}"
    return pred


def _vec_scale(frame: pd.DataFrame, pos: np.ndarray, gpus: list[GpuSpec]) -> np.ndarray:
    """Roofline ratio of each vector row's own bytes/flops per output to its plain op's at the same dtype
    (1 where unset), shape (rows, GPUs)."""
    uniq, inverse = np.unique(frame["op"].to_numpy(dtype=object)[pos].astype(str), return_inverse=True)
    size = (np.array([DTYPE_BYTES[d] for d in frame["dtype"].to_numpy(dtype=object)[pos]], dtype=float) / 4.0
            if "dtype" in frame else 1.0)
    mem_plain = (np.array([mem_per_output(o) for o in uniq], dtype=float)[inverse] * size)[:, None]
    ops_plain = np.array([ops_per_output(o) for o in uniq], dtype=float)[inverse][:, None]
    mem_own = _col(frame, "mem_per_o")[pos][:, None]
    ops_own = _col(frame, "ops_per_o")[pos][:, None]
    mem_own = np.where(mem_own > 0, mem_own, mem_plain)
    ops_own = np.where(ops_own > 0, ops_own, ops_plain)
    f = np.array([g.fp32_gflops for g in gpus], dtype=float)[None, :]
    bw = np.array([g.mem_bw_gbs for g in gpus], dtype=float)[None, :]
    return np.maximum(ops_own / f, mem_own / bw) / np.maximum(ops_plain / f, mem_plain / bw)


def op_latency_matrix(op_frame: pd.DataFrame, gpus: list[GpuSpec], predict: FamilyPredictor | None = None,
                      n_gpus: int | np.ndarray | None = None, comm: CommModel = DEFAULT_COMM, strict: bool = False
                      ) -> tuple[np.ndarray, dict[str, str]]:
    """Per-instance latency (ms) of every op row on every GPU, shape (rows, GPUs), and the error of each GPU
    whose kernel predictions failed (its column NaN where a kernel is needed; the other GPUs stand).

    ``predict`` defaults to the roofline; ``n_gpus`` is the all-reduce group size (default: a per-row
    ``degree`` column, else the frame's ``attrs["degree"]``, else 1); ``strict``: a failed prediction
    raises instead. What does not depend on the GPU (families, kernel rows, their deduplication) is done
    once for all of them.
    """
    predict = predict or roofline_predictor
    if n_gpus is None:
        n_gpus = _col(op_frame, "degree") if "degree" in op_frame else int(op_frame.attrs.get("degree", 1) or 1)
    n, n_g = len(op_frame), len(gpus)
    ms = np.full((n, n_g), np.nan)
    errors: dict[str, str] = {}
    kind = op_frame["kind"].to_numpy(dtype=object)
    nbytes = _col(op_frame, "bytes")
    fam = op_family(op_frame)
    special = np.isin(kind, ATTR_KINDS)
    pos = np.flatnonzero(pd.notna(fam) & ~special)
    if len(pos):
        names, dims, dtypes = _kernel_arrays(op_frame, pos, fam[pos])
        kernel, dfams, inverse = _distinct_kernels(names, dims, dtypes, fam[pos])
        pred = _predict_kernels(kernel, dfams, gpus, predict, None if strict else errors)[inverse]
        vec = kind[pos] == "vec"
        if vec.any():
            pred[vec] *= _vec_scale(op_frame, pos[vec], gpus)
        ms[pos] = pred
    covered = np.flatnonzero(pd.notna(fam) & special)
    if len(covered):
        rows = attr_kernel_rows(op_frame, covered)
        codes, first = _row_codes(rows)
        kernel = rows.iloc[first].reset_index(drop=True)
        ms[covered] = _predict_kernels(kernel, fam[covered][first], gpus, predict, None if strict else errors)[codes]
    a2a = np.flatnonzero(kind == "a2a")
    if len(a2a):  # DeepEP's closed form over each GPU's links (tilecast.forecast.a2a)
        rows = attr_kernel_rows(op_frame, a2a).reset_index(drop=True)
        for j, gpu in enumerate(gpus):
            ms[a2a, j] = a2a_ms(on_gpu(rows, gpu), gpu)
    bare = np.flatnonzero(pd.isna(fam) & special & (kind != "a2a"))
    if len(bare):
        ms[bare] = _attr_fallback_ms(op_frame, bare, gpus)
    bw = np.array([g.mem_bw_gbs for g in gpus], dtype=float)
    is_mem = kind == "mem"
    ms[is_mem] = 1e3 * nbytes[is_mem, None] / (bw[None, :] * GIB)
    is_ar, is_sr = kind == "allreduce", kind == "sendrecv"
    group = np.broadcast_to(np.asarray(n_gpus, dtype=float), (n,)).copy()
    if "attrs" in op_frame and is_ar.any():  # a collective over fewer GPUs than the graph's
        own = lookup(op_frame["attrs"].to_numpy(dtype=object)[is_ar],
                     {a: decode_attrs(a).get("group") for a in pd.unique(op_frame["attrs"][is_ar])})
        group[is_ar] = np.where(pd.notna(own), own, group[is_ar]).astype(float)
    for j, gpu in enumerate(gpus):
        ms[is_ar, j] = comm.allreduce_ms(nbytes[is_ar], gpu, group[is_ar])
        ms[is_sr, j] = comm.sendrecv_ms(nbytes[is_sr], gpu)
    kernel_rows = np.zeros(n, dtype=bool)
    kernel_rows[pos] = True
    kernel_rows[special] = True
    rest = ~kernel_rows & np.isnan(ms).any(axis=1)
    if rest.any():  # conv, vector ops no family covers: roofline of the row's own flops and bytes
        flops = _col(op_frame, "flops")[rest, None]
        f = np.array([g.fp32_gflops for g in gpus], dtype=float)[None, :]
        ms[rest] = 1e3 * np.maximum(flops / (f * 1e9), nbytes[rest, None] / (bw[None, :] * 1e9))
    return ms, errors


def _row_codes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """For kernel rows of mixed schemas: each row's distinct-row code and the first row of every code."""
    text = rows.astype(object).where(rows.notna(), "").astype(str).agg("|".join, axis=1).to_numpy()
    codes, uniq = pd.factorize(text, sort=False)
    return codes, np.unique(codes, return_index=True)[1]


def _attr_fallback_ms(op_frame: pd.DataFrame, pos: np.ndarray, gpus: list[GpuSpec]) -> np.ndarray:
    """ms of attribute-kind rows no family predicts (Gated DeltaNet), shape (rows, GPUs): the roofline of their
    FLOPs at the tensor-core peak of their dtype and of their bytes."""
    sub = op_frame.iloc[pos]
    flops, nbytes = _col(sub, "flops"), _col(sub, "bytes")
    dtypes = sub["dtype"].to_numpy(dtype=object)
    out = np.empty((len(pos), len(gpus)))
    for j, gpu in enumerate(gpus):
        peak = np.array([gpu.peak_gflops(peak_dtype(d)) for d in dtypes], dtype=float)
        out[:, j] = 1e3 * np.maximum(flops / (peak * 1e9), nbytes / (gpu.mem_bw_gbs * 1e9))
    return out


def op_latency_ms(op_frame: pd.DataFrame, gpu: GpuSpec, predict: FamilyPredictor | None = None,
                  n_gpus: int | None = None, comm: CommModel = DEFAULT_COMM) -> np.ndarray:
    """Per-instance latency (ms) of every op row on ``gpu`` (:func:`op_latency_matrix` for one GPU; a
    failed kernel prediction raises)."""
    return op_latency_matrix(op_frame, [gpu], predict, n_gpus, comm, strict=True)[0][:, 0]
