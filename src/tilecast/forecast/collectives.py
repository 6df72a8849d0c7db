"""Collective times learned from the shipped one-node NCCL tables: the training side's collective model.

NCCL picks, per message, the protocol it predicts fastest (LL for small messages, LL128, Simple for large ones),
each with its own start-up latency, per-ring-step latency and share of the link it reaches. The model mirrors
that (docs/method.md §19): a collective ``op`` of ``bytes`` over a ring of ``p`` ranks on links of ``bw`` GB/s
per direction takes

    t = hop x steps_op(p) + min over regimes k of (base_k + factor_op(p) x bytes / (bw x eff_k))

with ``steps_op(p)`` the ring's steps (``2 (p - 1)`` for an all-reduce, ``p - 1`` otherwise), ``hop`` the latency
of one step and ``factor_op(p)`` the ring's bytes on the wire per message byte (:data:`~tilecast.forecast.comm.
COLLECTIVE_FACTORS`). Per collective, ``hop`` and three ``(base_us, efficiency)`` regimes (:data:`NCCL_REGIMES`)
are fitted by :func:`fit_regimes` on the NVLink GPUs of ``load_aiconfigurator("nccl")`` (A100-SXM4, B200,
B300, GB200 at 2-8 ranks, 512 B - 512 MiB), least squares of the log time: the regimes are what the tables
show, not NCCL's own constants (a ring step costs about 1.1 us on every NVLink generation). Leave one GPU out
on those tables the MAPE per collective is 9-10% over all sizes (10-14% at >= 16 MiB;
``benchmarks/training_at_scale.md``), against 15-20% (17-29%) for a fixed 0.72 of the link and NCCL's latency
floor. The tables' two PCIe machines
(L40S, RTX PRO 6000) lose bandwidth with every GPU beyond two in ways their spec sheets do not show, so GPUs
without NVLink keep :class:`~tilecast.forecast.comm.CommModel`'s.

Across nodes the same regimes run over the node's NICs (:class:`~tilecast.forecast.netcomm.NetworkComm`): no
shipped table measures a rail-optimised cluster's collectives, so the NVLink fit's efficiencies and ring-step
latencies stand in for the network's (an assumption the benchmark states).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecast.forecast.comm import COLLECTIVE_FACTORS, GB_SI


@dataclass(frozen=True)
class Regime:
    """One protocol regime of a collective: start-up latency (us) and the share of the link it reaches."""

    base_us: float
    efficiency: float


@dataclass(frozen=True)
class CollectiveFit:
    """A collective's latency per ring step (us) and its protocol regimes."""

    hop_us: float
    regimes: tuple[Regime, ...]


#: collective -> its fit (:func:`fit_regimes` on the shipped NCCL tables; a test refits it)
NCCL_REGIMES: dict[str, CollectiveFit] = {
    "all_gather": CollectiveFit(1.14, (Regime(8.53, 0.212), Regime(23.33, 0.45), Regime(33.37, 0.622))),
    "all_reduce": CollectiveFit(1.14, (Regime(8.58, 0.258), Regime(10.87, 0.303), Regime(36.34, 0.674))),
    "reduce_scatter": CollectiveFit(1.07, (Regime(8.5, 0.223), Regime(27.41, 0.559), Regime(138.24, 0.705))),
    "alltoall": CollectiveFit(0.17, (Regime(10.05, 0.019), Regime(15.2, 0.402), Regime(43.38, 0.578))),
}
#: latency (us) of one ring step that crosses the network: :func:`fit_network_hop_us` on Vidur's two-node rows
NETWORK_HOP_US = 15.14
#: messages at most this large time a hop's latency in :func:`fit_network_hop_us`
HOP_MAX_BYTES = 65536
#: ring steps of a collective over ``p`` ranks (an all-reduce is a reduce-scatter then an all-gather)
RING_STEPS = {"all_reduce": lambda p: 2.0 * (p - 1.0)}
#: the collectives :func:`fit_regimes` fits by default (all the tables measure)
FITTED_OPS = ("all_gather", "all_reduce", "reduce_scatter", "alltoall")
#: initial (hop_us, (base_us, efficiency) x 3) of the fit; the best of these starts is kept (it is not convex)
_STARTS = ((1.0, 5.0, 0.2, 10.0, 0.5, 30.0, 0.7), (2.0, 8.0, 0.2, 20.0, 0.5, 50.0, 0.65),
           (0.5, 5.0, 0.2, 15.0, 0.3, 30.0, 0.65))


def ring_steps(op: str, p: np.ndarray) -> np.ndarray:
    """Steps of ``op``'s ring over ``p`` ranks."""
    return RING_STEPS.get(op, lambda q: q - 1.0)(np.asarray(p, dtype=float))


