"""Communication time of ``allreduce`` / ``sendrecv`` ops from the GPU spec's link bandwidth.

The link is the spec's :attr:`GpuSpec.link_gbs` (NVLink per direction when the sheet lists it, else
PCIe): never a device-name lookup. ``efficiency`` is the fraction of it collectives reach (the
reference's 0.72). All-reduce algorithms are a registry:

- ``ring``: ``2 (p-1)/p * bytes / bw`` (reduce-scatter + all-gather, what NCCL runs);
- ``reference``: ``(p-1) * bytes / bw`` (docs/method.md §9: ``4 n (p-1) / link_bw``).

A send-recv moves its bytes once: ``bytes / bw``. The other NCCL collectives (ring algorithms) of
a message of ``bytes`` over ``p`` GPUs move ``(p-1)/p * bytes`` per GPU: all-gather (``bytes`` the
gathered result), reduce-scatter (``bytes`` the input), all-to-all.

With ``floors=True`` a collective over ``p > 1`` GPUs also pays NCCL's latency floor,
``base + per_gpu * p`` (:data:`FLOORS_MS`): launch, synchronisation and ``2 (p-1)`` ring steps, what a
small message costs whatever the link. On the shipped NCCL tables (six GPUs of three generations, PCIe
and NVLink) it is the same within a microsecond on every GPU (10 / 15 / 25 us for an all-reduce over
2 / 4 / 8 GPUs), so it is fitted once (:func:`fit_floors`); leave-one-GPU-out it takes the all-size
all-reduce MAPE from 73% to 25% (``benchmarks/serving.md``). It is off by default: serving engines
all-reduce small messages with their own one-shot kernels, not NCCL, and with the floor the public decode
rows' TPOT goes from 17% to 37% MAPE (worst at tp 8); the training path has three multi-GPU labels, too
few to show it either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from tilecast.errors import UserError
from tilecast.specs import GpuSpec

GB_SI = 1e9

#: collective (NCCL's names) -> bytes on the wire per message byte, for ``p`` GPUs (ring algorithms)
COLLECTIVE_FACTORS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "all_reduce": lambda p: 2.0 * (p - 1) / p,
    "all_gather": lambda p: (p - 1) / p,
    "reduce_scatter": lambda p: (p - 1) / p,
    "alltoall": lambda p: (p - 1) / p,
}

#: all-reduce algorithm -> bytes on the wire per byte reduced, for ``p`` GPUs (numpy arrays)
ALLREDUCE_FACTORS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ring": lambda p: 2.0 * (p - 1) / p,
    "reference": lambda p: p - 1.0,
}


#: collective -> (base, per GPU) ms of its latency floor over ``p`` GPUs, ``base + per_gpu * p``: the fit of
#: :func:`fit_floors` on the shipped NCCL tables (``load_aiconfigurator("nccl")``; a test refits it)
FLOORS_MS: dict[str, tuple[float, float]] = {
    "all_reduce": (0.00501, 0.00259),
    "all_gather": (0.00648, 0.00122),
    "reduce_scatter": (0.00656, 0.00123),
    "alltoall": (0.00888, 0.00047),
}
#: messages at most this large are latency-bound: their median time per group size is the floor
FLOOR_MAX_BYTES = 65536


def fit_floors(nccl: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """(base, per GPU) ms per collective: least squares of ``base + per_gpu * p`` on the median time of the
    messages of at most :data:`FLOOR_MAX_BYTES` per group size ``p`` (columns as the shipped NCCL tables:
    ``op_name, nccl_dtype, num_gpus, message_size`` in elements, ``latency_ms``)."""
    from tilecast.tiles.dtypes import DTYPE_BYTES, normalise_dtype

    nbytes = nccl["message_size"].to_numpy(float) * nccl["nccl_dtype"].map(
        lambda d: DTYPE_BYTES[normalise_dtype(str(d))]).to_numpy(float)
    small = nccl.loc[nbytes <= FLOOR_MAX_BYTES]
    out = {}
    for op, part in small.groupby("op_name", sort=True):
        med = part.groupby("num_gpus")["latency_ms"].median()
        design = np.c_[np.ones(len(med)), med.index.to_numpy(float)]
        base, per_gpu = np.linalg.lstsq(design, med.to_numpy(float), rcond=None)[0]
        out[str(op)] = (float(base), float(per_gpu))
    return out


def floor_ms(op: str, p: np.ndarray, floors: dict[str, tuple[float, float]] = FLOORS_MS) -> np.ndarray:
    """The latency floor of collective ``op`` over ``p`` GPUs (0 on one GPU: nothing is sent)."""
    base, per_gpu = floors[op]
    p = np.asarray(p, dtype=float)
    return np.where(p > 1, base + per_gpu * p, 0.0)


class AllReduceKernel(Protocol):
    """A serving engine's own all-reduce kernel (``tilecast.serving.engine_allreduce``): its time per message,
    NaN where the engine hands the message to NCCL."""

    def time_ms(self, nbytes: np.ndarray, gpu: GpuSpec, n_gpus: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class CommModel:
    """How collectives are timed: link efficiency, all-reduce algorithm (a key of ALLREDUCE_FACTORS),
    whether NCCL's latency floor (:data:`FLOORS_MS`) is paid (off by default: see the module docstring) and
    the engine's own all-reduce kernel, if any (``allreduce_kernel``: all-reduces it takes are timed by it, the
    others by NCCL as above)."""

    efficiency: float = 0.72
    allreduce: str = "ring"
    floors: bool = False
    allreduce_kernel: AllReduceKernel | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.efficiency <= 1.0:
            raise UserError(f"link efficiency must be in (0, 1], got {self.efficiency!r}")
        if self.allreduce not in ALLREDUCE_FACTORS:
            raise UserError(f"unknown all-reduce algorithm {self.allreduce!r}; known: "
                             f"{', '.join(ALLREDUCE_FACTORS)}")

    def link_bytes_per_ms(self, gpu: GpuSpec) -> float:
        """Usable GPU-to-GPU bytes per millisecond."""
        return self.efficiency * gpu.link_gbs * GB_SI / 1e3

    def allreduce_ms(self, nbytes: np.ndarray, gpu: GpuSpec, n_gpus: int | np.ndarray) -> np.ndarray:
        """Time of all-reduces of ``nbytes`` each over ``n_gpus`` GPUs (per row or one for all; 0 on one GPU)."""
        nbytes = np.asarray(nbytes, dtype=float)
        p = np.maximum(np.broadcast_to(np.asarray(n_gpus, dtype=float), nbytes.shape), 1.0)
        ms = ALLREDUCE_FACTORS[self.allreduce](p) * nbytes / self.link_bytes_per_ms(gpu)
        return self._engine_allreduce(ms + floor_ms("all_reduce", p) if self.floors else ms, nbytes, gpu, p)

    def _engine_allreduce(self, nccl_ms: np.ndarray, nbytes: np.ndarray, gpu: GpuSpec, p: np.ndarray) -> np.ndarray:
        """``nccl_ms`` where no engine kernel is set or it hands the message to NCCL, else the kernel's time."""
        if self.allreduce_kernel is None:
            return nccl_ms
        own = np.asarray(self.allreduce_kernel.time_ms(nbytes, gpu, p), dtype=float)
        return np.where(np.isnan(own) | (p <= 1), nccl_ms, own)

    def collective_ms(self, op: str, nbytes: np.ndarray, gpu: GpuSpec, n_gpus: np.ndarray) -> np.ndarray:
        """Time of NCCL collectives ``op`` (a key of :data:`COLLECTIVE_FACTORS`) of ``nbytes`` over ``n_gpus``."""
        if op not in COLLECTIVE_FACTORS:
            raise UserError(f"unknown collective {op!r}; known: {', '.join(COLLECTIVE_FACTORS)}")
        nbytes = np.asarray(nbytes, dtype=float)
        p = np.maximum(np.broadcast_to(np.asarray(n_gpus, dtype=float), nbytes.shape), 1.0)
        ms = COLLECTIVE_FACTORS[op](p) * nbytes / self.link_bytes_per_ms(gpu)
        ms = ms + floor_ms(op, p) if self.floors else ms
        return self._engine_allreduce(ms, nbytes, gpu, p) if op == "all_reduce" else ms

    def sendrecv_ms(self, nbytes: np.ndarray, gpu: GpuSpec) -> np.ndarray:
        """Time of point-to-point transfers of ``nbytes`` each."""
        return np.asarray(nbytes, dtype=float) / self.link_bytes_per_ms(gpu)


DEFAULT_COMM = CommModel()
