"""Device-agnostic feature vectors of kernel rows, one builder per family (pure, vectorised).

Everything a learned predictor reads is either a shape quantity or a ratio of kernel work to the
GPU's per-SM resources (docs/method.md §5), never a raw spec value: with five training GPUs raw specs
act as a device identity and trees cannot extrapolate from them (docs/method.md §5). Times are log2 of
microseconds, counts log2 of counts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from tilecast.tiles.attention import attention_pairs
from tilecast.tiles.feature_base import _US
from tilecast.tiles.feature_base import common_tensor as _common_tensor
from tilecast.tiles.feature_base import dim as _dim
from tilecast.tiles.feature_base import log2 as _log2
from tilecast.tiles.feature_base import per_sm as _per_sm
from tilecast.tiles.gemm import gemm_waves
from tilecast.tiles.moe_features import MLA_DECODE_DEFAULT, MLA_DEFAULT, MOE_DEFAULT, mla_features, moe_features
from tilecast.tiles.ops import BINARY_VEC, UNARY_VEC, VECTOR_OPS
from tilecast.tiles.vector import vector_waves

#: stable integer code of every vector op (the op is a feature of the elementwise family)
OP_CODES: dict[str, int] = {op: i for i, op in enumerate(sorted(BINARY_VEC | UNARY_VEC | {"softmax", "ln",
                                                                                          "rmsnorm"}))}


def gemm_features(rows: pd.DataFrame, spec: pd.DataFrame, tiles: pd.DataFrame, roof_ms: np.ndarray,
                  flops: np.ndarray, nbytes: np.ndarray) -> pd.DataFrame:
    """Features of bmm / linear rows under ``tiles`` (``tile_k, tile_m, split, sliced``); compute rates are
    the rows' GEMM peak (``peak_gflops``: the fp32 matrix-core rate where the GPU has one, as the roofline)."""
    sm, flops_per_sm, bytes_per_sm, l2_bytes = _per_sm(spec, "peak_gflops")
    w = gemm_waves(rows, tiles, sm)
    b, m, n, k = (_dim(rows, c) for c in ("B", "M", "N", "K"))
    ridge = flops_per_sm / bytes_per_sm
    # operand traffic at the chosen tile without L2 reuse: A (M x N) is read once per column of output tiles,
    # B (N x K) once per row of them; the smaller operand fits in L2 or not (then it is re-read from DRAM)
    a_bytes, b_bytes = 4.0 * b * m * n, 4.0 * b * n * k
    tiled = a_bytes * np.ceil(k / tiles["tile_k"].to_numpy(float)) + b_bytes * np.ceil(m / tiles["tile_m"].to_numpy(
        float)) + 4.0 * b * m * k
    cores = spec["cores_per_sm"].to_numpy(dtype=float) if "cores_per_sm" in spec else np.full(len(rows), np.nan)
    return pd.DataFrame({
        "log_tiled_intensity_over_ridge": _log2(flops / tiled / ridge),
        "log_operand_over_l2": _log2(np.minimum(a_bytes, b_bytes) / l2_bytes),
        "log_cores_per_sm": _log2(np.where(cores > 0, cores, np.nan)),
        "log_b": _log2(b), "log_m": _log2(m), "log_n": _log2(n), "log_k": _log2(k),
        "m_mod4": (m % 4 == 0) * 1.0, "n_mod4": (n % 4 == 0) * 1.0, "k_mod4": (k % 4 == 0) * 1.0,
        "log_tile_k": _log2(tiles["tile_k"]), "log_tile_m": _log2(tiles["tile_m"]),
        "log_split": _log2(tiles["split"]), "sliced": tiles["sliced"].to_numpy(dtype=float),
        "log_waves": _log2(w["waves"]), "log_blocks_per_sm": _log2(w["blocks"] / sm),
        "wave_fill": w["wave_fill"].to_numpy(), "log_padding": _log2(w["padding"]),
        "log_tile_compute_us": _log2(w["tile_flops"] / flops_per_sm * _US),
        "log_tile_memory_us": _log2(w["tile_bytes"] / bytes_per_sm * _US),
        "log_intensity_over_ridge": _log2(flops / nbytes / ridge),
        "log_bytes_over_l2": _log2(nbytes / l2_bytes),
        "log_roofline_us": _log2(roof_ms * 1e3),
    }, index=rows.index)


def vector_features(rows: pd.DataFrame, spec: pd.DataFrame, tiles: pd.DataFrame | None, roof_ms: np.ndarray,
                    flops: np.ndarray, nbytes: np.ndarray) -> pd.DataFrame:
    """Features of elementwise / softmax / layernorm rows (tiles are implied by the op and shape)."""
    sm, flops_per_sm, bytes_per_sm, l2_bytes = _per_sm(spec)
    w = vector_waves(rows, sm)
    b, h = _dim(rows, "B"), _dim(rows, "H")
    ops = rows["OPName"].astype(str)
    return pd.DataFrame({
        "log_b": _log2(b), "log_h": _log2(h), "log_numel": _log2(b * h), "h_mod4": (h % 4 == 0) * 1.0,
        "op_code": ops.map(OP_CODES).fillna(-1).to_numpy(dtype=float),
        "mem_per_output": w["mem_per_output"].to_numpy(), "ops_per_output": w["ops_per_output"].to_numpy(),
        "log_waves": _log2(w["waves"]), "log_blocks_per_sm": _log2(w["blocks"] / sm),
        "wave_fill": w["wave_fill"].to_numpy(),
        "log_tile_compute_us": _log2(w["tile_flops"] / flops_per_sm * _US),
        "log_tile_memory_us": _log2(w["tile_bytes"] / bytes_per_sm * _US),
        "log_bytes_over_l2": _log2(nbytes / l2_bytes),
        "log_roofline_us": _log2(roof_ms * 1e3),
    }, index=rows.index)