def regime_ms(op: str, nbytes: float | np.ndarray, ranks: float | np.ndarray, bandwidth_gbs: float | np.ndarray,
              regimes: Mapping[str, CollectiveFit] | None = None, hop_us: float | None = None) -> np.ndarray:
    """ms of collective ``op`` of ``nbytes`` (the message's full size) over a ring of ``ranks`` on links of
    ``bandwidth_gbs`` per direction (module docstring); ``hop_us``: a ring step's latency when it is not the
    fitted NVLink one (a ring across nodes); 0 over one rank."""
    if op not in COLLECTIVE_FACTORS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(COLLECTIVE_FACTORS)}")
    fit = (regimes or NCCL_REGIMES)[op]
    nbytes, p, bw = np.broadcast_arrays(np.asarray(nbytes, dtype=float), np.asarray(ranks, dtype=float),
                                        np.asarray(bandwidth_gbs, dtype=float))
    q = np.maximum(p, 1.0)
    wire_ms = COLLECTIVE_FACTORS[op](q) * nbytes * 1e3 / (bw * GB_SI)
    best = np.min([r.base_us * 1e-3 + wire_ms / r.efficiency for r in fit.regimes], axis=0)
    hop = fit.hop_us if hop_us is None else hop_us
    return np.where(p > 1, hop * 1e-3 * ring_steps(op, q) + best, 0.0)


def nccl_rows(nccl: pd.DataFrame, nvlink_only: bool = True) -> pd.DataFrame:
    """The NCCL tables' rows with ``bytes``, the GPU's catalog ``gpu`` key and ``link_gbs`` (NVLink GPUs only
    unless ``nvlink_only`` is false)."""
    from tilecast.specs import get_gpu
    from tilecast.tiles.dtypes import DTYPE_BYTES, normalise_dtype

    out = nccl.copy()
    out["bytes"] = out["message_size"].to_numpy(float) * out["nccl_dtype"].map(
        lambda d: DTYPE_BYTES[normalise_dtype(str(d))]).to_numpy(float)
    gpus = {d: get_gpu(str(d)) for d in out["device"].unique()}
    out["gpu"] = out["device"].map(lambda d: gpus[d].key)
    out["link_gbs"] = out["device"].map(lambda d: gpus[d].link_gbs).astype(float)
    if nvlink_only:
        out = out.loc[out["device"].map(lambda d: bool(gpus[d].nvlink_gbs))]
    return out.reset_index(drop=True)


def _unpack(theta: np.ndarray) -> CollectiveFit:
    return CollectiveFit(float(np.exp(theta[0])), tuple(
        Regime(float(np.exp(theta[1 + 2 * k])), float(1.0 / (1.0 + np.exp(-theta[2 + 2 * k]))))
        for k in range((len(theta) - 1) // 2)))


def fit_op(rows: pd.DataFrame, op: str) -> CollectiveFit:
    """``op``'s ring-step latency and three regimes fitted on ``rows`` (:func:`nccl_rows`' columns): least squares
    of the log time, the best of a few starts."""
    from scipy.optimize import least_squares

    part = rows.loc[rows["op_name"] == op]
    if part.empty:
        raise ValueError(f"no NCCL rows of {op!r} to fit")
    got = np.log(part["latency_ms"].to_numpy(float))
    args = (part["bytes"].to_numpy(float), part["num_gpus"].to_numpy(float), part["link_gbs"].to_numpy(float))

    def residual(theta: np.ndarray) -> np.ndarray:
        return np.log(regime_ms(op, *args, regimes={op: _unpack(theta)})) - got

    def start(values: tuple[float, ...]) -> np.ndarray:
        return np.array([np.log(v) if i == 0 or i % 2 else np.log(v / (1 - v)) for i, v in enumerate(values)])

    best = _unpack(min((least_squares(residual, start(v)) for v in _STARTS), key=lambda f: f.cost).x)
    return CollectiveFit(round(best.hop_us, 2), tuple(Regime(round(r.base_us, 2), round(r.efficiency, 3))
                                                      for r in best.regimes))


def fit_regimes(nccl: pd.DataFrame, ops: tuple[str, ...] = FITTED_OPS) -> dict[str, CollectiveFit]:
    """:data:`NCCL_REGIMES` from the NCCL tables (columns as ``load_aiconfigurator("nccl")``), NVLink GPUs only."""
    rows = nccl_rows(nccl)
    return {op: fit_op(rows, op) for op in ops}


def fit_network_hop_us(vidur_network: pd.DataFrame, node: str = "a100_dgx",
                       regimes: Mapping[str, CollectiveFit] | None = None) -> float:
    """A ring step's latency across the network (us) from Vidur's network table (``load_vidur("network")``): the
    median time of a send / receive of at most :data:`HOP_MAX_BYTES` between two nodes minus that between two GPUs
    of one node, plus the NVLink ring step of :data:`NCCL_REGIMES`' all-gather. Vidur's fp16 ``size`` is in
    elements."""
    rows = vidur_network.loc[(vidur_network["node"] == node) & (vidur_network["collective"] == "send_recv")
                             & (vidur_network["size"] * 2 <= HOP_MAX_BYTES)]
    across = rows.loc[rows["devices_per_node"] < rows["num_workers"], "latency_ms"]
    inside = rows.loc[rows["devices_per_node"] >= rows["num_workers"], "latency_ms"]
    if across.empty or inside.empty:
        raise ValueError(f"Vidur's network table has no small send / receive of {node!r} inside and across nodes")
    step = (regimes or NCCL_REGIMES)["all_gather"].hop_us
    return round(float(across.median() - inside.median()) * 1e3 + step, 2)


__all__ = ["FITTED_OPS", "HOP_MAX_BYTES", "NCCL_REGIMES", "NETWORK_HOP_US", "RING_STEPS", "CollectiveFit", "Regime",
           "fit_network_hop_us", "fit_op", "fit_regimes", "nccl_rows", "regime_ms", "ring_steps"]
