"""Kernel collection: measure each (op, shape) with torch and append it to the op's table.

Everything is checked before a file is touched (device, dtype, op names, shape sets); then, per
op, shapes are taken in their (seeded) order, already-present ones skipped, each measured one
written at once. A per-op time budget stops an op early; the shapes it left are reported.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tilecast.collect.environment import DeviceInfo, check_device, detect, set_precision_like_the_data
from tilecast.collect.kernel_ops import GEMM_DIMS, KernelOp, Shape, check_dtype, kernel_op
from tilecast.collect.profiling import KERNEL_COLUMNS, kernel_columns, profile_call
from tilecast.collect.shapes import load_shapes, order_shapes
from tilecast.collect.table import AppendOnlyTable, table_columns
from tilecast.collect.timing import TimingPlan, time_call
from tilecast.errors import UserError

log = logging.getLogger("tilecast.collect")

#: B*H from which a vector shape is "large" (the data's flag is True on all its test and processed
#: rows, whose smallest shapes have 2.2M elements; tilecast sets the line at 2^21 elements)
LARGE_MIN_NUMEL = 1 << 21
#: share of the free device memory a shape may take
MEMORY_FRACTION = 0.9


@dataclass(frozen=True)
class KernelRequest:
    """What to measure: ops x shapes at one dtype, how to time it, and how much of it."""

    ops: Sequence[str]
    shapes: str = "tiny"
    dtype: str = "fp32"
    plan: TimingPlan = field(default_factory=TimingPlan)
    profile: bool = True  # record kernel names / grid (CUDA only)
    budget_s: float | None = None  # wall-clock seconds per op; None: no limit
    limit: int | None = None  # at most this many shapes per op (after ordering)
    shuffle: bool = True
    seed: int = 0
    data_root: str | None = None  # where the shipped tables are read (default data/neusight)


@dataclass
class OpSummary:
    op: str
    table: str
    planned: int
    measured: int = 0
    already: int = 0
    skipped: int = 0
    left: int = 0  # not reached (budget)
    seconds: float = 0.0


def prepare(request: KernelRequest, device: str) -> list[tuple[KernelOp, list[Shape]]]:
    """Check every input and load every shape set; raises before anything is written."""
    check_device(device)
    check_dtype(request.dtype)
    if not request.ops:
        raise UserError("ops is empty: name at least one op")
    ops = [kernel_op(name) for name in request.ops]
    return [(op, order_shapes(load_shapes(request.shapes, op, request.data_root), request.shuffle,
                              request.seed, request.limit)) for op in ops]


def free_bytes(device: torch.device) -> int:
    """Memory a shape may use now: free device memory (CUDA) or available RAM (CPU)."""
    if device.type == "cuda":  # free on the device + what torch's caching allocator holds unused
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return torch.cuda.mem_get_info(device)[0] + cached
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def kernel_row(op: KernelOp, shape: Shape, dtype: str, latency_ms: float, info: DeviceInfo,
               kernels: dict[str, object]) -> dict[str, object]:
    """One table row in the shipped schema (+ dtype, driver)."""
    row: dict[str, object] = {"OPName": op.name, "Latency": latency_ms, "Device": info.name,
                              "Torch Version": info.torch_version, "CUDNN Version": info.cudnn_version,
                              **kernels, "CUDA Version": info.cuda_version, "dtype": dtype, "driver": info.driver}
    row.update(zip(op.dims, shape, strict=True))
    if op.dims != GEMM_DIMS:
        row.pop("Kernels", None)
        row["large"] = shape[0] * shape[1] >= LARGE_MIN_NUMEL
    return row


def measure(op: KernelOp, shape: Shape, dtype: str, info: DeviceInfo, plan: TimingPlan,
            state: dict[str, bool]) -> tuple[float, dict[str, object]]:
    """Latency (ms) of ``op`` at ``shape`` and its kernel columns (empty unless profiled on CUDA).

    ``state["profile"]`` says whether to profile; a profiler failure turns it off for the rest of
    the run (the rows keep empty kernel columns) instead of stopping the collection.
    """
    dev = info.torch_device
    kernels: dict[str, object] = dict.fromkeys(KERNEL_COLUMNS, "")
    with torch.inference_mode():
        inputs = op.make_inputs(shape, dtype, dev)

        def call() -> torch.Tensor:
            return op.run(*inputs)

        ms = time_call(call, dev, plan)
        if state["profile"] and dev.type == "cuda":
            try:
                kernels = kernel_columns(profile_call(call, info.num_sm))
            except torch.OutOfMemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - any profiler failure: keep measuring without it
                log.warning("profiler failed (%s: %s); kernel columns left empty from here on",
                            type(exc).__name__, exc)
                state["profile"] = False
    return ms, kernels


def _measure_op(op: KernelOp, shapes: list[Shape], request: KernelRequest, info: DeviceInfo,
                table: AppendOnlyTable, state: dict[str, bool]) -> OpSummary:
    s = OpSummary(op.name, op.table, len(shapes))
    t0 = time.perf_counter()
    for i, shape in enumerate(shapes):
        if table.done(op.name, request.dtype, shape):
            s.already += 1
            continue
        if request.budget_s is not None and time.perf_counter() - t0 >= request.budget_s:
            s.left = sum(not table.done(op.name, request.dtype, sh) for sh in shapes[i:])
            log.info("%s %s: time budget of %.0f s reached; %d shapes left unmeasured", op.name, request.dtype,
                     request.budget_s, s.left)
            break
        need, free = op.bytes_needed(shape, request.dtype), free_bytes(info.torch_device)
        if need > MEMORY_FRACTION * free:
            table.skip(op.name, request.dtype, shape, f"needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free")
            s.skipped += 1
            continue
        try:
            try:
                ms, kernels = measure(op, shape, request.dtype, info, request.plan, state)
            except torch.OutOfMemoryError:  # a fragmented cache: free it and try once more
                torch.cuda.empty_cache()
                ms, kernels = measure(op, shape, request.dtype, info, request.plan, state)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            table.skip(op.name, request.dtype, shape, "out of memory")
            s.skipped += 1
            continue
        except RuntimeError as exc:  # e.g. a shape too large for a cuBLAS / kernel index type
            table.skip(op.name, request.dtype, shape, f"error: {str(exc).splitlines()[0][:200]}")
            s.skipped += 1
            continue
        table.append(kernel_row(op, shape, request.dtype, ms, info, kernels))
        s.measured += 1
    s.seconds = time.perf_counter() - t0
    if info.device == "cuda":
        torch.cuda.empty_cache()
    return s


def collect_kernels(request: KernelRequest, device: str, output_dir: Path) -> list[OpSummary]:
    """Measure ``request`` on ``device``; rows go to ``output_dir/kernels/<table>.csv``. Resumable."""
    work = prepare(request, device)
    info = detect(device)
    set_precision_like_the_data()
    state = {"profile": request.profile}
    summaries = []
    for op, shapes in work:
        table = AppendOnlyTable(Path(output_dir) / "kernels" / f"{op.table}.csv", table_columns(op), op.dims,
                                info.name)
        s = _measure_op(op, shapes, request, info, table, state)
        log.info("%s %s: %d measured, %d already there, %d skipped, %d left, %.1f s", op.name, request.dtype,
                 s.measured, s.already, s.skipped, s.left, s.seconds)
        summaries.append(s)
    return summaries
