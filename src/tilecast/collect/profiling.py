"""Which kernels a call launches, with grid and block, from the torch profiler's trace.

The shipped rows hold the main kernel (``Kernel Name``, grid, block, warps and blocks per SM) and
every launched kernel name in ``Kernels`` (``;name1;name2``). The main kernel is the longest one.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class KernelLaunch:
    """One GPU kernel launch of a profiled call."""

    name: str
    dur_us: float
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    blocks_per_sm: float
    warps_per_sm: float


def _xyz(value: Any) -> tuple[int, int, int]:
    v = [int(x) for x in (value or [])][:3]
    return tuple(v + [1] * (3 - len(v)))  # type: ignore[return-value]


def kernels_from_trace(trace: Mapping[str, Any], num_sm: int) -> list[KernelLaunch]:
    """Kernel launches of a Chrome trace (``prof.export_chrome_trace``), in launch order.

    Blocks and warps per SM come from the trace's ``blocks per SM`` / ``warps per SM`` when it has
    them, else from grid x block over ``num_sm`` (the same formula).
    """
    events = [e for e in trace.get("traceEvents", []) if str(e.get("cat", "")).lower() == "kernel"]
    out = []
    for e in sorted(events, key=lambda e: float(e.get("ts", 0.0))):
        args = e.get("args", {}) or {}
        grid, block = _xyz(args.get("grid")), _xyz(args.get("block"))
        blocks = grid[0] * grid[1] * grid[2]
        warps = blocks * math.ceil(block[0] * block[1] * block[2] / 32)
        sm = max(num_sm, 1)
        bps = args.get("blocks per SM", blocks / sm)
        wps = args.get("warps per SM", warps / sm)
        out.append(KernelLaunch(str(e.get("name", "")), float(e.get("dur", 0.0)), grid, block, float(bps),
                                float(wps)))
    return out


def kernel_columns(launches: Iterable[KernelLaunch]) -> dict[str, Any]:
    """The shipped tables' kernel columns for one shape (empty strings when nothing was recorded)."""
    launches = list(launches)
    if not launches:
        return dict.fromkeys(KERNEL_COLUMNS, "")
    main = max(launches, key=lambda k: k.dur_us)
    return {
        "Kernel Name": main.name,
        "Warps per SM": main.warps_per_sm,
        "Blocks per SM": main.blocks_per_sm,
        "Grid x": main.grid[0], "Grid y": main.grid[1], "Grid z": main.grid[2],
        "Block x": main.block[0], "Block y": main.block[1], "Block z": main.block[2],
        "Kernels": "".join(";" + k.name for k in launches),
    }


KERNEL_COLUMNS = ("Kernel Name", "Warps per SM", "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x",
                  "Block y", "Block z", "Kernels")


def profile_call(fn: Callable[[], object], num_sm: int) -> list[KernelLaunch]:
    """Run ``fn`` once under the torch profiler (CUDA activity) and return its kernel launches."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="tilecast-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return kernels_from_trace(trace, num_sm)
