"""An iteration-level simulation of one serving-engine replica under the closed-loop benchmark client.

The client (vLLM's ``benchmark_serving`` / ``genai-perf`` at fixed concurrency, as the public serving rows were
measured) sends ``n_requests`` prompts of ``isl`` tokens asking for ``osl`` tokens each, keeping ``c`` in flight:
the first ``c`` arrive together at time 0 (the first wave), and each finished request is replaced at once by the
next prompt until all were sent. It reports the mean over all requests of TTFT (arrival to first token) and TPOT
(``(latency - TTFT) / (osl - 1)``). Output lengths spread a little about ``osl`` (:data:`OSL_SPREAD`), as sampled
runs do.

Each iteration the engine's scheduler (:class:`~tilecast.serving.policy.EnginePolicy`) forms a batch:

- the running requests' decodes first (one token each, at most ``max_num_seqs`` requests);
- then prefill chunks in arrival order until the step's token budget (``max_num_batched_tokens``) is spent: a
  partially prefilled request continues first; the last request taken may be chunked (``chunked_prefill``), with at
  most ``max_partial_prefills`` requests left part-prefilled; without chunking a prompt runs whole, alone if it is
  longer than the budget; engines that do not mix (``mixed_batches`` false: SGLang) run a step of prefills only
  whenever a prompt waits, and decode steps otherwise;
- a request is admitted only if the KV cache (``kv_tokens``) holds its prompt; when the running
  requests' caches outgrow it, the latest admitted is preempted and recomputed later (vLLM's policy).

The step takes :meth:`~tilecast.serving.step.StepCost.step_ms`; a prefill completing in a step yields the request's
first token at the step's end. A request reaches the engine ``request_overhead_ms`` after the client sends it (HTTP,
tokenisation, streaming), so its TTFT and latency carry that too. :func:`simulate` returns the per-request records
and the benchmark's figures; :mod:`tilecast.serving.steady` is the closed form the nightly uses, tested against
this.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilecast.serving.step import StepCost

#: the spread of the requests' output lengths (a share of osl either way): what breaks the first wave's lockstep in
#: measured runs (sampling stops, client jitter), so the replacements arrive spread out as the steady state assumes
OSL_SPREAD = 0.1
#: prompts the benchmark client sends per unit of concurrency (``num_prompts = 10 x concurrency``, the serving
#: benchmarks' convention the public rows follow)
PROMPTS_PER_CONCURRENCY = 10


@dataclass(frozen=True)
class SimResult:
    """The benchmark's figures (ms) and per-request records of one simulated run."""

    ttft_ms: float
    tpot_ms: float
    request_latency_ms: float
    throughput_rps: float  # finished requests per second over the run
    steps: int
    preemptions: int
    arrival_ms: np.ndarray  # when the client sent each request
    first_token_ms: np.ndarray
    finish_ms: np.ndarray


