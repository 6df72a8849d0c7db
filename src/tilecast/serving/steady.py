"""The benchmark's TTFT and TPOT in closed form, vectorised over cells: what :mod:`tilecast.serving.simulate` runs
step by step, summed by the structure the closed loop settles into (tested against the simulation).

For one replica at concurrency ``c``, prompts of ``isl`` and outputs of ``osl`` tokens, a step budget ``B``
(``max_num_batched_tokens``; without chunked prefill at least one whole prompt):

- **first wave**: the ``c`` prompts arriving together are prefilled in arrival order, ``B`` tokens a step
  (``B' = B``); prompt ``i`` gets its first token at the end of step ``ceil((i + 1) isl / B')``, so the wave's mean
  TTFT is ``t_w x mean_i ceil((i + 1) isl / B')`` with ``t_w`` the time of a step of ``min(B', c isl)`` prefill tokens;
- **groups**: prompts finishing their prefill in one step decode in lockstep, finish together and are replaced
  together, so the loop keeps groups of ``g = clip(B' / isl, 1, c)`` requests; a group's prefill takes
  ``n_g = ceil(g isl / B'')`` steps, mixed with the other ``c - g`` requests' decodes where the engine mixes
  (``B'' = B - (c - g)``), alone otherwise;
- **cycle**: per request lifetime the engine runs every group's prefill once, ``S_pre = (c / g) n_g`` prefill steps,
  and the request itself needs ``S_own = n_g + osl - 1`` steps; when ``S_pre > S_own`` the prefills are the
  bottleneck and a replaced group waits ``S_pre - S_own`` prefill steps first;
- **TTFT** (steady) = wait + ``t_m x mean_j ceil((j + 1) isl / B'')`` over the group's ``g`` prompts; the
  benchmark's mean weighs the first wave by ``c / n_requests``;
- **TPOT** = the request's ``osl - 1`` decode steps, ``min(osl - 1, S_pre - n_g)`` of them carrying another group's
  prefill (time ``t_m``), the rest pure decodes (``t_d``, KV caches at ``isl + osl / 2`` on average).

Every request's TTFT carries the engine's ``request_overhead_ms``. The engine runs ``c = min(concurrency,
max_num_seqs, KV tokens / isl)`` requests (admitted on their prompt); beyond that the others wait for a slot,
``(concurrency - c) / c`` request times by Little's law. Throughput follows from Little's law: ``c / request
latency``.
"""

from __future__ import annotations

import numpy as np

from tilecast.serving.simulate import PROMPTS_PER_CONCURRENCY
from tilecast.serving.step import StepCost


def _mean_ceil(n: np.ndarray, per: np.ndarray) -> np.ndarray:
    """``mean_{i < n} ceil((i + 1) per)`` for arrays ``n`` (>= 1, integers) and ``per`` (> 0)."""
    n = np.maximum(np.asarray(n, dtype=np.int64), 1)
    top = int(n.max()) if n.size else 1
    i = np.arange(1, top + 1, dtype=float)
    vals = np.ceil(i[None, :] * per.reshape(-1, 1) - 1e-9)
    mask = i[None, :] <= n.reshape(-1, 1)
    return ((vals * mask).sum(axis=1) / n.reshape(-1)).reshape(np.shape(per))


