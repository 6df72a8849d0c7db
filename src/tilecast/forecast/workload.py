"""One workload's forecast: graph -> per-op latency -> step time and breakdown (:class:`Forecast`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tilecast.forecast.comm import DEFAULT_COMM, CommModel
from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.ops import op_latency_ms
from tilecast.forecast.summary import GROUPS, op_groups, summarise
from tilecast.graph.layout_graph import LAYOUT_FAMILIES
from tilecast.graph.ops import OpGraph
from tilecast.graph.parallel import as_layout, build_parallel_graph, parse_parallel
from tilecast.specs import GpuSpec, ModelSpec, get_gpu, get_model
from tilecast.tiles.dtypes import check_workload_dtype, op_dtype


def graph_frame(graph: OpGraph) -> pd.DataFrame:
    """``graph.to_frame()`` with what the schedule needs in ``attrs``: parallel tag, degree,
    micro-batches and the number of repeated layers."""
    frame = graph.to_frame()
    frame.attrs.update({"num_layers": int(graph.num_layers), "parallel": graph.meta.get("parallel"),
                        "degree": int(graph.meta.get("degree", 1)),
                        "microbatches": int(graph.meta.get("microbatches", 1))})
    return frame


def workload_frame(model: ModelSpec | str, batch: int, seq_len: int, mode: str = "inference",
                   parallel: str | None = None, fused: bool = False, dtype: str = "fp32") -> pd.DataFrame:
    """The op frame one GPU runs (see :func:`tilecast.graph.parallel.build_parallel_graph`)."""
    return graph_frame(build_parallel_graph(model, batch, seq_len, mode, parallel, fused, dtype=dtype))


def stack_frames(frames: Mapping[Hashable, pd.DataFrame]) -> pd.DataFrame:
    """Many workloads' op frames in one, for one vectorised ``op_latency_ms`` + ``summarise_many`` pass:
    adds ``cell`` (the mapping's key) and each frame's ``parallel``, ``degree`` and ``num_layers``."""
    keys, parts = list(frames), list(frames.values())
    if not parts:
        return pd.DataFrame()
    lengths = [len(p) for p in parts]
    out = pd.concat(parts, ignore_index=True)
    out.attrs = {}
    cells = np.empty(len(keys), dtype=object)
    for i, key in enumerate(keys):  # keys may be tuples: fill one by one
        cells[i] = key
    out["cell"] = np.repeat(cells, lengths)
    out["parallel"] = np.repeat(np.array([p.attrs.get("parallel") for p in parts], dtype=object), lengths)
    out["degree"] = np.repeat([int(p.attrs.get("degree", 1) or 1) for p in parts], lengths)
    out["num_layers"] = np.repeat([int(p.attrs.get("num_layers", 1) or 1) for p in parts], lengths)
    return out


@dataclass(frozen=True)
class Forecast:
    """Predicted step time of one workload on one GPU (per GPU of a parallel group), ms."""

    model: str
    gpu: str
    batch: int
    seq_len: int
    mode: str
    parallel: str | None
    fused: bool
    dtype: str
    e2e_ms: float
    fw_ms: float
    bw_ms: float
    acc_ms: float
    by_group_ms: dict[str, float]
    ops: pd.DataFrame = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the workload, ``e2e_ms``, ``fw_ms``, ``bw_ms``, ``acc_ms`` and ``ms_per_group``."""
        return {"model": self.model, "gpu": self.gpu, "batch": self.batch, "seq_len": self.seq_len,
                "mode": self.mode, "parallel": self.parallel, "fused": self.fused, "dtype": self.dtype,
                "e2e_ms": self.e2e_ms,
                "fw_ms": self.fw_ms, "bw_ms": self.bw_ms, "acc_ms": self.acc_ms,
                "ms_per_group": dict(self.by_group_ms)}

    def describe(self) -> str:
        """A few lines for people: the workload, the step time, phases and time per op group."""
        par = f" {self.parallel}" if self.parallel else ""
        fused = " fused" if self.fused else ""
        lines = [f"{self.model} on {self.gpu}: batch={self.batch} seq_len={self.seq_len} {self.mode} {self.dtype}"
                 f"{par}{fused}",
                 f"  e2e  {self.e2e_ms:10.3f} ms",
                 f"  fw   {self.fw_ms:10.3f} ms   bw {self.bw_ms:10.3f} ms   acc {self.acc_ms:10.3f} ms"]
        total = sum(self.by_group_ms.values()) or 1.0
        for group, ms in sorted(self.by_group_ms.items(), key=lambda kv: -kv[1]):
            if ms > 0:
                lines.append(f"  {group:<12}{ms:10.3f} ms  {100 * ms / total:5.1f}%")
        return "\n".join(lines)


def forecast_frame(frame: pd.DataFrame, gpu: GpuSpec, predict: FamilyPredictor | None = None,
                   comm: CommModel = DEFAULT_COMM) -> tuple[dict[str, float], pd.DataFrame]:
    """Summary (see :func:`summarise`) and the per-op table (``group``, ``ms``, ``total_ms``) of an op frame."""
    ms = op_latency_ms(frame, gpu, predict, comm=comm)
    summary = summarise(frame, ms)
    ops = frame.assign(group=op_groups(frame), ms=ms, total_ms=ms * frame["count"].to_numpy(dtype=float))
    return summary, ops


def check_gpu_dtype(gpu: GpuSpec, dtype: str) -> None:
    """Refuse a workload dtype whose ops the GPU has no peak for (fp8 on an A100, bf16 on a V100),
    naming the GPU and the dtype: never a silent fp32 fallback."""
    for kind in ("linear", "bmm"):
        gpu.peak_gflops(op_dtype(check_workload_dtype(dtype), kind))


def forecast(model: ModelSpec | str, gpu: GpuSpec | str, batch: int, seq_len: int, mode: str = "inference",
             parallel: str | None = None, fused: bool = False, predict: FamilyPredictor | None = None,
             comm: CommModel = DEFAULT_COMM, dtype: str = "fp32") -> Forecast:
    """Forecast one training step or inference pass of ``model`` on ``gpu`` at ``dtype``.

    ``predict`` forecasts kernel rows per family (default: the roofline); ``parallel`` is ``dp<p>``,
    ``tp<p>`` or ``pp<p>[_<micro-batches>]`` with ``batch`` the global batch (a mixture-of-experts model: a
    layout, :func:`tilecast.graph.parallel.as_layout`). Unknown names raise
    :class:`~tilecast.specs.UnknownSpecError` listing the known ones; a workload that cannot be built
    raises :class:`~tilecast.specs.WorkloadError` naming the value; a dtype the GPU has no peak for
    raises the spec's :class:`~tilecast.specs.UnsupportedDtypeError` naming both.
    """
    spec = get_model(model) if isinstance(model, str) else model
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    if spec.family in LAYOUT_FAMILIES:  # a mixture-of-experts model: any layout tag (tp4, tp1dp8ep8, dp8)
        par = as_layout(parallel)
        tag = par.tag if par.gpus > 1 else None
    else:
        par = parse_parallel(parallel)
        tag = par.tag if par else None
    check_gpu_dtype(gpu, dtype)
    frame = workload_frame(spec, batch, seq_len, mode, par, fused, dtype)
    summary, ops = forecast_frame(frame, gpu, predict, comm)
    return Forecast(spec.key, gpu.key, int(batch), int(seq_len), mode, tag, bool(fused),
                    dtype, summary["e2e_ms"], summary["fw_ms"], summary["bw_ms"], summary["acc_ms"],
                    {g: summary[f"ms_{g}"] for g in GROUPS}, ops)


def summary_row(fc: Forecast) -> dict[str, Any]:
    """A flat record (workload columns + :data:`~tilecast.forecast.summary.SUMMARY_KEYS`) for tables."""
    d = fc.to_dict()
    groups = d.pop("ms_per_group")
    return {**d, **{f"ms_{g}": float(np.round(v, 9)) for g, v in groups.items()}}
