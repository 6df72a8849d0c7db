"""Work of the mixture-of-experts era's graph ops, per GPU (docs/method.md §21; their kernel rows §18): each op
of :data:`~tilecast.graph.ops.ATTR_KINDS` as the kernel row its table measures (:func:`attr_kernel_row`), so its FLOPs
and bytes are the kernel side's formulas for that row (:func:`tilecast.tiles.roofline.kernel_flops_bytes`: the
fused MoE layer with its routing distribution, MLA's expanded prefill and absorbed decode, DeepEP's bytes), the
same rows the predictors and the all-to-all model forecast.

- **Fused MoE** rows: ``tokens`` entering the layer on the MoE group (every token once, the table's
  ``num_tokens``), ``hidden``, ``inter`` per expert before the ``moe_tp`` split, ``topk``, ``experts``, ``moe_tp``,
  ``moe_ep``, ``distribution``, ``gated`` and the expert format (:func:`expert_format`) as ``dtype``.
- **MLA** rows: ``B, M, N, H`` (heads on this GPU) and the latent dims, ``dtype`` and ``kv_dtype`` the compute
  dtype (the cache is not quantised here).
- **All-to-all** rows: ``tokens`` on this GPU, ``hidden``, ``topk``, ``experts``, ``ep``, ``a2a_mode`` (``ll`` for
  a decode step, ``normal`` for a prompt), no ``dtype`` (DeepEP's own: fp8 dispatch, bf16 combine); ``nodes``
  depends on the GPU (its NVLink domain) and is added when a GPU runs the row.
- **Gated DeltaNet** (``gdn_prefill``: the chunked form, chunks of :data:`GDN_CHUNK` tokens; ``gdn_decode``: one
  recurrent step) has no table: each value head keeps a ``dk x dv`` state; a step reads and writes it (``~8 dk
  dv`` FLOPs per token and head), a chunk adds ``4 C (dk + dv)`` per token and head of intra-chunk attention and
  reads / writes the state once (:func:`gdn_flops_bytes`).

``expert_format`` is the one rule for the format routed experts run in (:data:`~tilecast.tiles.dtypes.MOE_DTYPES`):
the workload's dtype, except fp8 over a checkpoint of 128 x 128 block-scaled fp8 (``fp8_block``, as DeepSeek
ships), gpt-oss's mxfp4 experts (``w4a16_mxfp4`` in bf16, ``w4a8_mxfp4_mxfp8`` in fp8 and fp4: the release's
weights, the kernels the engines measure for them) and Kimi-K2.5's int4 experts (``int4_wo``, unless the
workload is fp4: NVIDIA's NVFP4 checkpoint).
"""


from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

from tilecast.tiles.dtypes import DTYPE_BYTES, MOE_DTYPES
from tilecast.tiles.roofline import kernel_flops_bytes

#: tokens per chunk of Gated DeltaNet's chunked (prefill) kernel (flash-linear-attention's default)
GDN_CHUNK = 64
#: the token-to-expert distribution a forecast assumes (a value of the moe kernel table's ``distribution``):
#: trained routers are not balanced, and the busiest expert sets a grouped GEMM's time; the mildest measured
#: skew is assumed, chosen before any serving figure was looked at (the MoE kernel rows measure all three)
DEFAULT_DISTRIBUTION = "power_law_1.01"
#: expert formats of a checkpoint's expert-only quantisation, by workload dtype: gpt-oss's mxfp4 experts run with
#: bf16 activations (bf16 workloads) or mxfp8 ones (fp8 and fp4: the lowest-precision kernel the engines run for
#: them, vLLM / TRT-LLM on Blackwell); Kimi-K2.5's int4 experts weight-only, unless fp4 (NVIDIA's NVFP4 release)
_EXPERT_FORMATS = {"mxfp4": {"bf16": "w4a16_mxfp4", "fp16": "w4a16_mxfp4", "fp8": "w4a8_mxfp4_mxfp8",
                             "fp4": "w4a8_mxfp4_mxfp8"},
                   "int4": {"bf16": "int4_wo", "fp16": "int4_wo", "fp8": "int4_wo"}}
