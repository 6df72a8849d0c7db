"""Work of a fused mixture-of-experts layer on one GPU (docs/method.md §18), vectorised.

A row (family ``moe``) is one fused MoE layer as AIConfigurator's collector measures it: ``tokens`` tokens
enter the layer of the whole expert-parallel group (the table's ``num_tokens``: every attention-DP rank's
tokens), each picks ``topk`` of ``experts`` experts; this GPU holds ``experts / moe_ep`` of them, each split
``moe_tp`` ways along its intermediate dimension (``inter`` is the model's per-expert size, before the
split), and runs the grouped expert GEMMs (gate + up, activation, down; ``gated = False``: up and down only)
on the (token, expert) pairs routed to its experts.

How many pairs land on this GPU and how many of its experts they touch depends on the routing
``distribution`` the collector drew (:func:`routing_stats`):

- ``balanced``: every rank gets ``tokens x topk / moe_ep`` pairs spread evenly over its experts (the
  measured times halve with each doubling of ``moe_ep`` until one pair per rank);
- ``power_law_<alpha>``: per-expert loads drawn from a power law on ``[xmin, xmax]`` (``[1, 0.8 tokens]`` when
  ``tokens x topk > experts``, else ``[0.01, 2]``), scaled to ``tokens x topk`` pairs and rounded, an expert
  receiving a token at most once, and the busiest rank measured: its pairs set the time. The AIConfigurator
  pip packages do not ship the collector; this is its ``power_law_logits_v3`` as published upstream,
  reconstructed, and its implications are checked against the data (``benchmarks/moe.md``). The statistics are
  expectations over :data:`ROUTING_SAMPLES` seeded draws (one draw per measured row in the data).

FLOPs are ``2 x pairs x hidden x inter / moe_tp`` per expert GEMM matrix (3 gated, 2 not); bytes are the
weights of the experts touched (a memory-bound decode step loads only those) at the format's weight bytes
plus each pair's activation read at the format's activation bytes and its bf16 output.
"""

from __future__ import annotations

import functools

import numpy as np

from tilecast.errors import UserError

#: Monte Carlo draws per routing shape (seeded: the statistics are deterministic)
ROUTING_SAMPLES = 64
ROUTING_SEED = 0
#: routing distributions of the data; ``power_law_<alpha>`` with any alpha > 0, alpha != 1, is accepted
DISTRIBUTIONS = ("balanced", "power_law_1.01", "power_law_1.2")
#: bytes per element of the layer's output (bf16) and of its intermediate activations
OUT_BYTES = 2.0


class RoutingError(UserError):
    """A routing distribution name that is neither ``balanced`` nor ``power_law_<alpha>``, or a layout whose EP
    does not divide the experts."""


def power_law_alpha(distribution: str) -> float | None:
    """The exponent of ``power_law_<alpha>`` (None for ``balanced``); unknown names raise :class:`RoutingError`."""
    name = str(distribution).strip()
    if name == "balanced":
        return None
    if name.startswith("power_law_"):
        try:
            alpha = float(name[len("power_law_"):])
        except ValueError:
            alpha = float("nan")
        if np.isfinite(alpha) and alpha > 0 and alpha != 1.0:
            return alpha
    raise RoutingError(f"unknown routing distribution {distribution!r}; known: balanced, power_law_<alpha> "
                       f"(alpha > 0, not 1; the data has {', '.join(DISTRIBUTIONS)})")


def _fix_sum(loads: np.ndarray, share: np.ndarray, target: int) -> np.ndarray:
    """Make each draw's rounded loads sum to ``target``: add one to the experts of the largest unrounded
    ``share`` first, or take one from the smallest non-empty ones (the collector's correction; ordering by the
    unrounded share breaks the ties of an all-zero rounding at random rather than by expert index)."""
    delta = target - loads.sum(axis=1)
    rows = np.arange(len(loads))
    add = np.clip(delta, 0, None)
    if add.any():  # the ``add`` experts of the largest share (continuous draws: no ties)
        top = -np.sort(-share, axis=1)[rows, np.maximum(add - 1, 0)]
        loads = loads + ((share >= top[:, None]) & (add[:, None] > 0))
    take = np.clip(-delta, 0, None)
    if take.any():  # the ``take`` non-empty experts of the smallest share
        key = np.where(loads > 0, share, np.inf)
        low = np.sort(key, axis=1)[rows, np.maximum(take - 1, 0)]
        loads = loads - ((key <= low[:, None]) & (take[:, None] > 0))
    return loads


def _cap(loads: np.ndarray, tokens: int) -> np.ndarray:
    """An expert receives a token at most once: move the excess over ``tokens`` to the experts below the cap,
    least loaded first."""
    excess = np.clip(loads - tokens, 0, None).sum(axis=1)
    if not excess.any():
        return loads
    loads = np.minimum(loads, tokens)
    for s in np.flatnonzero(excess):
        left = int(excess[s])
        for e in np.argsort(loads[s], kind="stable"):
            room = tokens - loads[s, e]
            step = min(room, left)
            loads[s, e] += step
            left -= step
            if left == 0:
                break
    return loads