#: output tiles (rows x columns) tensor-core GEMM kernels of the data choose among (CUTLASS / cuBLAS
#: tensor-op tiles); their wave counts are features, no tile is profiled in the data
TC_GEMM_TILES = ((128, 128), (128, 256), (64, 128))
#: query rows per block of FlashAttention-style prefill kernels
ATTENTION_Q_TILE = 128.0
#: keys per split of split-KV (FlashDecoding-style) decode kernels, at the least
ATTENTION_KV_SPLIT = 256.0


def tc_gemm_features(rows: pd.DataFrame, spec: pd.DataFrame, tiles: pd.DataFrame | None, roof_ms: np.ndarray,
                     flops: np.ndarray, nbytes: np.ndarray) -> pd.DataFrame:
    """Features of tensor-core GEMM rows: shape, dtype, roofline ratios, and waves under each tile of
    :data:`TC_GEMM_TILES` (output ``M x K`` of ``B`` GEMMs)."""
    sm = spec["num_sm"].to_numpy(dtype=float)
    b, m, n, k = (_dim(rows, c) for c in ("B", "M", "N", "K"))
    out = {"log_b": _log2(b), "log_m": _log2(m), "log_n": _log2(n), "log_k": _log2(k),
           **_common_tensor(spec, roof_ms, flops, nbytes, rows)}
    for tm, tk in TC_GEMM_TILES:
        blocks = b * np.ceil(m / tm) * np.ceil(k / tk)
        waves = np.ceil(blocks / sm)
        out[f"log_waves_{tm}x{tk}"] = _log2(waves)
        out[f"wave_fill_{tm}x{tk}"] = blocks / (sm * waves)
    return pd.DataFrame(out, index=rows.index)


def attention_features(rows: pd.DataFrame, spec: pd.DataFrame, tiles: pd.DataFrame | None, roof_ms: np.ndarray,
                       flops: np.ndarray, nbytes: np.ndarray) -> pd.DataFrame:
    """Features of fused-attention rows: shape, GQA group, dtype, roofline ratios and waves (prefill:
    one block per 128 query rows per head and sequence; decode: one block per KV head and sequence)."""
    sm = spec["num_sm"].to_numpy(dtype=float)
    b, m, n, k, h = (_dim(rows, c) for c in ("B", "M", "N", "K", "H"))
    hkv = np.where(_dim_or(rows, "Hkv", h) > 0, _dim_or(rows, "Hkv", h), h)
    decode = rows["OPName"].astype(str).to_numpy() == "attn_decode"
    blocks = np.where(decode, b * hkv, b * h * np.ceil(m / ATTENTION_Q_TILE))
    waves = np.ceil(blocks / sm)
    # kernels instantiate power-of-two head dims (64 / 128 / 256 / 512): a 192 head runs a 256 kernel
    k_pad = 2.0 ** np.ceil(np.log2(np.maximum(k, 1.0)))
    # split-KV decode (FlashDecoding): when sequences x KV heads leave SMs idle, the cache is split over blocks,
    # at most one split per ATTENTION_KV_SPLIT keys
    splits = np.where(decode, np.clip(np.ceil(sm / np.maximum(b * hkv, 1.0)), 1.0,
                                      np.maximum(np.ceil(n / ATTENTION_KV_SPLIT), 1.0)), 1.0)
    split_blocks = blocks * splits
    split_waves = np.ceil(split_blocks / sm)
    return pd.DataFrame({
        "log_b": _log2(b), "log_m": _log2(m), "log_n": _log2(n), "log_k": _log2(k), "log_h": _log2(h),
        "log_hkv": _log2(hkv), "log_group": _log2(h / hkv), "log_pairs": _log2(attention_pairs(m, n)),
        "log_waves": _log2(waves), "wave_fill": blocks / (sm * waves), "log_blocks_per_sm": _log2(blocks / sm),
        "log_k_padding": _log2(k_pad / np.maximum(k, 1.0)), "log_kv_splits": _log2(splits),
        "split_wave_fill": split_blocks / (sm * split_waves), "log_split_waves": _log2(split_waves),
        **_common_tensor(spec, roof_ms, flops, nbytes, rows),
    }, index=rows.index)


#: op codes of the ``vec_half`` family (its own table: the fp32 families' codes stay as registered)
HALF_OP_CODES: dict[str, int] = {op: i for i, op in enumerate(sorted(VECTOR_OPS))}


