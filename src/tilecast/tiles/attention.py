"""Work of fused attention (FlashAttention-style; docs/method.md §15), vectorised.

Rows: ``B`` sequences, ``M`` new (query) tokens each over ``N`` key/value tokens, ``K`` head dim,
``H`` query heads, ``Hkv`` KV heads (GQA; ``Hkv = H`` is plain multi-head attention).

- FLOPs: two GEMMs (``QK^T`` and ``PV``) of ``2 K`` FLOPs per (query, key) pair and head. Causal
  prefill (``M`` new tokens at the end of ``N``) skips the masked upper triangle: query ``i`` of
  ``M`` sees ``N - M + 1 + i`` keys, ``M (N - (M - 1) / 2)`` pairs in all (``~ N^2 / 2`` for a
  prompt, ``N`` for one decode token).
- Bytes: Q and O once at the compute dtype, K and V once at the KV-cache dtype; the score matrix
  is never written (that is what fusion buys).
"""

from __future__ import annotations

import numpy as np


def attention_pairs(m: np.ndarray, n: np.ndarray) -> np.ndarray:
    """(query, key) pairs a causal attention of ``m`` new tokens over ``n`` tokens computes."""
    m = np.minimum(np.asarray(m, dtype=float), np.asarray(n, dtype=float))
    return m * (np.asarray(n, dtype=float) - (m - 1.0) / 2.0)


def attention_flops(b, m, n, k, h) -> np.ndarray:
    """FLOPs of causal fused attention: ``4 B H K pairs``."""
    return 4.0 * np.asarray(b, dtype=float) * h * k * attention_pairs(m, n)


def attention_bytes(b, m, n, k, h, hkv, bytes_per_element, kv_bytes_per_element) -> np.ndarray:
    """Bytes moved: ``Q, O`` (``B M H K`` each) at the compute dtype, ``K, V`` (``B N Hkv K`` each) at the KV's."""
    b = np.asarray(b, dtype=float)
    return 2.0 * b * k * (m * h * bytes_per_element + n * hkv * kv_bytes_per_element)