def steady_state(cost: StepCost, isl: np.ndarray, osl: np.ndarray, concurrency: np.ndarray,
                 n_requests: np.ndarray | None = None, kv_tokens: np.ndarray | float = np.inf) -> dict[str, np.ndarray]:
    """``ttft_ms``, ``tpot_ms``, ``request_latency_ms``, ``throughput_rps``, ``decode_step_ms``, ``prefill_step_ms``,
    ``running`` per cell (arrays broadcast together) under ``cost``'s engine (module docstring); ``kv_tokens``: the
    KV cache's capacity in tokens."""
    pol = cost.policy
    isl, osl, c_glob = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(isl, osl, concurrency))
    n_req = PROMPTS_PER_CONCURRENCY * c_glob if n_requests is None else np.asarray(n_requests, dtype=float) + 0 * c_glob
    # attention data parallelism: each of the dp ranks schedules its own share of the requests (its own token
    # budget, max_num_seqs and KV cache); the ranks step together, so one rank's loop is the replica's
    dp = float(cost.dp)
    c_all, n_req = np.ceil(c_glob / dp), n_req / dp
    # the engine runs at most max_num_seqs requests and admits a request while the KV cache holds its prompt (it
    # preempts when the outputs outgrow it: rare while requests are at every stage); the rest wait for a slot
    c = np.clip(np.minimum(np.floor(np.asarray(kv_tokens, dtype=float) / isl), pol.max_num_seqs), 1.0, c_all)
    budget = float(pol.max_num_batched_tokens)
    b1 = budget if pol.chunked_prefill else np.maximum(budget, isl)
    kv_mid = isl + osl / 2.0

    # first wave: c prompts, B' tokens a step, no decodes yet in most of its steps
    p_w = np.minimum(b1, c * isl)
    per_step = p_w / isl  # prompts (or parts) per wave step
    attn_w = per_step * cost.prefill_attn_ms(np.zeros_like(isl), isl)
    t_w = cost.step_ms(0.0, kv_mid, p_w, attn_w, np.ceil(per_step))
    ttft_w = t_w * _mean_ceil(c, isl / b1)

    # steady state: one prompt per prefill step while the replacements arrive spread out (they do once output
    # lengths and arrival jitter break the first wave's lockstep), packed B'' tokens a step once they queue
    decodes = (c - 1.0) if pol.mixed_batches else np.zeros_like(c)
    b2 = np.maximum(b1 - decodes, 1.0) if pol.chunked_prefill else b1
    n_pre = np.ceil(isl / b2)  # steps of one prompt's prefill
    attn_1 = cost.prefill_attn_ms(np.zeros_like(isl), isl) / n_pre
    t_m = cost.step_ms(decodes, kv_mid, isl / n_pre, attn_1, decodes + 1.0)
    t_d = cost.step_ms(c, kv_mid, 0.0, 0.0, c)
    s_own = n_pre + osl - 1.0  # a request's own steps
    s_spread = c * n_pre  # prefill steps per request lifetime, one prompt each
    packed = s_spread > s_own
    g = np.where(packed, np.clip(np.floor(b2 / isl), 1.0, c), 1.0)  # prompts per prefill step
    s_pre = np.where(packed, c / g * np.ceil(g * isl / b2), s_spread)
    t_p = np.where(packed, cost.step_ms(decodes, kv_mid, np.minimum(g * isl, b2), g * attn_1 * n_pre
                                        / np.ceil(g * isl / b2), decodes + g), t_m)
    busy = np.minimum(s_pre / np.maximum(s_pre, s_own), 1.0)  # share of steps carrying a prefill
    wait_steps = np.maximum(s_pre - s_own, 0.0)
    # a replacement arrives within a step (half a decode step left) and, with probability busy, behind half a
    # prefill step; then its own prefill steps (a packed group: its share of the group's steps)
    ttft_ss = 0.5 * t_d + busy * 0.5 * t_p + wait_steps * t_p + np.where(
        packed, t_p * _mean_ceil(np.rint(g), isl / b2), n_pre * t_m)
    mixed = np.minimum(osl - 1.0, np.maximum(s_pre - n_pre, 0.0))
    decode_steps = np.maximum(osl - 1.0, 1.0)
    tpot = np.where(osl > 1, (mixed * t_p + (osl - 1.0 - mixed) * t_d) / decode_steps, 0.0)

    over = pol.request_overhead_ms
    first = np.minimum(c, n_req) / np.maximum(n_req, 1.0)
    ttft = first * ttft_w + (1.0 - first) * ttft_ss + over
    running_ms = ttft + (osl - 1.0) * tpot
    # Little's law over the c_all in the loop, c of them running: the others wait (c_all - c) / c request times
    queued = (c_all - c) / c * running_ms * (1.0 - first)
    ttft = ttft + queued
    latency = ttft + (osl - 1.0) * tpot
    return {"ttft_ms": ttft, "tpot_ms": tpot, "request_latency_ms": latency, "throughput_rps": c_glob / (latency / 1e3),
            "decode_step_ms": t_d, "prefill_step_ms": t_p, "running": c}


__all__ = ["steady_state"]