def vec_half_features(rows: pd.DataFrame, spec: pd.DataFrame, tiles: pd.DataFrame | None, roof_ms: np.ndarray,
                      flops: np.ndarray, nbytes: np.ndarray) -> pd.DataFrame:
    """Features of half-precision vector rows: shape, op, bytes per output, waves and roofline ratios."""
    sm, _, bytes_per_sm, l2_bytes = _per_sm(spec, "peak_gflops")
    w = vector_waves(rows, sm)
    b, h = _dim(rows, "B"), _dim(rows, "H")
    numel = b * h
    return pd.DataFrame({
        "log_b": _log2(b), "log_h": _log2(h), "log_numel": _log2(numel),
        "op_code": rows["OPName"].astype(str).map(HALF_OP_CODES).fillna(-1).to_numpy(dtype=float),
        "bytes_per_output": nbytes / numel, "log_waves": _log2(w["waves"]), "wave_fill": w["wave_fill"].to_numpy(),
        "log_blocks_per_sm": _log2(w["blocks"] / sm), "log_memory_us": _log2(nbytes / (bytes_per_sm * sm) * _US),
        "log_bytes_over_l2": _log2(nbytes / l2_bytes), "log_roofline_us": _log2(roof_ms * 1e3),
    }, index=rows.index)


def _dim_or(rows: pd.DataFrame, c: str, default: np.ndarray) -> np.ndarray:
    return _dim(rows, c) if c in rows else np.asarray(default, dtype=float)


FeatureBuilder = Callable[..., pd.DataFrame]
#: feature builder of each family
FEATURE_BUILDERS: dict[str, FeatureBuilder] = {
    "bmm": gemm_features, "linear": gemm_features,
    "elementwise": vector_features, "softmax": vector_features, "layernorm": vector_features,
    "tc_gemm": tc_gemm_features, "attn_prefill": attention_features, "attn_decode": attention_features,
    "vec_half": vec_half_features,
    "moe": moe_features, "mla_prefill": mla_features, "mla_decode": mla_features,
}

#: features the learned predictors read by default, per family, chosen by leave-one-training-GPU-out
#: MAPE (benchmarks/kernels.md): the per-SM tile times help GEMMs but make vector families worse on a
#: held-out GPU, and elementwise does best on shape, op and waves alone
GEMM_DEFAULT = ("log_b", "log_m", "log_n", "log_k", "m_mod4", "n_mod4", "k_mod4", "log_tile_k", "log_tile_m",
                "log_split", "sliced", "log_waves", "log_blocks_per_sm", "wave_fill", "log_padding",
                "log_intensity_over_ridge", "log_tile_compute_us", "log_tile_memory_us")
ROW_VECTOR_DEFAULT = ("log_b", "log_h", "log_numel", "h_mod4", "op_code", "mem_per_output", "ops_per_output",
                      "log_waves", "log_blocks_per_sm", "wave_fill", "log_bytes_over_l2", "log_roofline_us")
ELEMENTWISE_DEFAULT = ("log_b", "log_h", "log_numel", "h_mod4", "op_code", "mem_per_output", "ops_per_output",
                       "log_waves", "log_blocks_per_sm", "wave_fill")
TC_GEMM_DEFAULT = ("log_b", "log_m", "log_n", "log_k", "bytes_per_element", "log_compute_us", "log_memory_us",
                   "log_intensity_over_ridge", "log_bytes_over_l2", "log_roofline_us",
                   *(f"{p}_{tm}x{tk}" for tm, tk in TC_GEMM_TILES for p in ("log_waves", "wave_fill")))
ATTENTION_DEFAULT = ("log_b", "log_m", "log_n", "log_k", "log_h", "log_hkv", "log_group", "log_pairs",
                     "log_waves", "wave_fill", "log_blocks_per_sm", "bytes_per_element", "log_compute_us",
                     "log_memory_us", "log_intensity_over_ridge", "log_bytes_over_l2", "log_roofline_us")
DEFAULT_FEATURES: dict[str, tuple[str, ...]] = {
    "bmm": GEMM_DEFAULT, "linear": GEMM_DEFAULT, "elementwise": ELEMENTWISE_DEFAULT,
    "softmax": ROW_VECTOR_DEFAULT, "layernorm": ROW_VECTOR_DEFAULT,
    "tc_gemm": TC_GEMM_DEFAULT, "attn_prefill": ATTENTION_DEFAULT, "attn_decode": ATTENTION_DEFAULT,
    # leave-one-GPU-out over Vidur's two GPUs (benchmarks/precision.md): the small set generalises best
    "vec_half": ("log_numel", "op_code", "log_memory_us", "log_roofline_us"),
    "moe": MOE_DEFAULT, "mla_prefill": MLA_DEFAULT, "mla_decode": MLA_DECODE_DEFAULT,
}


def default_features(family: str) -> list[str]:
    """Default feature columns of a family."""
    if family not in DEFAULT_FEATURES:
        raise ValueError(f"unknown kernel family {family!r}; known: {', '.join(DEFAULT_FEATURES)}")
    return list(DEFAULT_FEATURES[family])
