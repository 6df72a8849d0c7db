"""The machine a collection runs on: device name, versions and (for a GPU) its reported facts.

Version strings are written the way the shipped data writes them: ``p2.1.0`` (torch),
``cu121`` (CUDA), ``8902`` (cuDNN). GPU-only fields are empty strings on CPU.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass

import torch

from tilecast.collect.errors import CollectError, NoGpuError

DEVICES = ("cuda", "cpu")


@dataclass(frozen=True)
class DeviceInfo:
    """What the kernel rows and label provenance record about the machine."""

    device: str  # "cuda" | "cpu"
    name: str  # torch.cuda.get_device_name() or the CPU model name
    torch_version: str  # p<torch version without local suffix>
    cuda_version: str  # cu<major><minor>, "" on CPU
    cudnn_version: str  # e.g. "8902", "" on CPU
    driver: str  # NVIDIA driver version, "" on CPU or when unknown
    num_sm: int  # multiprocessors, 0 on CPU

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def check_device(device: str) -> None:
    """Raise before anything is written: unknown device name, or ``cuda`` without a CUDA GPU."""
    if device not in DEVICES:
        raise CollectError(f"device {device!r} is not supported; use one of: {', '.join(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise NoGpuError("device=cuda but torch sees no CUDA GPU on this machine "
                         f"(torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'}); "
                         "run on a GPU machine, or use device=cpu")


def detect(device: str) -> DeviceInfo:
    """Describe ``device`` on this machine (raises :class:`NoGpuError` for cuda without a GPU)."""
    check_device(device)
    tv = "p" + torch.__version__.split("+")[0]
    if device == "cpu":
        return DeviceInfo("cpu", cpu_name(), tv, "", "", "", 0)
    props = torch.cuda.get_device_properties(0)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    cuda = "cu" + torch.version.cuda.replace(".", "") if torch.version.cuda else ""
    return DeviceInfo("cuda", torch.cuda.get_device_name(0), tv, cuda, str(cudnn or ""), nvidia_smi_query()
                      .get("driver_version", ""), props.multi_processor_count)


def cpu_name() -> str:
    """The CPU model name (``/proc/cpuinfo``), else what ``platform`` reports."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


#: nvidia-smi query fields read for provenance and the spec draft
SMI_FIELDS = ("name", "driver_version", "memory.total", "clocks.max.sm", "clocks.max.memory", "power.limit",
              "pcie.link.gen.max", "pcie.link.width.max")


def nvidia_smi_query(index: int = 0) -> dict[str, str]:
    """``nvidia-smi --query-gpu`` fields of GPU ``index`` (empty dict when nvidia-smi is absent)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        out = subprocess.run([exe, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits",
                              f"--id={index}"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.strip().splitlines()[0].split(",")] if out.strip() else []
    if len(values) != len(SMI_FIELDS):
        return {}
    return {k: v for k, v in zip(SMI_FIELDS, values, strict=True) if v and "N/A" not in v and "Not" not in v}


def set_precision_like_the_data() -> None:
    """TF32 off for fp32 matmuls and convolutions, as the shipped data was measured."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
