"""Bytes an expert-parallel all-to-all moves per GPU (DeepEP dispatch / combine; docs/method.md §18).

Rows: ``OPName`` ``a2a_dispatch`` (tokens to the ranks holding their experts) or ``a2a_combine`` (expert
outputs back, summed per token), ``tokens`` on this GPU, ``hidden``, ``topk``, ``experts``, ``ep`` (GPUs of the
EP group), ``nodes`` (the group spans them evenly), ``a2a_mode`` (``ll``: low-latency, decode; ``normal``:
prefill), ``dtype`` (dispatch defaults to fp8 with one fp32 scale per 128 elements, combine to bf16: what
DeepEP's kernels send, :data:`A2A_DEFAULT_DTYPE`) and, for normal mode, ``sms`` (SMs the kernel may use,
default :data:`DEFAULT_SMS`).

- ``ll`` sends one message per (token, expert) pair: ``tokens x topk`` hidden vectors;
- ``normal`` sends a token once per destination rank holding any of its experts: with experts chosen
  uniformly, ``ep x (1 - C(experts - experts/ep, topk) / C(experts, topk))`` ranks per token.

The share ``(ep - 1) / ep`` leaves the GPU; of it, the ranks on other nodes (``ep - ep / nodes``) go over the
network, the rest over NVLink.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from tilecast.errors import UserError
from tilecast.tiles.dtypes import MOE_DTYPES

A2A_OPS = frozenset({"a2a_dispatch", "a2a_combine"})
A2A_MODES = ("ll", "normal")
#: the dtype each direction sends when a row names none (DeepEP: fp8 dispatch with block scales, bf16 combine)
A2A_DEFAULT_DTYPE = {"a2a_dispatch": "fp8_block", "a2a_combine": "bf16"}
#: SMs a normal-mode kernel uses when a row does not say (DeepEP's ``Buffer.num_sms`` default)
DEFAULT_SMS = 20


class A2AError(UserError):
    """An all-to-all row that cannot be costed (unknown mode, EP not dividing the experts or the nodes)."""


def a2a_element_bytes(ops, dtypes) -> np.ndarray:
    """Bytes per sent element of each row: the activation bytes of its format (block scales included)."""
    ops = np.asarray(ops, dtype=object)
    raw = np.asarray(dtypes, dtype=object)
    names = np.where(pd_isna(raw), [A2A_DEFAULT_DTYPE.get(o, "bf16") for o in ops], raw)
    return np.array([MOE_DTYPES[str(d)].act_bytes if str(d) in MOE_DTYPES else _plain_bytes(str(d))
                     for d in names], dtype=float)


def _plain_bytes(name: str) -> float:
    from tilecast.tiles.dtypes import DTYPE_BYTES, normalise_dtype

    return float(DTYPE_BYTES[normalise_dtype(name)])


def pd_isna(values: np.ndarray) -> np.ndarray:
    """Missing entries of an object array (None, NaN, empty string)."""
    return np.array([v is None or v == "" or (isinstance(v, float) and np.isnan(v)) for v in values], dtype=bool)


def ranks_per_token(topk, experts, ep) -> np.ndarray:
    """Expected distinct EP ranks a token's ``topk`` experts (uniform, without replacement) live on."""
    k, e, p = (np.asarray(x, dtype=float) for x in (topk, experts, ep))
    local = e / p
    # C(e - local, k) / C(e, k) via log-gamma (0 when k > e - local)
    miss = np.where(k <= e - local,
                    np.exp(gammaln(e - local + 1) - gammaln(e - local - k + 1) - gammaln(e + 1) + gammaln(e - k + 1)),
                    0.0)
    return p * (1.0 - miss)


def a2a_bytes(ops, tokens, hidden, topk, experts, ep, nodes, modes, dtypes) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each GPU sends over NVLink and over the network for each row (see the module docstring)."""
    t, h, k, e, p, n = (np.asarray(x, dtype=float) for x in (tokens, hidden, topk, experts, ep, nodes))
    modes = np.asarray(modes, dtype=object).astype(str)
    unknown = ~np.isin(modes, A2A_MODES)
    if unknown.any():
        raise A2AError(f"unknown a2a_mode {modes[unknown][0]!r}; known: {', '.join(A2A_MODES)}")
    bad = (e % p != 0) | (p % n != 0) | (p < 1) | (n < 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise A2AError(f"ep={p[i]:g} must divide experts={e[i]:g} and be a multiple of nodes={n[i]:g}")
    copies = np.where(modes == "ll", k, ranks_per_token(k, e, p))
    sent = t * copies * h * a2a_element_bytes(ops, dtypes)
    remote = (p - 1.0) / p
    network = np.where(n > 1, (p - p / n) / p, 0.0)
    return sent * (remote - network), sent * network


def a2a_row_errors(tokens, hidden, topk, experts, ep, nodes, modes) -> np.ndarray:
    """Per row, why it cannot be costed (empty where it can): a dim not positive, an unknown mode, ``ep`` not
    dividing ``experts`` or not a multiple of ``nodes``, ``topk`` above ``experts``."""
    dims = {n: np.asarray(v, dtype=float) for n, v in
            (("tokens", tokens), ("hidden", hidden), ("topk", topk), ("experts", experts), ("ep", ep),
             ("nodes", nodes))}
    modes = np.asarray(modes, dtype=object).astype(str)
    out = np.full(modes.shape, "", dtype=object)
    for name, v in dims.items():
        bad = (out == "") & ~(np.isfinite(v) & (v > 0))
        out[bad] = [f"{name}={x!r} is not a positive number" for x in v[bad]]
    bad = (out == "") & ~np.isin(modes, A2A_MODES)
    out[bad] = [f"unknown a2a_mode {m!r}; known: {', '.join(A2A_MODES)}" for m in modes[bad]]
    e, k, p, n = dims["experts"], dims["topk"], dims["ep"], dims["nodes"]
    with np.errstate(invalid="ignore", divide="ignore"):
        bad = (out == "") & ((np.mod(e, p) != 0) | (np.mod(p, n) != 0))
    out[bad] = [f"ep={b:g} must divide experts={a:g} and be a multiple of nodes={c:g}"
                for a, b, c in zip(e[bad], p[bad], n[bad], strict=True)]
    bad = (out == "") & (k > e)
    out[bad] = [f"topk={b:g} is above experts={a:g}" for a, b in zip(e[bad], k[bad], strict=True)]
    return out
