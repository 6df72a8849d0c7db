"""Collectives of a group of GPUs that may span nodes: NVLink / PCIe inside a node, the network across nodes.

A group of ``p`` ranks with ``q`` of them on each node (``q = p`` inside one node) runs NCCL's ring
algorithms (docs/method.md §19). Every byte of a ring crosses every edge of it; NCCL builds one ring per
channel and, on rail-optimised nodes (one NIC per GPU), each channel enters and leaves a node through its
own NIC, so a node's ``q`` NICs share a ring's inter-node traffic. The link bandwidth of the group is

    bw = link                                  (one node)
    bw = min(link if q > 1, q x nic)           (n > 1 nodes)

with ``link`` the GPU's per-direction NVLink (PCIe without it) and ``nic`` its network per direction (the
catalog's ``network_gbs`` or a :class:`~tilecast.specs.train_run.Network` override; no data here separates
fabrics, so RoCE and InfiniBand are timed alike). A group with one rank per node (a replica group of hybrid
sharding, a pipeline boundary) is bounded by one NIC. On an NVLink GPU a collective's time is
:func:`tilecast.forecast.collectives.regime_ms` over ``bw``: NCCL's protocol regimes (start-up and per-ring-step
latency, link efficiency) fitted on the shipped one-node NCCL tables, checked leave one GPU out there
(``benchmarks/training_at_scale.md``), and taken to hold across nodes too (nothing public measures a
rail-optimised cluster's collective bandwidth; Vidur's two-node DGX rows run far below their NICs, and the same
benchmark says by how much), except that every step of a ring that crosses the network pays a network hop's
latency (:data:`~tilecast.forecast.collectives.NETWORK_HOP_US`, from Vidur's small two-node messages). A GPU
without NVLink keeps :class:`~tilecast.forecast.comm.CommModel`'s ring at 0.72 of the
link plus NCCL's latency floor ``base + per_gpu x p`` (:data:`~tilecast.forecast.comm.FLOORS_MS`): the tables'
PCIe machines lose bandwidth beyond two GPUs in ways their spec sheets do not show.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilecast.forecast.collectives import NCCL_REGIMES, NETWORK_HOP_US, CollectiveFit, regime_ms
from tilecast.forecast.comm import COLLECTIVE_FACTORS, FLOORS_MS, GB_SI, CommModel, floor_ms
from tilecast.specs import GpuSpec

#: NIC bandwidth assumed when neither the catalog nor an override gives one (GB/s per GPU per direction)
DEFAULT_NIC_GBS = 25.0


@dataclass(frozen=True)
class Placement:
    """A collective group: ``ranks`` GPUs, ``per_node`` of them on each node (``per_node >= ranks``: one node)."""

    ranks: int
    per_node: int

    @property
    def nodes(self) -> int:
        return max(1, -(-self.ranks // max(1, self.per_node)))

    @property
    def intra_node(self) -> bool:
        return self.nodes == 1


def placement(ranks: int, stride: int, gpus_per_node: int) -> Placement:
    """Where a group of ``ranks`` GPUs ``stride`` apart in rank order lies (tp groups are contiguous, stride 1;
    data-parallel groups stride over the tp x cp ranks; pipeline neighbours over a whole stage)."""
    per_node = max(1, min(ranks, gpus_per_node // max(1, stride))) if stride <= gpus_per_node else 1
    return Placement(int(ranks), int(per_node))


@dataclass(frozen=True)
class NetworkComm:
    """Timing of collectives over a :class:`Placement` (module docstring). ``nic_gbs``: network GB/s per GPU
    per direction (None: the GPU's catalog ``network_gbs``, else :data:`DEFAULT_NIC_GBS`); ``regimes``: the NVLink
    GPUs' protocol regimes (None: :data:`~tilecast.forecast.collectives.NCCL_REGIMES`); ``network_hop_us``: a ring
    step's latency when the ring crosses the network; ``base`` and ``floors``:
    the model of GPUs without NVLink (and of point-to-point transfers)."""

    base: CommModel = CommModel(floors=True)
    nic_gbs: float | None = None
    floors: dict[str, tuple[float, float]] | None = None  # None: FLOORS_MS
    regimes: dict[str, CollectiveFit] | None = None
    network_hop_us: float = NETWORK_HOP_US

    def nic(self, gpu: GpuSpec) -> float:
        if self.nic_gbs is not None:
            return float(self.nic_gbs)
        return float(gpu.network_gbs) if gpu.network_gbs else DEFAULT_NIC_GBS

    def link_gbs(self, gpu: GpuSpec, where: Placement) -> float:
        """GB/s per direction of the group's ring before any efficiency (module docstring)."""
        if where.intra_node:
            return float(gpu.link_gbs)
        inter = where.per_node * self.nic(gpu)
        return min(float(gpu.link_gbs), inter) if where.per_node > 1 else inter

    def bandwidth_gbs(self, gpu: GpuSpec, where: Placement) -> float:
        """Usable GB/s of the group for large messages (before the collective's bytes factor): the link at the
        largest-message regime's efficiency of an all-reduce (NVLink GPUs), else at ``base.efficiency``."""
        eff = max(r.efficiency for r in (self.regimes or NCCL_REGIMES)["all_reduce"].regimes) if gpu.nvlink_gbs \
            else self.base.efficiency
        return self.link_gbs(gpu, where) * eff

    def bound(self, gpu: GpuSpec, where: Placement) -> str:
        """What limits the group: ``link`` (NVLink / PCIe) or ``network``."""
        if where.intra_node:
            return "link"
        return "network" if self.link_gbs(gpu, where) < gpu.link_gbs else "link"

    def collective_ms(self, op: str, nbytes: float | np.ndarray, gpu: GpuSpec, where: Placement) -> np.ndarray:
        """ms of collective ``op`` (all_reduce, all_gather, reduce_scatter, alltoall) of ``nbytes`` over the group
        (the message's full size: the gathered result, the reduce-scatter's input); 0 over one rank."""
        if op not in COLLECTIVE_FACTORS:
            raise ValueError(f"unknown collective {op!r}; known: {', '.join(COLLECTIVE_FACTORS)}")
        nbytes = np.asarray(nbytes, dtype=float)
        if where.ranks <= 1:
            return np.zeros_like(nbytes)
        if gpu.nvlink_gbs:
            hop = None if where.intra_node else self.network_hop_us
            return regime_ms(op, nbytes, float(where.ranks), self.link_gbs(gpu, where), self.regimes, hop)
        return self.link_share_ms(op, nbytes, gpu, where)

    def link_share_ms(self, op: str, nbytes: np.ndarray, gpu: GpuSpec, where: Placement) -> np.ndarray:
        """The model of GPUs without NVLink: the ring at ``base.efficiency`` of the group's link plus NCCL's latency
        floor (what every GPU got before the NCCL regimes; ``benchmarks/training_at_scale.md`` compares them)."""
        nbytes = np.asarray(nbytes, dtype=float)
        if where.ranks <= 1:
            return np.zeros_like(nbytes)
        p = np.full(nbytes.shape, float(where.ranks))
        bw = self.link_gbs(gpu, where) * self.base.efficiency * GB_SI / 1e3  # bytes per ms
        return COLLECTIVE_FACTORS[op](p) * nbytes / bw + floor_ms(op, p, self.floors or FLOORS_MS)

    def sendrecv_ms(self, nbytes: float | np.ndarray, gpu: GpuSpec, across_nodes: bool) -> np.ndarray:
        """ms of a point-to-point transfer (pipeline boundary): over the link, or one NIC across nodes, at
        ``base.efficiency`` (the NCCL tables hold no send / receive)."""
        eff = self.base.efficiency
        bw = (self.nic(gpu) if across_nodes else gpu.link_gbs) * eff * GB_SI / 1e3
        return np.asarray(nbytes, dtype=float) / bw


__all__ = ["DEFAULT_NIC_GBS", "NetworkComm", "Placement", "placement"]
