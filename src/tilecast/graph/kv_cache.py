"""What one request keeps on one GPU between steps: its KV cache (and a linear-attention layer's state).

Per layer, by attention kind (:attr:`~tilecast.specs.ModelSpec.layer_kinds`), for a request of ``tokens`` tokens
on one GPU of a :class:`~tilecast.specs.layout.Layout` (its attention tensor-parallel rank):

- GQA, full attention: ``2 x KV heads per GPU x head_dim`` values per token (KV heads replicated where fewer
  than the ``tp`` ranks);
- sliding window / chunked attention: the same, for at most ``window`` tokens (the window bounds the cache);
- MLA: ``kv_lora_rank + qk_rope_head_dim`` values per token, one latent shared by all heads and so the same on
  every ``tp`` rank (a fraction of GQA's: 576 against ``2 x 128 x 128`` for DeepSeek-V3's 128 heads); DeepSeek
  sparse attention adds the indexer's ``index_head_dim`` fp8 key per token (with one fp32 scale per 128);
- Gated DeltaNet: no per-token cache; a ``dk x dv`` state per value head in the state dtype plus the causal
  convolution's last ``conv_kernel - 1`` inputs, whatever the length.

Values are in the workload's compute dtype (bf16 for bf16 / fp8 / fp4 workloads: the KV cache is not quantised
here). A request lives on one attention data-parallel group, so an instance of ``dp`` groups holds
``concurrency / dp`` requests per GPU.
"""

from __future__ import annotations

import numpy as np

from tilecast.specs import ModelSpec
from tilecast.specs.layout import Layout
from tilecast.tiles.dtypes import DTYPE_BYTES, compute_dtype

#: bytes per element of DeepSeek sparse attention's indexer keys (fp8, one fp32 scale per 128 values)
INDEXER_KEY_BYTES = 1.0 + 4.0 / 128


def kv_bytes_per_request(spec: ModelSpec, dtype: str, layout: Layout, tokens) -> np.ndarray:
    """Bytes one request of ``tokens`` tokens (scalar or array) keeps on one GPU of ``layout``."""
    tokens = np.asarray(tokens, dtype=float)
    size = DTYPE_BYTES[compute_dtype(dtype)]
    total = np.zeros_like(tokens)
    kv_heads = max(1, spec.num_kv_heads // layout.tp)
    for kind in spec.layer_kinds:
        if spec.mla is not None:
            per_token = spec.mla.latent_dim * size
            if spec.sparse_attn is not None:
                per_token += spec.sparse_attn.index_head_dim * INDEXER_KEY_BYTES
            total += per_token * tokens
        elif kind == "linear":
            la = spec.linear_attn
            heads = la.value_heads // layout.tp
            state = heads * la.key_head_dim * la.value_head_dim * DTYPE_BYTES[la.state_dtype]
            total += state + la.conv_dim // layout.tp * (la.conv_kernel - 1) * size
        else:
            kept = np.minimum(tokens, spec.sliding_window) if kind in ("sliding", "chunked") else tokens
            total += 2.0 * kv_heads * spec.head_dim * size * kept
    return total


def kv_bytes_per_token(spec: ModelSpec, dtype: str, layout: Layout, tokens) -> np.ndarray:
    """KV bytes per token of an instance's requests of ``tokens`` tokens on one GPU: a request's bytes over its
    tokens and over the ``dp`` groups sharing the instance's requests, so ``per token x concurrency x tokens`` is
    one GPU's cache and ``free / (per token x tokens)`` the instance's concurrency that fits."""
    tokens = np.asarray(tokens, dtype=float)
    return kv_bytes_per_request(spec, dtype, layout, tokens) / np.maximum(tokens, 1.0) / layout.dp
