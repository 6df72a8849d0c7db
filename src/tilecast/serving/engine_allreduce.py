"""Serving engines' own all-reduce kernels: what a tensor-parallel step all-reduces through, not NCCL.

vLLM (``CustomAllreduce``), SGLang (its port, ``CustomAllReduce``) and TRT-LLM (its ``AllReduce`` op) each
reduce messages up to a size with a one-kernel exchange over peer-mapped GPU memory (NVLink, or PCIe
peer-to-peer between two GPUs) and hand larger ones to NCCL. Each implementation (:data:`IMPLEMENTATIONS`; vLLM
and SGLang have two: inside a CUDA graph, as decode runs, and eager, which also copies the input into the
registered buffer and pays the host's launch) is priced from the GPU spec:

``t = base + per_gpu x p + 2 (p-1)/p x bytes / (efficiency x link)``

for messages of at most ``max_bytes`` over ``p`` GPUs linked by NVLink, or over two GPUs on PCIe; every other
message (larger, one GPU, or more than two PCIe-only GPUs, where vLLM and SGLang disable the kernel) is NCCL's:
the ring and NCCL's latency floor of :mod:`tilecast.forecast.comm`. ``base`` / ``per_gpu`` (the latency floor:
launch, one flag exchange per peer), ``efficiency`` (the share of the link the exchange reaches) and ``max_bytes``
(the largest message kept off NCCL, a power of two) are fitted per implementation on the engines' measured
all-reduce tables of every GPU (:func:`fit_allreduce`; :data:`ALLREDUCE_PARAMS` holds the fit on the shipped
table, and a test refits it). Leave-one-GPU-out figures against the NCCL model: ``benchmarks/engine_kernels.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecast.forecast.comm import CommModel
from tilecast.serving.engines import check_engine, resolve_version
from tilecast.specs import GpuSpec, get_gpu

#: the measured tables' ``kernel_source`` -> implementation
IMPLEMENTATIONS: dict[str, str] = {
    "vLLM_custom_graph": "vllm_graph", "vLLM_custom_eager": "vllm_eager",
    "SGLang_CustomAllReduce_graph": "sglang_graph", "SGLang_CustomAllReduce_eager": "sglang_eager",
    "TRTLLM": "trtllm",
}
#: engine -> execution mode (``graph``: inside a CUDA graph, as decode steps run; ``eager``) -> implementation
ENGINE_IMPLEMENTATIONS: dict[str, dict[str, str]] = {
    "vllm": {"graph": "vllm_graph", "eager": "vllm_eager"},
    "sglang": {"graph": "sglang_graph", "eager": "sglang_eager"},
    "trtllm": {"graph": "trtllm", "eager": "trtllm"},
}
MODES = ("graph", "eager")
#: messages at most this large time the latency floor (as :data:`tilecast.forecast.comm.FLOOR_MAX_BYTES`)
FLOOR_MAX_BYTES = 65536
#: candidate ``max_bytes``: powers of two from 256 KiB to 64 MiB
MAX_BYTES_CANDIDATES: tuple[int, ...] = tuple(2 ** k for k in range(18, 27))
#: GPUs on PCIe only (no NVLink in the spec) beyond which vLLM and SGLang disable their kernel
MAX_PCIE_GPUS = 2
#: the NCCL model messages the engine does not take are timed by (ring + NCCL's latency floor)
NCCL = CommModel(floors=True)


@dataclass(frozen=True)
class AllReduceParams:
    """One implementation's fitted constants (ms, a fraction of the link, bytes)."""

    base_ms: float
    per_gpu_ms: float
    efficiency: float
    max_bytes: int


#: the fit of :func:`fit_allreduce` on the shipped ``custom_allreduce`` table (every GPU); a test refits it
ALLREDUCE_PARAMS: dict[str, AllReduceParams] = {
    "sglang_eager": AllReduceParams(0.04290, 0.00000, 0.687, 16777216),
    "sglang_graph": AllReduceParams(0.00402, 0.00019, 0.532, 16777216),
    "trtllm": AllReduceParams(0.00456, 0.00013, 0.382, 8388608),
    "vllm_eager": AllReduceParams(0.03231, 0.00000, 0.588, 67108864),
    "vllm_graph": AllReduceParams(0.00502, 0.00031, 0.363, 16777216),
}


