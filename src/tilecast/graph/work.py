"""Work of the mixture-of-experts era's operators, per GPU: the fused MoE layer, latent attention (MLA), the
expert-parallel all-to-all, Gated DeltaNet linear attention (docs/method.md §18).

- **Fused MoE** (``moe``: router top-k dispatch, grouped expert GEMMs up / gate / down on the local experts,
  combine) over ``tokens`` tokens entering the layer on the MoE group (every token once, the table's
  ``num_tokens``), ``hidden`` features, ``inter`` features per expert (before the ``moe_tp`` split), ``topk`` of
  ``experts`` experts per token, the experts split ``moe_ep`` ways and each expert's features ``moe_tp`` ways.
  One GPU runs ``tokens x topk / moe_ep`` token-expert pairs on average through GEMMs of ``inter / moe_tp``
  features: ``2 x pairs x hidden x inter / moe_tp x projections`` FLOPs; it reads the weights of the local
  experts some token picks (expected ``E_local (1 - (1 - topk / E)^tokens)`` of its ``E_local``) and each pair's
  activation in and out.
- **MLA prefill** (``mla_prefill``): attention over keys and values decompressed from the latent (per head
  ``qk_nope + qk_rope`` query/key and ``v`` value features), causal: ``2 x B x H x pairs x (qk + v)`` FLOPs.
  **MLA decode** (``mla_decode``): the absorbed form engines run (FlashMLA, TRT-LLM): queries projected into the
  latent, multi-query attention over the cached latent (``kv_lora + rope`` per token, one copy shared by all
  heads) with ``kv_lora`` value features: ``2 x B x H x pairs x (2 kv_lora + rope)`` FLOPs, reading the cache once.
- **All-to-all** (``a2a_dispatch`` / ``a2a_combine``, DeepEP): each of ``tokens`` tokens on a GPU goes to (comes
  back from) the GPUs of its ``topk`` experts: ``tokens x min(topk, ep) x (ep - 1) / ep x hidden`` elements cross
  the links each way.
- **Gated DeltaNet** (``gdn_prefill``: the chunked form, chunks of :data:`GDN_CHUNK` tokens; ``gdn_decode``: one
  recurrent step): each value head keeps a ``dk x dv`` state; a step reads and writes it (``~8 dk dv`` FLOPs per
  token and head), a chunk adds ``4 C (dk + dv)`` per token and head of intra-chunk attention and reads / writes
  the state once.

``expert_format`` is the one rule for the format the routed experts' weights run in (its bytes per element in
:data:`WEIGHT_BYTES`): the workload's dtype, except fp8 over a checkpoint of 128 x 128 block-scaled fp8
(``fp8_block``, as DeepSeek ships) and the mxfp4 / int4 experts of gpt-oss and Kimi-K2.5, which stay in their
format unless the workload is fp4 (NVFP4 re-quantised, as the public fp4 serving runs do).
"""

from __future__ import annotations

import numpy as np

from tilecast.tiles.attention import attention_pairs
from tilecast.tiles.dtypes import DTYPE_BYTES

#: bytes per element of the weight formats experts run in: the dtypes, plus fp8 with one fp32 scale per 128 x 128
#: block, mxfp4 (e2m1 + one e8m0 scale per 32) and int4 with one bf16 scale per group of 32
WEIGHT_BYTES: dict[str, float] = {**DTYPE_BYTES, "fp8_block": 1.0 + 4.0 / (128 * 128), "mxfp4": 0.5 + 1.0 / 32,
                                  "int4": 0.5 + 2.0 / 32}