#: graph-op dims -> kernel-row columns, attribute -> kernel-row column, per attribute kind (the tables'
#: schemas: ``moe``; ``mla_prefill`` / ``mla_decode``; ``a2a_dispatch`` / ``a2a_combine``; Gated DeltaNet has
#: no table, its row keeps the op's dims); every other attribute keeps its name, ``ckpt`` becomes ``dtype``
ATTR_ROWS: dict[str, tuple[dict[str, int], dict[str, str]]] = {
    "moe": ({"tokens": 1, "hidden": 2, "inter": 3}, {}),
    "mla": ({"B": 0, "M": 1, "N": 2, "H": 4},
            {"kv_lora": "kv_lora_rank", "rope": "qk_rope_head_dim", "nope": "qk_nope_head_dim", "v": "v_head_dim"}),
    "a2a": ({"tokens": 1, "hidden": 2}, {"mode": "a2a_mode"}),
    "gdn": ({"B": 0, "M": 1, "K": 3, "H": 4, "Hkv": 5}, {}),
}


def expert_format(workload_dtype: str, quantization: str) -> str:
    """The format (:data:`~tilecast.tiles.dtypes.MOE_DTYPES`) routed-expert weights run in for a workload dtype
    over a checkpoint's quantisation (:data:`tilecast.specs.architecture.QUANTIZATIONS`)."""
    if workload_dtype in ("amp_bf16", "fp32", "tf32"):
        workload_dtype = "bf16"
    if workload_dtype in _EXPERT_FORMATS.get(quantization, {}):
        return _EXPERT_FORMATS[quantization][workload_dtype]
    if workload_dtype == "fp8" and quantization == "fp8_block":
        return "fp8_block"
    return workload_dtype


def expert_weight_bytes(workload_dtype: str, quantization: str) -> float:
    """Bytes per expert weight (block scales included) of :func:`expert_format`."""
    return MOE_DTYPES[expert_format(workload_dtype, quantization)].weight_bytes


def attr_kernel_row(kind: str, op: str, dtype: str, dims: tuple[int, ...], attrs: tuple) -> dict[str, Any]:
    """The kernel row (its table's schema, :data:`ATTR_ROWS`) of one op of an attribute kind; ``dims`` are the
    op's (b, m, n, k, h, hkv)."""
    to_columns, renamed = ATTR_ROWS[kind]
    row: dict[str, Any] = {"OPName": op, **{col: int(dims[i]) for col, i in to_columns.items()}}
    extra = dict(attrs)
    ckpt = extra.pop("ckpt", None)
    row.update({renamed.get(k, k): v for k, v in extra.items()})
    if kind == "moe":
        row["dtype"] = expert_format(dtype, ckpt or "")
    elif kind == "mla":
        row["dtype"] = row["kv_dtype"] = dtype
    elif kind == "gdn":
        row["dtype"] = dtype
    return row


@functools.lru_cache(maxsize=4096)
def attr_flops_bytes(kind: str, op: str, dtype: str, dims: tuple[int, ...], attrs: tuple) -> tuple[float, float]:
    """FLOPs and bytes of one op of an attribute kind on one GPU: its kernel row's (an all-to-all within one
    NVLink domain: the bytes leaving the GPU)."""
    if kind == "gdn":
        a = dict(attrs)
        f, b = gdn_flops_bytes(dims[0], dims[1], dims[4], dims[3], a["dv"], op == "gdn_decode", DTYPE_BYTES[dtype],
                               DTYPE_BYTES[a.get("state", "fp32")])
        return float(f), float(b)
    f, b = kernel_flops_bytes(pd.DataFrame([attr_kernel_row(kind, op, dtype, dims, attrs)]))
    return float(f[0]), float(b[0])

def gdn_flops_bytes(b, m, heads, dk, dv, decode, act_bytes, state_bytes) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of Gated DeltaNet on one GPU: ``b`` sequences of ``m`` new tokens, ``heads`` value heads
    of ``dk x dv`` state each (module docstring)."""
    b, m, heads, dk, dv = (np.asarray(x, dtype=float) for x in (b, m, heads, dk, dv))
    decode = np.asarray(decode, dtype=bool)
    chunks = np.where(decode, m, np.ceil(m / GDN_CHUNK))
    per_token = np.where(decode, 8.0 * dk * dv, 8.0 * dk * dv + 4.0 * GDN_CHUNK * (dk + dv))
    flops = b * heads * m * per_token
    state = 2.0 * b * heads * chunks * dk * dv * np.asarray(state_bytes, dtype=float)
    nbytes = state + b * heads * m * (2 * dk + 2 * dv) * np.asarray(act_bytes, dtype=float)
    return flops, nbytes
