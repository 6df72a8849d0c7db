"""The Pareto front of many candidates, vectorised: the points no other point beats on both of two
quantities to minimise (a maximised quantity enters negated or inverted)."""

from __future__ import annotations

import numpy as np


def pareto_mask(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """True for the points (``a[i]``, ``b[i]``) no other point beats on both (lower is better on each; a point
    equal to another on both keeps the first of them). Non-finite points are never on the front.
    O(n log n): sort by ``a`` then ``b``; a point is on the front when its ``b`` is below every earlier one's."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out = np.zeros(len(a), dtype=bool)
    ok = np.flatnonzero(np.isfinite(a) & np.isfinite(b))
    if not len(ok):
        return out
    order = ok[np.lexsort((b[ok], a[ok]))]
    bs = b[order]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(bs)[:-1]])
    out[order[bs < best_before]] = True
    return out


__all__ = ["pareto_mask"]
