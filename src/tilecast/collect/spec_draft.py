"""A ``conf/gpu/<key>.yaml`` draft from what torch and the driver report about the GPU.

Read from the machine: name, SM count, compute capability, memory size, L2 size, max SM and
memory clocks, memory bus width, power limit, PCIe link. Derived (and marked ``CONFIRM``):
peak fp32 = 2 x SMs x fp32 cores per SM (by architecture) x max SM clock; DRAM bandwidth =
2 (double data rate) x memory clock x bus width / 8. Tensor-core peaks and NVLink are
datasheet-only: written as null and marked for the user to fill in.
"""

from __future__ import annotations

import datetime as dt
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from tilecast.collect.environment import check_device, nvidia_smi_query
from tilecast.collect.errors import CollectError
from tilecast.specs import load_gpu_file

#: compute capability -> (architecture, fp32 cores per SM)
ARCHITECTURES: dict[tuple[int, int], tuple[str, int]] = {
    (6, 0): ("pascal", 64), (6, 1): ("pascal", 128), (7, 0): ("volta", 64), (7, 5): ("turing", 64),
    (8, 0): ("ampere", 64), (8, 6): ("ampere", 128), (8, 7): ("ampere", 128), (8, 9): ("ada", 128),
    (9, 0): ("hopper", 128), (10, 0): ("blackwell", 128), (12, 0): ("blackwell", 128),
}
#: PCIe generation -> GB/s per lane and direction, as datasheets round it (x16 Gen4 = 32 GB/s)
PCIE_LANE_GBS = {3: 1.0, 4: 2.0, 5: 4.0, 6: 8.0}


@dataclass(frozen=True)
class GpuFacts:
    """What the machine reports about one GPU (None: not reported)."""

    name: str
    num_sm: int
    cc: tuple[int, int]
    mem_mib: float  # total memory, MiB
    l2_bytes: int | None
    sm_clock_mhz: float | None  # max SM clock
    mem_clock_mhz: float | None  # max memory clock
    bus_width_bits: int | None
    power_limit_w: float | None
    pcie_gen: int | None
    pcie_width: int | None
    driver: str = ""


def _num(d: dict[str, str], key: str) -> float | None:
    try:
        return float(d[key])
    except (KeyError, ValueError):
        return None


def gather_facts(index: int = 0) -> GpuFacts:
    """Read the facts of CUDA GPU ``index`` from torch and nvidia-smi (NoGpuError without a GPU)."""
    check_device("cuda")
    p = torch.cuda.get_device_properties(index)
    smi = nvidia_smi_query(index)
    clock = _num(smi, "clocks.max.sm") or (getattr(p, "clock_rate", 0) / 1000 or None)
    mem_clock = _num(smi, "clocks.max.memory") or (getattr(p, "memory_clock_rate", 0) / 1000 or None)
    gen, width = _num(smi, "pcie.link.gen.max"), _num(smi, "pcie.link.width.max")
    return GpuFacts(
        name=torch.cuda.get_device_name(index), num_sm=p.multi_processor_count, cc=(p.major, p.minor),
        mem_mib=_num(smi, "memory.total") or p.total_memory / 2**20, l2_bytes=getattr(p, "L2_cache_size", None),
        sm_clock_mhz=clock, mem_clock_mhz=mem_clock, bus_width_bits=getattr(p, "memory_bus_width", None) or None,
        power_limit_w=_num(smi, "power.limit"), pcie_gen=int(gen) if gen else None,
        pcie_width=int(width) if width else None, driver=smi.get("driver_version", ""))


def spec_key(device_name: str) -> str:
    """Catalog key for a device name: ``NVIDIA A100-SXM4-80GB`` -> ``a100_sxm4_80gb``."""
    name = re.sub(r"^(NVIDIA|Tesla|AMD)\s+", "", device_name.strip(), flags=re.I)
    name = re.sub(r"^(Tesla|Instinct)\s+", "", name, flags=re.I)
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "gpu"


def _line(key: str, value: object, note: str = "") -> str:
    v = "null" if value is None else (f'"{value}"' if isinstance(value, str) else repr(value))
    return f"{key}: {v}" + (f"  # {note}" if note else "")


