"""Work of DeepSeek-style multi-head latent attention (MLA; docs/method.md §18), vectorised.

Rows (families ``mla_prefill`` and ``mla_decode``): ``B`` sequences, ``M`` new tokens each over ``N`` KV
tokens, ``H`` query heads on this GPU, ``kv_dtype`` of the cache, and the latent dims (DeepSeek-V3's where a
row has none, :data:`MLA_DEFAULTS`): ``kv_lora_rank`` (the compressed latent, 512), ``qk_rope_head_dim`` (64),
``qk_nope_head_dim`` (128), ``v_head_dim`` (128).

- **Prefill** runs the expanded form, as the engines' context kernels do: per head, queries and keys of
  ``qk_nope + qk_rope`` dims and values of ``v_head_dim``, causal over the prompt
  (:func:`~tilecast.tiles.attention.attention_pairs` pairs); K and V are read once per head at the KV dtype.
- **Decode** runs the absorbed form (FlashMLA / TRT-LLM / FlashInfer MLA): each head's query lives in the
  latent space (``kv_lora_rank + qk_rope`` dims), every head reads the same compressed cache
  (``kv_lora_rank + qk_rope`` per token, multi-query style) and its values are the cache's first
  ``kv_lora_rank`` dims. FLOPs ``2 B H N (kv_lora_rank + qk_rope + kv_lora_rank)``; bytes the cache once at the
  KV dtype plus queries and outputs in bf16.
"""

from __future__ import annotations

import numpy as np

from tilecast.tiles.attention import attention_pairs

#: latent dims of a row that does not give them: DeepSeek-V3 / R1 (and Kimi-K2's) MLA
MLA_DEFAULTS: dict[str, int] = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                                "v_head_dim": 128}


def mla_prefill_flops_bytes(b, m, n, h, rank, rope, nope, v, q_bytes, kv_bytes) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of causal MLA prefill in the expanded form (``rank`` unused: kept for one signature)."""
    b, m, n, h = (np.asarray(x, dtype=float) for x in (b, m, n, h))
    qk = np.asarray(rope, dtype=float) + np.asarray(nope, dtype=float)
    v = np.asarray(v, dtype=float)
    flops = 2.0 * b * h * attention_pairs(m, n) * (qk + v)
    nbytes = b * h * (m * (qk + v) * q_bytes + n * (qk + v) * kv_bytes)
    return flops, nbytes


def mla_decode_flops_bytes(b, m, n, h, rank, rope, nope, v, q_bytes, kv_bytes) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of MLA decode in the absorbed form over the compressed cache (``nope``, ``v`` unused)."""
    b, m, n, h = (np.asarray(x, dtype=float) for x in (b, m, n, h))
    rank, rope = np.asarray(rank, dtype=float), np.asarray(rope, dtype=float)
    latent = rank + rope
    flops = 2.0 * b * h * attention_pairs(m, n) * (latent + rank)
    nbytes = b * (n * latent * kv_bytes + h * m * (latent + rank) * q_bytes)
    return flops, nbytes
