"""Operator vocabulary of kernel rows: op name (and dtype) -> family, and per-output-element costs
(docs/method.md §1).

fp32 rows keep the NeuSight families (bmm, linear, elementwise, softmax, layernorm). GEMMs in a
tensor-core dtype (tf32, bf16, fp16, fp8, fp4) form one family, ``tc_gemm``, with the dtype a feature;
fused attention is two families, ``attn_prefill`` (causal FlashAttention over a prompt) and
``attn_decode`` (new tokens over a KV cache). Vector ops in half precision (bf16, fp16) are one family,
``vec_half``, with the op a feature (norms, residual adds, activations, rotary embedding; trained on
Vidur's fp16 profiles).

Mixture-of-experts era families (:data:`MOE_MLA_FAMILIES`, trained on AIConfigurator's MoE and MLA tables): one
fused MoE layer (``moe``: router top-k dispatch, grouped expert GEMMs, combine; :mod:`tilecast.tiles.moe`) and
multi-head latent attention (``mla_prefill``, ``mla_decode``; :mod:`tilecast.tiles.mla`). Their rows carry
their own columns (:data:`FAMILY_DIMS`, :data:`FAMILY_OPTIONAL`), not ``B, M, N, K`` GEMM dims. Expert-parallel
all-to-all rows (``a2a_dispatch`` / ``a2a_combine``, :mod:`tilecast.tiles.a2a`) are communication, costed by
:mod:`tilecast.forecast.a2a`, not a learned family.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.tiles.dtypes import TENSOR_DTYPES, row_dtypes

#: vector-op dtypes of the ``vec_half`` family
HALF_VECTOR_DTYPES = frozenset({"bf16", "fp16"})

#: vector ops with two tensor inputs (12 bytes moved per fp32 output element)
BINARY_VEC = frozenset({"add", "mul", "div", "pow", "sub"})
#: vector ops with one tensor input (8 bytes per output element); "u" = with a scalar
UNARY_VEC = frozenset({"addu", "mulu", "divu", "powu", "subu", "tanh", "gelu", "relu", "silu", "sigmoid",
                       "exp", "neg", "rsqrt", "sqrt"})
GEMM_OPS = frozenset({"bmm", "linear"})
#: fused attention ops (rows: B batch, M query tokens, N KV tokens, K head dim, H query heads, Hkv KV heads)
ATTENTION_OPS = frozenset({"attn_prefill", "attn_decode"})
#: fused mixture-of-experts layer (rows: tokens, hidden, inter, topk, experts, moe_tp, moe_ep, distribution)
MOE_OPS = frozenset({"moe"})
#: multi-head latent attention (rows: B, M new tokens, N KV tokens, H heads, latent dims)
MLA_OPS = frozenset({"mla_prefill", "mla_decode"})

#: kernel family of each op name; one predictor is trained per family
FAMILY_OF_OP: dict[str, str] = {
    "bmm": "bmm",
    "linear": "linear",
    "softmax": "softmax",
    "ln": "layernorm",
    "rmsnorm": "layernorm",
    "attn_prefill": "attn_prefill",
    "attn_decode": "attn_decode",
    "moe": "moe",
    "mla_prefill": "mla_prefill",
    "mla_decode": "mla_decode",
    **{op: "elementwise" for op in BINARY_VEC | UNARY_VEC},
}
#: families of fp32 rows (the NeuSight families)
FP32_FAMILIES = ("bmm", "linear", "elementwise", "softmax", "layernorm")
#: families of the precision path: GEMMs in tf32/bf16/fp16/fp8, fused prefill and decode attention, and
#: half-precision vector ops
TENSOR_FAMILIES = ("tc_gemm", "attn_prefill", "attn_decode", "vec_half")
#: mixture-of-experts era families: the fused MoE layer and multi-head latent attention (AIConfigurator's
#: ``moe``, ``context_mla``, ``generation_mla`` tables)
MOE_MLA_FAMILIES = ("moe", "mla_prefill", "mla_decode")
#: every family trained on AIConfigurator-style tables of several dtypes (every row of a GPU scores in its
#: leave-one-GPU-out fold)
PRECISION_FAMILIES = TENSOR_FAMILIES + MOE_MLA_FAMILIES
#: every family; one predictor is trained and registered per family
FAMILIES = FP32_FAMILIES + PRECISION_FAMILIES
#: the dim columns of each family's kernel rows (precision-path rows also carry ``dtype``; attention ``kv_dtype``)
FAMILY_DIMS: dict[str, tuple[str, ...]] = {
    "bmm": ("B", "M", "N", "K"), "linear": ("B", "M", "N", "K"), "tc_gemm": ("B", "M", "N", "K"),
    "attn_prefill": ("B", "M", "N", "K", "H", "Hkv"), "attn_decode": ("B", "M", "N", "K", "H", "Hkv"),
    "elementwise": ("B", "H"), "softmax": ("B", "H"), "layernorm": ("B", "H"), "vec_half": ("B", "H"),
    "moe": ("tokens", "hidden", "inter", "topk", "experts", "moe_tp", "moe_ep"),
    "mla_prefill": ("B", "M", "N", "H"), "mla_decode": ("B", "M", "N", "H"),
}
_MLA_OPTIONAL = (("dtype", "string"), ("kv_dtype", "string"), ("framework", "string"),
                 ("kv_lora_rank", "long"), ("qk_rope_head_dim", "long"), ("qk_nope_head_dim", "long"),
                 ("v_head_dim", "long"))
#: optional columns of a family's rows beyond :data:`FAMILY_DIMS`, with their type (MLflow column types); a
#: missing one takes its default (``dtype`` bf16, ``distribution`` balanced, ``gated`` true, ``framework``
#: :data:`DEFAULT_FRAMEWORK`, the latent dims DeepSeek-V3's: :data:`tilecast.tiles.mla.MLA_DEFAULTS`)
FAMILY_OPTIONAL: dict[str, tuple[tuple[str, str], ...]] = {
    "moe": (("dtype", "string"), ("distribution", "string"), ("gated", "boolean"), ("framework", "string")),
    "mla_prefill": _MLA_OPTIONAL, "mla_decode": _MLA_OPTIONAL,
}
#: serving frameworks whose kernels the MoE-era tables measure (a categorical feature of those families)
FRAMEWORKS = ("sglang", "trtllm", "vllm")
#: the framework a row without one is forecast for: the one measured on every public GPU for the family
DEFAULT_FRAMEWORK: dict[str, str] = {"moe": "sglang", "mla_prefill": "trtllm", "mla_decode": "trtllm"}

#: vector ops of half-precision kernels beyond the fp32 vocabulary: rotary embedding (q and k in one kernel)
HALF_ONLY_VEC = frozenset({"rope"})
#: every vector op name (the ``vec_half`` family's vocabulary)
VECTOR_OPS = frozenset(op for op, fam in FAMILY_OF_OP.items() if fam in ("elementwise", "softmax", "layernorm")) \
    | HALF_ONLY_VEC

#: flops per output element
OPS_PER_OUTPUT: dict[str, float] = {"softmax": 5.0, "ln": 6.0, "rmsnorm": 4.0}


def family_of(op: str, dtype: str = "fp32") -> str | None:
    """Family of a kernel op name in ``dtype``, or None for an op no predictor covers."""
    if op in GEMM_OPS and dtype in TENSOR_DTYPES:
        return "tc_gemm"
    if op in VECTOR_OPS and dtype in HALF_VECTOR_DTYPES:
        return "vec_half"
    return FAMILY_OF_OP.get(op)


def row_families(rows: pd.DataFrame) -> pd.Series:
    """Family of each kernel row from its ``OPName`` and ``dtype`` (fp32 where absent); None if uncovered."""
    ops = rows["OPName"].astype(str).to_numpy(dtype=object)
    dtypes = row_dtypes(rows)
    fam = pd.Series(ops, index=rows.index).map(FAMILY_OF_OP)
    fam[np.isin(ops, list(GEMM_OPS)) & np.isin(dtypes, list(TENSOR_DTYPES))] = "tc_gemm"
    fam[np.isin(ops, list(VECTOR_OPS)) & np.isin(dtypes, list(HALF_VECTOR_DTYPES))] = "vec_half"
    return fam.astype(object).where(fam.notna(), None)


def ops_per_output(op: str) -> float:
    """FLOPs per output element of a vector op (1 for plain elementwise)."""
    return OPS_PER_OUTPUT.get(op, 1.0)


def mem_per_output(op: str) -> float:
    """fp32 bytes moved per output element of a vector op (inputs + output)."""
    return 12.0 if op in BINARY_VEC else 8.0