def draft_spec(facts: GpuFacts, key: str | None = None, when: dt.date | None = None) -> str:
    """The YAML text of a GpuSpec draft; estimated or missing values carry a ``CONFIRM`` comment."""
    key = key or spec_key(facts.name)
    arch, cores = ARCHITECTURES.get(facts.cc, ("unknown", None))
    clock = facts.sm_clock_mhz
    fp32 = round(2 * facts.num_sm * cores * clock / 1000, 2) if cores and clock else None
    bw = (round(2 * facts.mem_clock_mhz * facts.bus_width_bits / 8 / 1000, 1)
          if facts.mem_clock_mhz and facts.bus_width_bits else None)
    pcie = PCIE_LANE_GBS.get(facts.pcie_gen or 0, 0) * (facts.pcie_width or 0) or None
    when = when or dt.date.today()
    confirm = "CONFIRM against the datasheet"
    lines = [
        f"# DRAFT written by `python jobs/collect.py what=spec` on {when.isoformat()} from torch and nvidia-smi",
        f"# (driver {facts.driver or 'unknown'}). Read from the machine: device_name, num_sm, mem_gb, l2_mb,",
        "# boost_clock_mhz. Values marked CONFIRM are estimates or datasheet-only: check them, fill the",
        "# nulls you know, and delete these comments before relying on forecasts for this GPU.",
        _line("key", key),
        _line("device_name", facts.name),
        _line("vendor", "nvidia"),
        _line("architecture", arch, f"compute capability {facts.cc[0]}.{facts.cc[1]}"),
        _line("num_sm", facts.num_sm),
        _line("sm_version", facts.cc[0] * 10 + facts.cc[1], "compute capability x 10: kernel libraries dispatch on it"),
        _line("cores_per_sm", cores, f"fp32 cores per SM of {arch}; {confirm}"),
        _line("fp32_gflops", fp32, f"estimate: 2 x {facts.num_sm} SMs x {cores} cores x {clock} MHz; {confirm}"),
        _line("mem_gb", round(facts.mem_mib / 1024, 1), f"{facts.mem_mib:.0f} MiB reported; {confirm} (listed GB)"),
        _line("mem_bw_gbs", bw, f"estimate: 2 x {facts.mem_clock_mhz} MHz x {facts.bus_width_bits} bit / 8; "
              f"{confirm}"),
        _line("l2_mb", round(facts.l2_bytes / 2**20, 1) if facts.l2_bytes else None,
              "" if facts.l2_bytes else f"not reported; {confirm}"),
        _line("boost_clock_mhz", clock, "max SM clock reported"),
        _line("tf32_tflops", None, f"datasheet only (dense); {confirm}"),
        _line("bf16_tflops", None, f"datasheet only (dense); {confirm}"),
        _line("fp16_tflops", None, f"datasheet only (dense); {confirm}"),
        _line("fp8_tflops", None, f"datasheet only (dense); {confirm}"),
        _line("pcie_gbs", pcie, f"PCIe Gen{facts.pcie_gen} x{facts.pcie_width} as reported; {confirm}"),
        _line("nvlink_gbs", None, f"datasheet only (total, both directions); null = PCIe only; {confirm}"),
        _line("tdp_w", facts.power_limit_w, f"power limit reported; {confirm}"),
        _line("source", f"tilecast collect what=spec draft ({when.isoformat()}): torch "
              f"{torch.__version__}, nvidia-smi; estimates marked CONFIRM"),
    ]
    return "\n".join(lines) + "\n"


def check_draft(text: str, key: str) -> None:
    """Raise :class:`CollectError` unless ``text`` loads as a valid GpuSpec file named ``<key>.yaml``."""
    with tempfile.TemporaryDirectory(prefix="tilecast-spec-") as tmp:
        path = Path(tmp) / f"{key}.yaml"
        path.write_text(text)
        try:
            load_gpu_file(path)
        except ValueError as exc:
            raise CollectError(f"the spec draft is not a valid GPU file: {exc}") from None