def simulate(cost: StepCost, isl: int, osl: int, concurrency: int, n_requests: int | None = None,
             kv_tokens: float = np.inf, max_steps: int = 5_000_000, osl_spread: float = OSL_SPREAD,
             seed: int = 0) -> SimResult:
    """Run the benchmark of ``n_requests`` (default :data:`PROMPTS_PER_CONCURRENCY` x ``concurrency``) prompts at
    ``concurrency`` against one engine replica whose steps cost ``cost`` (module docstring); request ``i`` asks for
    ``osl x U(1 - osl_spread, 1 + osl_spread)`` tokens (mean ``osl``; ``seed`` seeds the draw)."""
    if concurrency < 1 or isl < 1 or osl < 1:
        raise ValueError(f"concurrency, isl and osl must be positive, got {concurrency}, {isl}, {osl}")
    pol = cost.policy
    n = int(n_requests or PROMPTS_PER_CONCURRENCY * concurrency)
    arrival = np.full(n, np.nan)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    prefilled = np.zeros(n, dtype=np.int64)  # prompt tokens in the cache
    generated = np.zeros(n, dtype=np.int64)  # output tokens produced (the first comes with the prefill)
    want = np.maximum(1, np.rint(osl * np.random.default_rng(seed).uniform(1 - osl_spread, 1 + osl_spread, n))
                      ).astype(np.int64) if osl_spread > 0 else np.full(n, osl, dtype=np.int64)
    over = pol.request_overhead_ms  # a request reaches the engine this long after the client sends it
    arrival[: min(concurrency, n)] = over  # engine-side arrival times
    sent = min(concurrency, n)
    pending: list[int] = list(range(sent))  # sent, not yet at the engine
    waiting: list[int] = []  # arrived, not admitted (FIFO; a preempted request goes first)
    running: list[int] = []  # admitted, in admission order
    t, steps, preempted, done = 0.0, 0, 0, 0
    budget = pol.max_num_batched_tokens
    while done < n and steps < max_steps:
        if pending and not running and not waiting:  # idle: the next request's arrival
            t = max(t, min(arrival[r] for r in pending))
        waiting += [r for r in pending if arrival[r] <= t]
        pending = [r for r in pending if arrival[r] > t]
        # KV cache: preempt the latest admitted while the running caches (one more token each) overflow
        while running and sum(int(prefilled[r] + generated[r]) + 1 for r in running) > kv_tokens and len(running) > 1:
            r = running.pop()
            prefilled[r], generated[r] = 0, 0
            waiting.insert(0, r)
            preempted += 1
        decodes = [r for r in running if prefilled[r] == isl][: pol.max_num_seqs]
        partial = [r for r in running if prefilled[r] < isl]
        used = sum(int(prefilled[r] + generated[r]) for r in running)
        chunks: list[tuple[int, int]] = []  # (request, tokens)
        left = budget - (len(decodes) if pol.mixed_batches else 0)
        prefill_first = not pol.mixed_batches and (partial or waiting)
        if pol.mixed_batches or prefill_first:
            seqs = len(decodes) if pol.mixed_batches else 0
            for r in partial:
                take = min(isl - int(prefilled[r]), max(left, 0)) if pol.chunked_prefill else isl - int(prefilled[r])
                if take > 0:
                    chunks.append((r, take))
                    left -= take
                    seqs += 1
            n_partial = sum(1 for r, k in chunks if prefilled[r] + k < isl)
            while waiting and seqs < pol.max_num_seqs:
                r = waiting[0]
                if used + isl > kv_tokens and running:
                    break
                if left <= 0:
                    break
                take = isl if not pol.chunked_prefill else min(isl, left)
                if not pol.chunked_prefill and isl > left and chunks:
                    break
                if take < isl and n_partial >= pol.max_partial_prefills:
                    break
                waiting.pop(0)
                running.append(r)
                used += isl
                chunks.append((r, take))
                left -= take
                seqs += 1
                n_partial += take < isl
            if not pol.mixed_batches:
                decodes = []
        d = len(decodes)
        if d == 0 and not chunks:  # nothing to run: wait for the next arrival
            if not pending:
                break
            t = min(arrival[r] for r in pending)
            continue
        kv = float(np.mean([isl + generated[r] for r in decodes])) if d else 0.0
        p_tokens = sum(k for _, k in chunks)
        p_attn = float(sum(cost.prefill_attn_ms(np.array(prefilled[r]), np.array(prefilled[r] + k))
                           for r, k in chunks)) if chunks else 0.0
        dt = float(cost.step_ms(np.array(d), np.array(kv), np.array(p_tokens), np.array(p_attn),
                                np.array(d + len(chunks))))
        t += dt
        steps += 1
        finished = []
        for r in decodes:
            generated[r] += 1
            if generated[r] >= want[r]:
                finished.append(r)
        for r, k in chunks:
            prefilled[r] += k
            if prefilled[r] == isl:
                generated[r] = 1
                if np.isnan(first[r]):
                    first[r] = t
                if generated[r] >= want[r]:
                    finished.append(r)
        for r in finished:
            finish[r] = t
            running.remove(r)
            done += 1
            if sent < n:  # the client replaces it at once
                arrival[sent] = t + over
                pending.append(sent)
                sent += 1
    sent_ms = arrival - over
    ttft = first - sent_ms
    latency = finish - sent_ms
    tpot = np.where(want > 1, (finish - first) / np.maximum(want - 1, 1), 0.0)
    return SimResult(float(np.nanmean(ttft)), float(np.nanmean(tpot)), float(np.nanmean(latency)),
                     float(done / (t / 1e3)) if t > 0 else 0.0, steps, preempted, sent_ms, first, finish)


__all__ = ["OSL_SPREAD", "PROMPTS_PER_CONCURRENCY", "SimResult", "simulate"]
