"""Operator vocabulary of kernel rows: op name (and dtype) -> family, and per-output-element costs
(docs/method.md §1).

fp32 rows keep the NeuSight families (bmm, linear, elementwise, softmax, layernorm). GEMMs in a
tensor-core dtype (tf32, bf16, fp16, fp8, fp4) form one family, ``tc_gemm``, with the dtype a feature;
fused attention is two families, ``attn_prefill`` (causal FlashAttention over a prompt) and
``attn_decode`` (new tokens over a KV cache). Vector ops in half precision (bf16, fp16) are one family,
``vec_half``, with the op a feature (norms, residual adds, activations, rotary embedding; trained on
Vidur's fp16 profiles).
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

#: kernel family of each op name; one predictor is trained per family
FAMILY_OF_OP: dict[str, str] = {
    "bmm": "bmm",
    "linear": "linear",
    "softmax": "softmax",
    "ln": "layernorm",
    "rmsnorm": "layernorm",
    "attn_prefill": "attn_prefill",
    "attn_decode": "attn_decode",
    **{op: "elementwise" for op in BINARY_VEC | UNARY_VEC},
}
#: families of fp32 rows (the NeuSight families)
FP32_FAMILIES = ("bmm", "linear", "elementwise", "softmax", "layernorm")
#: families of the precision path: GEMMs in tf32/bf16/fp16/fp8, fused prefill and decode attention, and
#: half-precision vector ops
TENSOR_FAMILIES = ("tc_gemm", "attn_prefill", "attn_decode", "vec_half")
#: every family; one predictor is trained and registered per family
FAMILIES = FP32_FAMILIES + TENSOR_FAMILIES
#: the dim columns of each family's kernel rows (precision-path rows also carry ``dtype``; attention ``kv_dtype``)
FAMILY_DIMS: dict[str, tuple[str, ...]] = {
    "bmm": ("B", "M", "N", "K"), "linear": ("B", "M", "N", "K"), "tc_gemm": ("B", "M", "N", "K"),
    "attn_prefill": ("B", "M", "N", "K", "H", "Hkv"), "attn_decode": ("B", "M", "N", "K", "H", "Hkv"),
    "elementwise": ("B", "H"), "softmax": ("B", "H"), "layernorm": ("B", "H"), "vec_half": ("B", "H"),
}

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