def power_law_loads(tokens: int, experts: int, topk: int, alpha: float, samples: int = ROUTING_SAMPLES,
                    seed: int = ROUTING_SEED) -> np.ndarray:
    """Per-expert (token, expert) pair counts of ``samples`` power-law draws, shape ``(samples, experts)``;
    each row sums to ``tokens x topk``."""
    rng = np.random.default_rng(seed)
    xmin, xmax = (1.0, 0.8 * tokens) if tokens * topk > experts else (0.01, 2.0)
    xmax = max(xmax, xmin * (1 + 1e-9))
    a = 1.0 - alpha
    u = rng.random((samples, experts))
    draw = ((xmax ** a - xmin ** a) * u + xmin ** a) ** (1.0 / a)
    target = int(tokens * topk)
    share = draw / draw.sum(axis=1, keepdims=True) * target
    return _cap(_fix_sum(np.rint(share).astype(np.int64), share, target), int(tokens))


@functools.lru_cache(maxsize=65536)
def _routing(tokens: int, experts: int, topk: int, ep: int, alpha: float | None) -> tuple[float, float, float]:
    local = experts // ep
    if alpha is None:
        pairs = tokens * topk / ep
        return pairs, float(min(local, np.ceil(pairs))), float(np.ceil(tokens * topk / experts))
    loads = power_law_loads(tokens, experts, topk, alpha).reshape(-1, ep, local)
    busiest = np.argmax(loads.sum(axis=2), axis=1)  # the collector measures the busiest rank
    mine = loads[np.arange(len(loads)), busiest]
    return float(mine.sum(axis=1).mean()), float((mine > 0).sum(axis=1).mean()), float(mine.max(axis=1).mean())


def routing_stats(tokens, experts, topk, ep, distribution) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Expected (token, expert) pairs on the measured GPU, its experts touched, and the pairs of its busiest
    expert, per row (vectorised over arrays; each distinct shape is drawn once per process).

    ``ep`` must divide ``experts`` (:class:`RoutingError` otherwise)."""
    cols = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (tokens, experts, topk, ep)))
    dist = np.broadcast_to(np.asarray(distribution, dtype=object), cols[0].shape)
    t, e, k, p = (c.ravel() for c in cols)
    bad = (e % p != 0) | (p < 1) | (e < 1) | (k < 1) | (t < 1) | (k > e)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise RoutingError(f"moe_ep={p[i]:g} must divide experts={e[i]:g} (and 1 <= topk={k[i]:g} <= experts, "
                           f"tokens={t[i]:g} >= 1)")
    alphas = {d: power_law_alpha(d) for d in pd_unique(dist.ravel())}
    out = np.empty((3, t.size))
    keys = np.stack([t, e, k, p])
    for d, alpha in alphas.items():
        sel = dist.ravel() == d
        uniq, inverse = np.unique(keys[:, sel], axis=1, return_inverse=True)
        vals = np.array([_routing(int(a), int(b), int(c), int(q), alpha) for a, b, c, q in uniq.T]).T
        out[:, sel] = vals[:, inverse.ravel()]
    shape = cols[0].shape
    return out[0].reshape(shape), out[1].reshape(shape), out[2].reshape(shape)


def pd_unique(values: np.ndarray) -> list:
    """Distinct values in first-seen order (object arrays, no sorting)."""
    return list(dict.fromkeys(values.tolist()))


def moe_flops_bytes(tokens, hidden, inter, topk, experts, moe_tp, moe_ep, distribution, gated, weight_bytes,
                    act_bytes) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes of the measured GPU's share of a fused MoE layer (see the module docstring)."""
    pairs, active, _ = routing_stats(tokens, experts, topk, moe_ep, distribution)
    mats = np.where(np.asarray(gated, dtype=bool), 3.0, 2.0)
    per_expert = mats * np.asarray(hidden, dtype=float) * np.asarray(inter, dtype=float) / np.asarray(moe_tp, float)
    flops = 2.0 * pairs * per_expert
    nbytes = active * per_expert * weight_bytes + pairs * np.asarray(hidden, dtype=float) * (act_bytes + OUT_BYTES)
    return flops, nbytes


def moe_row_errors(experts, topk, ep, distribution) -> np.ndarray:
    """Per row, why its routing cannot be costed (empty where it can): an unknown distribution, ``moe_ep`` not
    dividing ``experts``, or ``topk`` above ``experts``."""
    e, k, p = (np.asarray(v, dtype=float) for v in (experts, topk, ep))
    out = np.full(e.shape, "", dtype=object)
    dist = np.broadcast_to(np.asarray(distribution, dtype=object), e.shape)
    for d in pd_unique(dist.ravel()):
        try:
            power_law_alpha(d)
        except RoutingError as exc:
            out[dist == d] = str(exc)
    with np.errstate(invalid="ignore", divide="ignore"):
        uneven = (out == "") & ~(np.mod(e, np.where(p > 0, p, np.nan)) == 0)
    out[uneven] = [f"moe_ep={b:g} does not divide experts={a:g}" for a, b in zip(e[uneven], p[uneven], strict=True)]
    over = (out == "") & (k > e)
    out[over] = [f"topk={b:g} is above experts={a:g}" for a, b in zip(e[over], k[over], strict=True)]
    return out
