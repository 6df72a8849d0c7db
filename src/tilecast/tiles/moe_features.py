"""Device-agnostic features of the mixture-of-experts era families (``moe``, ``mla_prefill``, ``mla_decode``).

As for every family (:mod:`tilecast.tiles.features`): shape quantities, the routing statistics of
:mod:`tilecast.tiles.moe`, the expert format and the serving framework as codes, and ratios of the row's work to
the GPU's resources (roofline times at the format's peak, intensity over the ridge point, bytes over L2, waves
of the grouped GEMM or attention blocks over the SMs); never a raw spec value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.tiles.dtypes import MOE_DTYPES, row_dtypes
from tilecast.tiles.feature_base import common_tensor as _common_tensor
from tilecast.tiles.feature_base import dim as _dim
from tilecast.tiles.feature_base import log2 as _log2
from tilecast.tiles.mla import MLA_DEFAULTS
from tilecast.tiles.moe import power_law_alpha, routing_stats
from tilecast.tiles.ops import DEFAULT_FRAMEWORK, FRAMEWORKS

#: stable codes of the expert formats and frameworks (categorical features)
MOE_DTYPE_CODES: dict[str, int] = {d: i for i, d in enumerate(MOE_DTYPES)}
FRAMEWORK_CODES: dict[str, int] = {f: i for i, f in enumerate(FRAMEWORKS)}
#: output rows x columns of a grouped-GEMM tile (CUTLASS / TRT-LLM MoE kernels' common 128 x 128)
MOE_TILE = 128.0
#: heads per block of the absorbed-MLA decode kernels (FlashMLA / TRT-LLM: 64 query heads per CTA)
MLA_HEAD_TILE = 64.0
MLA_Q_TILE = 128.0


def _text(rows: pd.DataFrame, col: str, default: str) -> np.ndarray:
    if col not in rows:
        return np.full(len(rows), default, dtype=object)
    return rows[col].astype(object).where(rows[col].notna(), default).astype(str).to_numpy(dtype=object)


def framework_codes(rows: pd.DataFrame, family: str) -> np.ndarray:
    """Code of each row's ``framework`` (the family's :data:`DEFAULT_FRAMEWORK` where absent; -1 unknown)."""
    names = np.char.lower(_text(rows, "framework", DEFAULT_FRAMEWORK[family]).astype(str))
    return np.array([FRAMEWORK_CODES.get(n, -1) for n in names], dtype=float)


def moe_features(rows: pd.DataFrame, spec: pd.DataFrame, tiles: pd.DataFrame | None, roof_ms: np.ndarray,
                 flops: np.ndarray, nbytes: np.ndarray) -> pd.DataFrame:
    """Features of fused-MoE rows: shape, routing statistics, format, framework, roofline ratios and the
    grouped GEMM's waves (one 128 x 128 tile per output block of each touched expert's gate-up GEMM)."""
    sm = spec["num_sm"].to_numpy(dtype=float)
    tokens, hidden, inter, topk, experts, tp, ep = (_dim(rows, c) for c in ("tokens", "hidden", "inter", "topk",
                                                                             "experts", "moe_tp", "moe_ep"))
    dist = _text(rows, "distribution", "balanced")
    pairs, active, busiest = routing_stats(tokens, experts, topk, ep, dist)
    inter_local = inter / tp
    per_expert = pairs / np.maximum(active, 1e-9)
    blocks = active * np.ceil(per_expert / MOE_TILE) * np.ceil(2 * inter_local / MOE_TILE)
    waves = np.ceil(blocks / sm)
    dtypes = row_dtypes(rows.assign(dtype=_text(rows, "dtype", "bf16")))
    fmt = [MOE_DTYPES.get(d, MOE_DTYPES["bf16"]) for d in dtypes]
    alpha = np.array([power_law_alpha(d) or 0.0 for d in dist])
    gated = np.array([str(g).strip().lower() not in ("false", "0", "0.0", "no") for g in _text(rows, "gated", "true")])
    return pd.DataFrame({
        "log_tokens": _log2(tokens), "log_hidden": _log2(hidden), "log_inter_local": _log2(inter_local),
        "log_topk": _log2(topk), "log_experts": _log2(experts), "log_local_experts": _log2(experts / ep),
        "log_moe_tp": _log2(tp), "log_moe_ep": _log2(ep),
        "log_pairs": _log2(pairs), "log_active": _log2(active), "log_tokens_per_expert": _log2(per_expert),
        "log_busiest": _log2(busiest), "imbalance": busiest / np.maximum(per_expert, 1e-9), "alpha": alpha,
        "gated": gated * 1.0, "weight_bytes": np.array([f.weight_bytes for f in fmt]),
        "act_bytes": np.array([f.act_bytes for f in fmt]),
        "dtype_code": np.array([MOE_DTYPE_CODES.get(d, -1) for d in dtypes], dtype=float),
        "framework_code": framework_codes(rows, "moe"),
        "log_waves": _log2(waves), "wave_fill": blocks / (sm * np.maximum(waves, 1)),
        **_common_tensor(spec, roof_ms, flops, nbytes, rows),
    }, index=rows.index)


def mla_features(rows: pd.DataFrame, spec: pd.DataFrame, tiles: pd.DataFrame | None, roof_ms: np.ndarray,
                 flops: np.ndarray, nbytes: np.ndarray) -> pd.DataFrame:
    """Features of MLA rows: shape, latent dims, KV format, framework, roofline ratios and waves (prefill: one
    block per 128 query rows per head and sequence; decode: one per 64 heads per sequence)."""
    sm = spec["num_sm"].to_numpy(dtype=float)
    b, m, n, h = (_dim(rows, c) for c in ("B", "M", "N", "H"))
    decode = rows["OPName"].astype(str).to_numpy() == "mla_decode"
    blocks = np.where(decode, b * np.ceil(h / MLA_HEAD_TILE), b * h * np.ceil(m / MLA_Q_TILE))
    waves = np.ceil(blocks / sm)
    dims = {c: pd.to_numeric(rows[c], errors="coerce").fillna(v).to_numpy(float) if c in rows else np.full(len(rows), v)
            for c, v in MLA_DEFAULTS.items()}
    kv = row_dtypes(rows.assign(kv_dtype=_text(rows, "kv_dtype", "bf16")), "kv_dtype")
    family = "mla_decode" if decode.all() else "mla_prefill"
    return pd.DataFrame({
        "log_b": _log2(b), "log_m": _log2(m), "log_n": _log2(n), "log_h": _log2(h), "log_tokens": _log2(b * m),
        "log_kv_tokens": _log2(b * n), "log_latent": _log2(dims["kv_lora_rank"] + dims["qk_rope_head_dim"]),
        "log_qk_head": _log2(dims["qk_nope_head_dim"] + dims["qk_rope_head_dim"]),
        "kv_fp8": (kv == "fp8") * 1.0, "framework_code": framework_codes(rows, family),
        "log_waves": _log2(waves), "wave_fill": blocks / (sm * np.maximum(waves, 1)),
        "log_blocks_per_sm": _log2(blocks / sm),
        **_common_tensor(spec, roof_ms, flops, nbytes, rows),
    }, index=rows.index)


MOE_DEFAULT = ("log_tokens", "log_hidden", "log_inter_local", "log_topk", "log_experts", "log_local_experts",
               "log_moe_tp", "log_moe_ep", "log_pairs", "log_active", "log_tokens_per_expert", "log_busiest",
               "imbalance", "alpha", "gated", "weight_bytes", "act_bytes", "dtype_code", "framework_code",
               "log_waves", "wave_fill", "log_compute_us", "log_memory_us", "log_intensity_over_ridge",
               "log_bytes_over_l2", "log_roofline_us")
MLA_DEFAULT = ("log_b", "log_m", "log_n", "log_h", "log_tokens", "log_kv_tokens", "kv_fp8", "framework_code",
               "log_waves", "wave_fill", "log_blocks_per_sm", "log_compute_us", "log_memory_us",
               "log_intensity_over_ridge", "log_bytes_over_l2", "log_roofline_us")
#: decode without the per-SM block features: its kernels split the KV length over the SMs, so blocks of
#: ``B x heads / 64`` are a disguised SM count that ties a left-out GPU to the training GPU of the nearest SM
#: count (leave-one-GPU-out mean 40% -> 30%, B300 73% -> 19%: ``benchmarks/moe.md``)
MLA_DECODE_DEFAULT = tuple(f for f in MLA_DEFAULT if f not in ("log_waves", "wave_fill", "log_blocks_per_sm"))