def _wire(p: np.ndarray) -> np.ndarray:
    return 2.0 * (p - 1.0) / p


def takes(nbytes: np.ndarray, gpu: GpuSpec, p: np.ndarray, max_bytes: int) -> np.ndarray:
    """Where an engine's own kernel reduces the message (else NCCL): 2+ GPUs, at most ``max_bytes``, and NVLink
    or at most :data:`MAX_PCIE_GPUS` GPUs."""
    linked = gpu.nvlink_gbs is not None
    return (p > 1) & (nbytes <= max_bytes) & (linked | (p <= MAX_PCIE_GPUS))


@dataclass(frozen=True)
class EngineAllReduce:
    """An engine's all-reduce kernel, a :class:`tilecast.forecast.comm.AllReduceKernel`."""

    implementation: str
    params: AllReduceParams

    def time_ms(self, nbytes: np.ndarray, gpu: GpuSpec, n_gpus: np.ndarray) -> np.ndarray:
        """ms per message; NaN where the engine hands it to NCCL."""
        nbytes = np.asarray(nbytes, dtype=float)
        p = np.broadcast_to(np.asarray(n_gpus, dtype=float), nbytes.shape)
        q = self.params
        link = q.efficiency * gpu.link_gbs * 1e9 / 1e3  # bytes per ms
        ms = q.base_ms + q.per_gpu_ms * p + _wire(p) * nbytes / link
        return np.where(takes(nbytes, gpu, p, q.max_bytes), ms, np.nan)


def engine_allreduce(engine: str, version: str | None = None, mode: str = "graph",
                     params: dict[str, AllReduceParams] | None = None) -> EngineAllReduce:
    """The all-reduce kernel ``engine`` (release ``version``) runs in ``mode`` (``graph`` | ``eager``)."""
    name = check_engine(engine)
    resolve_version(name, version)
    if mode not in MODES:
        raise ValueError(f"unknown all-reduce mode {mode!r}; known: {', '.join(MODES)}")
    impl = ENGINE_IMPLEMENTATIONS[name][mode]
    return EngineAllReduce(impl, (ALLREDUCE_PARAMS if params is None else params)[impl])


def engine_comm(engine: str, version: str | None = None, mode: str = "graph",
                params: dict[str, AllReduceParams] | None = None) -> CommModel:
    """A :class:`CommModel` whose all-reduce is ``engine``'s own kernel, NCCL (ring + floors) above the size the
    engine hands to NCCL; the other collectives are NCCL's. Unknown engine / version: a named error."""
    return CommModel(floors=True, allreduce_kernel=engine_allreduce(engine, version, mode, params))


def allreduce_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The ``custom_allreduce`` table as ``implementation, system, p, nbytes, ms`` (bf16: 2 bytes an element)."""
    return pd.DataFrame({"implementation": table["kernel_source"].map(IMPLEMENTATIONS),
                         "system": table["system"].astype(str), "p": table["num_gpus"].to_numpy(float),
                         "nbytes": table["message_size"].to_numpy(float) * 2.0,
                         "ms": table["latency_ms"].to_numpy(float)})


def measured_nccl_ms(rows: pd.DataFrame, nccl: pd.DataFrame) -> np.ndarray:
    """Per row of :func:`allreduce_rows`: NCCL's measured all-reduce time of the same GPU, group and bytes (the
    shipped ``nccl`` table's ``all_reduce`` rows), NaN where it has none."""
    ar = nccl[nccl["op_name"] == "all_reduce"]
    from tilecast.tiles.dtypes import bytes_per_element

    keyed = pd.DataFrame({"system": ar["system"].astype(str), "p": ar["num_gpus"].to_numpy(float),
                          "nbytes": ar["message_size"].to_numpy(float) * bytes_per_element(ar["nccl_dtype"]),
                          "nccl_ms": ar["latency_ms"].to_numpy(float)}).drop_duplicates(["system", "p", "nbytes"])
    return rows.merge(keyed, on=["system", "p", "nbytes"], how="left")["nccl_ms"].to_numpy(float)