#: checkpoint quantisations that fix the experts' format (:data:`tilecast.specs.architecture.QUANTIZATIONS`)
_EXPERT_FORMATS = {"mxfp4": "mxfp4", "int4": "int4"}
#: tokens per chunk of Gated DeltaNet's chunked (prefill) kernel (flash-linear-attention's default)
GDN_CHUNK = 64
#: the token-to-expert distribution a forecast assumes (a key of the moe kernel table's ``distribution``):
#: trained routers are not balanced, and the busiest expert sets a grouped GEMM's time; the mildest measured
#: skew is assumed, chosen before any serving figure was looked at (the MoE kernel rows measure all three)
DEFAULT_DISTRIBUTION = "power_law_1.01"


def expert_format(workload_dtype: str, quantization: str) -> str:
    """The format routed-expert weights run in for a workload dtype over a checkpoint's quantisation."""
    if quantization in _EXPERT_FORMATS and workload_dtype != "fp4":
        return _EXPERT_FORMATS[quantization]
    if workload_dtype == "fp8" and quantization == "fp8_block":
        return "fp8_block"
    if workload_dtype in ("fp8", "fp4"):
        return workload_dtype
    return "bf16" if workload_dtype in ("amp_bf16", "fp32", "tf32") else workload_dtype


def experts_hit(tokens, topk, experts, local_experts) -> np.ndarray:
    """Expected local experts some token picks (each token picks ``topk`` of ``experts`` at random)."""
    tokens, topk, experts = (np.asarray(x, dtype=float) for x in (tokens, topk, experts))
    miss = np.power(np.clip(1.0 - topk / experts, 0.0, 1.0), tokens)
    return np.asarray(local_experts, dtype=float) * (1.0 - miss)


def moe_flops_bytes(tokens, hidden, inter, topk, experts, moe_tp, moe_ep, gated, weight_bytes, act_bytes
                    ) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of one GPU's share of a fused MoE layer (module docstring); arrays or scalars."""
    tokens, hidden, inter, topk, experts, moe_tp, moe_ep = (np.asarray(x, dtype=float) for x in (
        tokens, hidden, inter, topk, experts, moe_tp, moe_ep))
    projections = np.where(np.asarray(gated, dtype=bool), 3.0, 2.0)
    pairs = tokens * topk / moe_ep
    flops = 2.0 * pairs * hidden * (inter / moe_tp) * projections
    weights = experts_hit(tokens, topk, experts, experts / moe_ep) * projections * hidden * (inter / moe_tp)
    nbytes = weights * np.asarray(weight_bytes, dtype=float) + 2.0 * pairs * hidden * np.asarray(act_bytes, float)
    return flops, nbytes


def mla_flops_bytes(b, m, n, h, kv_lora, rope, nope, v, decode, act_bytes, kv_bytes
                    ) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of MLA attention on one GPU (``h`` local heads): prefill over decompressed keys and values,
    decode absorbed over the latent cache (module docstring)."""
    b, m, n, h, kv_lora, rope, nope, v = (np.asarray(x, dtype=float) for x in (b, m, n, h, kv_lora, rope, nope, v))
    decode = np.asarray(decode, dtype=bool)
    pairs = attention_pairs(m, n)
    act, kv = np.asarray(act_bytes, dtype=float), np.asarray(kv_bytes, dtype=float)
    qk = nope + rope
    prefill_flops = 2.0 * b * h * pairs * (qk + v)
    prefill_bytes = b * h * (m * (qk + v) * act + n * (qk + v) * kv)
    latent = kv_lora + rope
    decode_flops = 2.0 * b * h * pairs * (latent + kv_lora)
    decode_bytes = b * (m * h * (latent + kv_lora) * act + n * latent * kv)
    return np.where(decode, decode_flops, prefill_flops), np.where(decode, decode_bytes, prefill_bytes)


def a2a_elements(tokens, hidden, topk, ep) -> np.ndarray:
    """Elements one GPU sends (dispatch) or receives (combine) in an expert-parallel all-to-all."""
    tokens, hidden, topk, ep = (np.asarray(x, dtype=float) for x in (tokens, hidden, topk, ep))
    return tokens * np.minimum(topk, ep) * (ep - 1.0) / ep * hidden


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
