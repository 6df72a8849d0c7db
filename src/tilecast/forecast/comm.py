"""Communication time of ``allreduce`` / ``sendrecv`` ops from the GPU spec's link bandwidth.

The link is the spec's :attr:`GpuSpec.link_gbs` (NVLink per direction when the sheet lists it, else
PCIe): never a device-name lookup. ``efficiency`` is the fraction of it collectives reach (the
reference's 0.72). All-reduce algorithms are a registry:

- ``ring``: ``2 (p-1)/p * bytes / bw`` (reduce-scatter + all-gather, what NCCL runs);
- ``reference``: ``(p-1) * bytes / bw`` (docs/method.md §9: ``4 n (p-1) / link_bw``).

A send-recv moves its bytes once: ``bytes / bw``. The other NCCL collectives (ring algorithms) of
a message of ``bytes`` over ``p`` GPUs move ``(p-1)/p * bytes`` per GPU: all-gather (``bytes`` the
gathered result), reduce-scatter (``bytes`` the input), all-to-all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

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


@dataclass(frozen=True)
class CommModel:
    """How collectives are timed: link efficiency and all-reduce algorithm (a key of ALLREDUCE_FACTORS)."""

    efficiency: float = 0.72
    allreduce: str = "ring"

    def __post_init__(self) -> None:
        if not 0.0 < self.efficiency <= 1.0:
            raise ValueError(f"link efficiency must be in (0, 1], got {self.efficiency!r}")
        if self.allreduce not in ALLREDUCE_FACTORS:
            raise ValueError(f"unknown all-reduce algorithm {self.allreduce!r}; known: "
                             f"{', '.join(ALLREDUCE_FACTORS)}")

    def link_bytes_per_ms(self, gpu: GpuSpec) -> float:
        """Usable GPU-to-GPU bytes per millisecond."""
        return self.efficiency * gpu.link_gbs * GB_SI / 1e3

    def allreduce_ms(self, nbytes: np.ndarray, gpu: GpuSpec, n_gpus: int | np.ndarray) -> np.ndarray:
        """Time of all-reduces of ``nbytes`` each over ``n_gpus`` GPUs (per row or one for all; 0 on one GPU)."""
        nbytes = np.asarray(nbytes, dtype=float)
        p = np.maximum(np.broadcast_to(np.asarray(n_gpus, dtype=float), nbytes.shape), 1.0)
        return ALLREDUCE_FACTORS[self.allreduce](p) * nbytes / self.link_bytes_per_ms(gpu)

    def collective_ms(self, op: str, nbytes: np.ndarray, gpu: GpuSpec, n_gpus: np.ndarray) -> np.ndarray:
        """Time of NCCL collectives ``op`` (a key of :data:`COLLECTIVE_FACTORS`) of ``nbytes`` over ``n_gpus``."""
        if op not in COLLECTIVE_FACTORS:
            raise ValueError(f"unknown collective {op!r}; known: {', '.join(COLLECTIVE_FACTORS)}")
        nbytes = np.asarray(nbytes, dtype=float)
        p = np.maximum(np.broadcast_to(np.asarray(n_gpus, dtype=float), nbytes.shape), 1.0)
        return COLLECTIVE_FACTORS[op](p) * nbytes / self.link_bytes_per_ms(gpu)

    def sendrecv_ms(self, nbytes: np.ndarray, gpu: GpuSpec) -> np.ndarray:
        """Time of point-to-point transfers of ``nbytes`` each."""
        return np.asarray(nbytes, dtype=float) / self.link_bytes_per_ms(gpu)


DEFAULT_COMM = CommModel()
