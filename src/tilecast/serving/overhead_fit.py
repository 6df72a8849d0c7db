"""The engines' host costs fitted on measured serving rows, and their leave-one-out validation.

What cannot be derived from kernels (:data:`FITTED`: the host's time per step, per running request and per decoder
layer of an eager step, and the per-request overhead of HTTP, tokenisation and streaming) is fitted per engine on the
public serving rows: minimise the mean of ``|log(forecast / measured)|`` over TTFT and TPOT (Nelder-Mead on the logs
of the terms, starting from the engine's yaml). An engine with fewer than :data:`MIN_ROWS` configurations in the
training rows takes the fit pooled over every engine's rows there; with fewer than that in all, every engine takes
the round :data:`PRIOR` figures. :func:`leave_one_out` refits without each GPU
(or model) and forecasts its rows: what ``benchmarks/serving.md`` reports as leave-one-GPU-out and
leave-one-model-out; the shipped yaml holds the fit on every public row.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.optimize import minimize

from tilecast.evaluation.serving import ServingPlan

#: the policy fields fitted on the rows
FITTED: tuple[str, ...] = ("host_step_ms", "host_per_seq_ms", "eager_per_layer_ms", "request_overhead_ms")
#: configurations the training rows need for a fit (pooled over engines; an engine on its own with as many)
MIN_ROWS = 30
#: the terms where the training rows are too few to fit: round figures of what the engines' hosts take (a CUDA-graph
#: step's scheduling and sampling, launches of an eager layer, a request's HTTP round and tokenisation), set before
#: any fit and not tuned
PRIOR = {"host_step_ms": 0.5, "host_per_seq_ms": 0.002, "eager_per_layer_ms": 0.05, "request_overhead_ms": 20.0}
_FLOOR = 1e-4  # ms: the terms' lower bound (their logs are optimised)
#: the terms' upper bounds (ms): what an engine's host could plausibly take, so a fit on few or odd rows stays an
#: engine's (a step's host work under 5 ms, 50 us per running request, 1 ms of launches per layer, 200 ms per request)
CEILING = {"host_step_ms": 5.0, "host_per_seq_ms": 0.05, "eager_per_layer_ms": 1.0, "request_overhead_ms": 200.0}


def _apply(values: dict[str, dict[str, float]]):
    def with_policy(policy):
        own = values.get(policy.engine, values.get("*"))
        return replace(policy, **own) if own else policy
    return with_policy


def _terms(x: np.ndarray) -> dict[str, float]:
    return {f: float(np.clip(np.exp(v), 0.0, CEILING[f])) for f, v in zip(FITTED, x, strict=True)}


def _loss(plan: ServingPlan, rows: np.ndarray, ttft_m: np.ndarray, tpot_m: np.ndarray, engine: str | None,
          x: np.ndarray) -> float:
    terms = _terms(x)
    ttft, tpot = plan.steady(_apply({engine or "*": terms} if engine else {"*": terms}))
    err = np.abs(np.log(ttft[rows] / ttft_m[rows])) + np.abs(np.log(tpot[rows] / tpot_m[rows]))
    return float(np.nanmean(err))


def measured(plan: ServingPlan, ttft: np.ndarray, tpot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per configuration of ``plan``, the mean measured TTFT and TPOT of its rows."""
    n = len(plan.cost)
    count = np.bincount(plan.groups, minlength=n).astype(float)
    return (np.bincount(plan.groups, weights=ttft, minlength=n) / count,
            np.bincount(plan.groups, weights=tpot, minlength=n) / count)


def fit_overheads(plan: ServingPlan, ttft_m: np.ndarray, tpot_m: np.ndarray, train: np.ndarray
                  ) -> dict[str, dict[str, float]]:
    """Engine -> fitted :data:`FITTED` terms (``*``: pooled over engines) on the configurations ``train`` (a mask)."""
    usable = train & np.array([c is not None for c in plan.cost]) & np.isfinite(ttft_m) & np.isfinite(tpot_m)
    start = {}
    for j in np.flatnonzero(usable):
        start.setdefault(plan.engine[j], plan.cost[j].policy)
    if usable.sum() < MIN_ROWS:
        return {"*": dict(PRIOR)}
    out = {}
    first = next(iter(start.values()))
    x0 = np.log(np.maximum([getattr(first, f) for f in FITTED], _FLOOR))
    pooled = minimize(lambda x: _loss(plan, usable, ttft_m, tpot_m, None, x), x0, method="Nelder-Mead",
                      options={"maxiter": 300, "xatol": 1e-3, "fatol": 1e-4})
    out["*"] = _terms(pooled.x)
    for engine in start:
        mine = usable & (plan.engine == engine)
        if mine.sum() < MIN_ROWS:
            continue
        res = minimize(lambda x, m=mine, e=engine: _loss(plan, m, ttft_m, tpot_m, e, x), pooled.x,
                       method="Nelder-Mead", options={"maxiter": 300, "xatol": 1e-3, "fatol": 1e-4})
        out[engine] = _terms(res.x)
    return out


def leave_one_out(plan: ServingPlan, ttft_m: np.ndarray, tpot_m: np.ndarray, key: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, dict[str, dict]]:
    """Per configuration, TTFT and TPOT forecast with the terms fitted without its ``key`` (GPU or model), and the
    fit of each fold."""
    ttft, tpot = np.full(len(key), np.nan), np.full(len(key), np.nan)
    fits = {}
    for value in np.unique(key[key != None]):  # noqa: E711 - object array
        held = key == value
        fits[str(value)] = fit = fit_overheads(plan, ttft_m, tpot_m, ~held)
        t1, t2 = plan.steady(_apply(fit))
        ttft[held], tpot[held] = t1[held], t2[held]
    return ttft, tpot, fits


__all__ = ["FITTED", "MIN_ROWS", "fit_overheads", "leave_one_out", "measured"]