def _floor(rows: pd.DataFrame, own: np.ndarray) -> tuple[float, float]:
    """(base, per GPU) ms: least squares of ``base + per_gpu x p`` on the median time of the small messages the
    kernel takes, per group size ``p`` (a flat floor where the slope comes out negative)."""
    small = own & (rows["nbytes"].to_numpy() <= FLOOR_MAX_BYTES)
    med = rows[small].groupby("p")["ms"].median()
    if len(med) == 1:
        return float(med.iloc[0]), 0.0
    design = np.c_[np.ones(len(med)), med.index.to_numpy(float)]
    base, per_gpu = np.linalg.lstsq(design, med.to_numpy(float), rcond=None)[0]
    if per_gpu < 0:  # more peers never cost less: a flat floor instead
        return float(med.mean()), 0.0
    return float(base), float(per_gpu)


def _fit_one(rows: pd.DataFrame, nccl_ms: np.ndarray) -> AllReduceParams:
    """One implementation's constants. ``max_bytes``: the candidate whose split best explains the rows, the
    kernel's model below it and NCCL's *measured* time above it (``nccl_ms``; rows without one are left out of
    this choice), so the hand-off is located whatever the NCCL model's own error; for each candidate the floor
    is fitted on the small messages and the efficiency is the median implied by the messages above 256 KiB
    (:func:`_floor`)."""
    gpus = {str(s): get_gpu(str(s)) for s in rows["system"].unique()}
    links = rows["system"].map(lambda s: gpus[str(s)].link_gbs * 1e6).to_numpy()  # bytes per ms
    p, nbytes, ms = rows["p"].to_numpy(), rows["nbytes"].to_numpy(), rows["ms"].to_numpy()
    best, best_err = None, np.inf
    for max_bytes in MAX_BYTES_CANDIDATES:
        own = np.zeros(len(rows), dtype=bool)
        for s, g in gpus.items():
            mask = (rows["system"] == s).to_numpy()
            own[mask] = takes(nbytes[mask], g, p[mask], max_bytes)
        if not (own & (nbytes <= FLOOR_MAX_BYTES)).any():
            continue
        base, per_gpu = _floor(rows, own)
        floor = base + per_gpu * p
        big = own & (nbytes > 4 * FLOOR_MAX_BYTES) & (ms > floor)
        if not big.any():
            continue
        eff = float(np.clip(np.median(_wire(p[big]) * nbytes[big] / ((ms[big] - floor[big]) * links[big])),
                            1e-3, 1.0))
        pred = np.where(own, floor + _wire(p) * nbytes / (eff * links), nccl_ms)
        ok = np.isfinite(pred)
        err = float(np.mean(np.abs(np.log(pred[ok] / ms[ok]))))
        if err < best_err:
            best, best_err = AllReduceParams(base, per_gpu, eff, int(max_bytes)), err
    if best is None:
        raise ValueError("no all-reduce rows to fit a custom kernel on (need messages over 2+ GPUs)")
    return best


def fit_allreduce(table: pd.DataFrame, nccl: pd.DataFrame) -> dict[str, AllReduceParams]:
    """:class:`AllReduceParams` per implementation from rows of the ``custom_allreduce`` schema and the measured
    NCCL table of the same GPUs (``data/aiconfigurator/nccl``)."""
    rows = allreduce_rows(table).dropna(subset=["implementation"]).reset_index(drop=True)
    measured = measured_nccl_ms(rows, nccl)
    return {str(impl): _fit_one(rows.iloc[idx].reset_index(drop=True), measured[idx])
            for impl, idx in rows.groupby("implementation").indices.items()}
