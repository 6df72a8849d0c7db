"""Work of fused attention (FlashAttention-style; docs/method.md §15), vectorised.

Rows: ``B`` sequences, ``M`` new (query) tokens each over ``N`` key/value tokens, ``K`` head dim,
``H`` query heads, ``Hkv`` KV heads (GQA; ``Hkv = H`` is plain multi-head attention).

- FLOPs: two GEMMs (``QK^T`` and ``PV``) of ``2 K`` FLOPs per (query, key) pair and head. Causal
  prefill (``M`` new tokens at the end of ``N``) skips the masked upper triangle: query ``i`` of
  ``M`` sees ``N - M + 1 + i`` keys, ``M (N - (M - 1) / 2)`` pairs in all (``~ N^2 / 2`` for a
  prompt, ``N`` for one decode token).
- Bytes: Q and O once at the compute dtype, K and V once at the KV-cache dtype; the score matrix
  is never written (that is what fusion buys).
- A sliding window of ``W`` tokens (gpt-oss's local layers; ``window`` 0: none) caps every query's keys at
  ``W``: query ``i`` sees ``min(W, N - M + 1 + i)`` keys, and K and V are read over at most ``M + W`` tokens.
"""

from __future__ import annotations

import numpy as np


def attention_pairs(m: np.ndarray, n: np.ndarray, window: np.ndarray | int = 0) -> np.ndarray:
    """(query, key) pairs a causal attention of ``m`` new tokens over ``n`` tokens computes (each query over at
    most ``window`` keys where ``window`` > 0)."""
    n = np.asarray(n, dtype=float)
    m = np.minimum(np.asarray(m, dtype=float), n)
    full = m * (n - (m - 1.0) / 2.0)
    w = np.asarray(window, dtype=float)
    if not np.any(w > 0):
        return full
    first = n - m  # position of the first new token; query at position p sees min(W, p + 1) keys
    under = np.clip(np.minimum(n, w) - first, 0.0, m)  # queries whose whole causal prefix fits in the window
    capped = under * (first + 1.0) + under * (under - 1.0) / 2.0 + (m - under) * w
    return np.where(w > 0, np.minimum(capped, full), full)


def attention_flops(b, m, n, k, h, window=0) -> np.ndarray:
    """FLOPs of causal fused attention: ``4 B H K pairs``."""
    return 4.0 * np.asarray(b, dtype=float) * h * k * attention_pairs(m, n, window)


def attention_bytes(b, m, n, k, h, hkv, bytes_per_element, kv_bytes_per_element, window=0) -> np.ndarray:
    """Bytes moved: ``Q, O`` (``B M H K`` each) at the compute dtype, ``K, V`` (``B N Hkv K`` each) at the KV's
    (a window reads at most ``M + W`` of the ``N`` cached tokens)."""
    b, m, n, w = (np.asarray(x, dtype=float) for x in (b, m, n, window))
    n = np.where(w > 0, np.minimum(n, m + w), n)
    return 2.0 * b * k * (m * h * bytes_per_element + n * hkv * kv_bytes_per_element)
