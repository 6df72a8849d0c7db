"""GPU spec sheets: ``conf/gpu/<key>.yaml`` -> frozen, validated :class:`GpuSpec`.

Units are in the field names. ``fp32_gflops``, ``mem_gb``, ``mem_bw_gbs``, ``num_sm`` and ``l2_mb``
carry exactly the NeuSight device-file values (``SingleFLOPs``, ``Dev_Mem``, ``Mem_Bw``,
``Num_Sm``, ``L2Cache``) for the GPUs of the data, so features computed from them match the paper.
The other GPUs carry their vendor datasheet values; each file says where a number is derived.

One spec is one device as ``torch.cuda`` enumerates it: a part whose dies show up as separate
devices (the MI250X's two GCDs) is described per die, as NeuSight's own MI250 file does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from tilecast.paths import CONF_DIR
from tilecast.specs.catalog import (
    build_dataclass,
    nonempty_str,
    one_of,
    positive,
    positive_int,
    read_yaml,
    unknown_error,
)
from tilecast.specs.errors import SpecError


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's spec sheet. Peaks are dense (no sparsity); tensor-core peaks are None where unpublished."""

    key: str
    device_name: str  # exact name as torch.cuda.get_device_name() reports it (joins with the data)
    vendor: str  # "nvidia" or "amd"
    architecture: str
    num_sm: int  # SMs (NVIDIA) or compute units (AMD)
    fp32_gflops: float  # peak fp32, non-tensor
    mem_gb: float  # device memory, GB as listed
    mem_bw_gbs: float  # peak DRAM bandwidth, GB/s
    l2_mb: float
    boost_clock_mhz: float
    pcie_gbs: float  # host link, GB/s per direction
    source: str  # where the numbers come from (datasheet URL / data file)
    cores_per_sm: int | None = None
    tf32_tflops: float | None = None
    bf16_tflops: float | None = None
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    nvlink_gbs: float | None = None  # GPU-to-GPU link, GB/s total (both directions); None: PCIe only
    tdp_w: float | None = None

    @property
    def label_dir(self) -> str:
        """Directory name of the data's labels: ``NVIDIA A100 80GB PCIe`` -> ``NVIDIA_A100_80GB_PCIe``."""
        return self.device_name.replace(" ", "_")

    @property
    def link_gbs(self) -> float:
        """GPU-to-GPU bandwidth per direction: NVLink when the spec lists it, PCIe otherwise."""
        return self.nvlink_gbs / 2 if self.nvlink_gbs else self.pcie_gbs

    def peak_gflops(self, dtype: str = "fp32") -> float:
        """Peak GFLOP/s for ``dtype`` (fp32, tf32, bf16, fp16, fp8); falls back to fp32 when unpublished."""
        if dtype == "fp32":
            return self.fp32_gflops
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
        tflops = getattr(self, f"{dtype}_tflops")
        return tflops * 1000.0 if tflops else self.fp32_gflops


#: dtypes with a peak in :class:`GpuSpec` (``peak_gflops``)
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")


_CHECKS = {
    "key": nonempty_str,
    "device_name": nonempty_str,
    "vendor": one_of("nvidia", "amd"),
    "architecture": nonempty_str,
    "source": nonempty_str,
    "num_sm": positive_int,
    "cores_per_sm": positive_int,
    "fp32_gflops": positive,
    "mem_gb": positive,
    "mem_bw_gbs": positive,
    "l2_mb": positive,
    "boost_clock_mhz": positive,
    "pcie_gbs": positive,
    "tf32_tflops": positive,
    "bf16_tflops": positive,
    "fp16_tflops": positive,
    "fp8_tflops": positive,
    "nvlink_gbs": positive,
    "tdp_w": positive,
}


def load_gpu_file(path: Path) -> GpuSpec:
    """Validate one GPU YAML file; errors name the file, the field and the value."""
    data = read_yaml(path)
    spec = build_dataclass(GpuSpec, data, path, _CHECKS)
    if spec.key != path.stem:
        raise SpecError(f"{path}: field 'key' has value {spec.key!r} but the file is named {path.stem!r}")
    return spec


@functools.cache
def _catalog(conf_dir: Path) -> dict[str, GpuSpec]:
    """Load every ``gpu/*.yaml``; two files claiming one device name would make lookups ambiguous."""
    cat: dict[str, GpuSpec] = {}
    owner: dict[str, Path] = {}
    for p in sorted((conf_dir / "gpu").glob("*.yaml")):
        spec = load_gpu_file(p)
        for name in (spec.device_name, spec.label_dir):
            if name in owner and owner[name] != p:
                raise SpecError(f"{p}: field 'device_name' has value {spec.device_name!r}, "
                                f"which {owner[name]} already names")
            owner[name] = p
        cat[spec.key] = spec
    return cat


def all_gpus(conf_dir: Path = CONF_DIR) -> dict[str, GpuSpec]:
    """Every GPU of the catalog by key."""
    return dict(_catalog(Path(conf_dir)))


def get_gpu(name: str, conf_dir: Path = CONF_DIR) -> GpuSpec:
    """Look a GPU up by catalog key, exact device name, or label-directory name."""
    cat = _catalog(Path(conf_dir))
    if name in cat:
        return cat[name]
    for spec in cat.values():
        if name in (spec.device_name, spec.label_dir):
            return spec
    raise unknown_error("GPU", name, {k: [s.device_name, s.label_dir] for k, s in cat.items()})
