"""GPU spec sheets: ``conf/gpu/<key>.yaml`` -> frozen, validated :class:`GpuSpec`.

Units are in the field names. ``fp32_gflops``, ``mem_gb``, ``mem_bw_gbs``, ``num_sm`` and ``l2_mb``
carry exactly the NeuSight device-file values (``SingleFLOPs``, ``Dev_Mem``, ``Mem_Bw``,
``Num_Sm``, ``L2Cache``; for AMD ``SingleFLOPsVEC`` and, in ``fp32_matrix_gflops``,
``SingleFLOPsMM``) for the GPUs of the data, so features computed from them match the paper.
The other GPUs carry their vendor datasheet values; each file says where a number is derived and
where it disagrees with the data's second source (``external/aiconfigurator/systems/*.yaml``).

One spec is one device as ``torch.cuda`` enumerates it: a part whose dies show up as separate
devices (the MI250X's two GCDs) is described per die, as NeuSight's own MI250 file does.

Peaks are dense (no sparsity), one per dtype of :data:`DTYPES`; a GPU without a published peak for a
dtype does not support it here: :meth:`GpuSpec.peak_gflops` raises :class:`UnsupportedDtypeError`
rather than guessing. fp32 GEMMs run at :meth:`GpuSpec.gemm_peak_gflops`: the fp32 matrix-core peak where
the spec lists one (AMD), the vector peak otherwise.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilecast.errors import UserError
from tilecast.paths import CONF_DIR
from tilecast.specs.catalog import (
    build_dataclass,
    invalid,
    nonempty_str,
    one_of,
    positive,
    positive_int,
    read_yaml,
    unknown_error,
)
from tilecast.specs.errors import SpecError

#: dtype -> (GpuSpec field holding its dense peak, factor to GFLOP/s); the one list of dtypes
_PEAK_FIELDS: dict[str, tuple[str, float]] = {
    "fp32": ("fp32_gflops", 1.0),
    "tf32": ("tf32_tflops", 1000.0),
    "bf16": ("bf16_tflops", 1000.0),
    "fp16": ("fp16_tflops", 1000.0),
    "fp8": ("fp8_tflops", 1000.0),
    "int8": ("int8_tops", 1000.0),
    "fp4": ("fp4_tflops", 1000.0),
}

#: dtypes with a peak in :class:`GpuSpec` (``peak_gflops``), widest first
DTYPES: tuple[str, ...] = tuple(_PEAK_FIELDS)


class UnsupportedDtypeError(SpecError):
    """A GPU has no published dense peak for a (known) dtype; names the GPU and lists its dtypes."""

    def __init__(self, key: str, dtype: str, supported: tuple[str, ...]) -> None:
        super().__init__(f"GPU {key!r} has no published dense {dtype} peak, so {dtype} is unsupported on it; "
                         f"its dtypes: {', '.join(supported)}")
        self.key, self.dtype, self.supported = key, dtype, supported

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (worker processes) despite the custom __init__
        return type(self), (self.key, self.dtype, self.supported)


def _known_dtype(dtype: Any) -> str:
    if not isinstance(dtype, str) or dtype not in _PEAK_FIELDS:
        raise UserError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    return dtype


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's spec sheet. Peaks are dense (no sparsity); tensor-core peaks are None where unpublished."""

    key: str
    device_name: str  # exact name as torch.cuda (torch.xpu) get_device_name() reports it (joins with the data)
    vendor: str  # "nvidia", "amd" or "intel"
    architecture: str
    num_sm: int  # SMs (NVIDIA), compute units (AMD) or Xe-cores (Intel)
    fp32_gflops: float  # peak fp32, non-tensor (CUDA cores / vector units)
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
    int8_tops: float | None = None  # dense int8 tensor / matrix (dp4a on Pascal) peak, tera-ops/s
    fp4_tflops: float | None = None  # dense fp4 tensor peak (NVFP4 / MXFP4), where published
    fp32_matrix_gflops: float | None = None  # fp32 on matrix cores (AMD MFMA); None where fp32 is vector only
    nvlink_gbs: float | None = None  # GPU-to-GPU link, GB/s total (both directions); None: PCIe only
    nvlink_domain: int | None = None  # GPUs one NVLink domain joins (GB200 NVL72: 72); None: 8 with NVLink, else 1
    network_gbs: float | None = None  # scale-out network per GPU, GB/s per direction; None: unknown
    tdp_w: float | None = None
    sm_version: int | None = None  # NVIDIA compute capability x 10 (80 A100, 89 Ada, 90 Hopper, 100 B200, 120 RTX PRO)
    aliases: tuple[str, ...] = ()  # other names get_gpu accepts (the data's system names: "h100_sxm")

    @property
    def label_dir(self) -> str:
        """Directory name of the data's labels: ``NVIDIA A100 80GB PCIe`` -> ``NVIDIA_A100_80GB_PCIe``."""
        return self.device_name.replace(" ", "_")

    @property
    def names(self) -> tuple[str, ...]:
        """Every name :func:`get_gpu` finds this GPU by: key, device name, label directory, aliases."""
        return tuple(dict.fromkeys((self.key, self.device_name, self.label_dir, *self.aliases)))

    @property
    def link_gbs(self) -> float:
        """GPU-to-GPU bandwidth per direction: NVLink when the spec lists it, PCIe otherwise."""
        return self.nvlink_gbs / 2 if self.nvlink_gbs else self.pcie_gbs

    @property
    def gpus_per_node(self) -> int:
        """GPUs that reach each other over NVLink (an HGX board's 8, a GB200 NVL72 rack's 72); beyond them traffic
        crosses the network (``network_gbs``): expert-parallel all-to-all over more GPUs spans nodes."""
        if self.nvlink_domain is not None:
            return self.nvlink_domain
        return 8 if self.nvlink_gbs else 1

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes of :data:`DTYPES` this GPU has a published dense peak for (fp32 always)."""
        return tuple(d for d, (f, _) in _PEAK_FIELDS.items() if getattr(self, f) is not None)

    def supports(self, dtype: str) -> bool:
        """Whether the GPU has a published dense peak for ``dtype``; ValueError for a dtype not in DTYPES."""
        field, _ = _PEAK_FIELDS[_known_dtype(dtype)]
        return getattr(self, field) is not None

    def peak_gflops(self, dtype: str = "fp32") -> float:
        """Dense peak GFLOP/s (GOP/s for int8) for ``dtype`` of :data:`DTYPES`.

        Raises ValueError for an unknown dtype (listing the known ones) and
        :class:`UnsupportedDtypeError` when this GPU has no published peak for it (listing its dtypes).
        """
        field, scale = _PEAK_FIELDS[_known_dtype(dtype)]
        value = getattr(self, field)
        if value is None:
            raise UnsupportedDtypeError(self.key, dtype, self.dtypes)
        return value * scale

    def gemm_peak_gflops(self, dtype: str = "fp32") -> float:
        """Dense peak GFLOP/s a GEMM (bmm / linear) runs at in ``dtype``: fp32 GEMMs run on the matrix cores
        where the GPU has fp32 ones (AMD MFMA, ``fp32_matrix_gflops``: rocBLAS / Tensile kernels use them) and
        on the vector units (``fp32_gflops``) otherwise; every other dtype as :meth:`peak_gflops` (its
        errors too). The one source of a GEMM's peak: the roofline, GEMM features and forecasts read it."""
        if _known_dtype(dtype) == "fp32" and self.fp32_matrix_gflops is not None:
            return self.fp32_matrix_gflops
        return self.peak_gflops(dtype)


def alias_list(x: Any) -> bool:
    """a list of distinct non-empty strings"""
    return (isinstance(x, (list, tuple)) and all(nonempty_str(a) for a in x)
            and len(set(x)) == len(x))


_CHECKS = {
    "key": nonempty_str,
    "device_name": nonempty_str,
    "vendor": one_of("nvidia", "amd", "intel"),
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
    "int8_tops": positive,
    "fp4_tflops": positive,
    "fp32_matrix_gflops": positive,
    "nvlink_gbs": positive,
    "nvlink_domain": positive_int,
    "network_gbs": positive,
    "tdp_w": positive,
    "sm_version": positive_int,
    "aliases": alias_list,
}


def load_gpu_file(path: Path) -> GpuSpec:
    """Validate one GPU YAML file; errors name the file, the field and the value."""
    data = read_yaml(path)
    if data.get("aliases") is None:  # absent or null: no aliases
        data.pop("aliases", None)
    elif not alias_list(data["aliases"]):
        raise invalid(path, "aliases", data["aliases"], alias_list)
    else:
        data["aliases"] = tuple(data["aliases"])
    spec = build_dataclass(GpuSpec, data, path, _CHECKS)
    if spec.key != path.stem:
        raise SpecError(f"{path}: field 'key' has value {spec.key!r} but the file is named {path.stem!r}")
    return spec


@functools.cache
def _catalog(conf_dir: Path) -> tuple[dict[str, GpuSpec], dict[str, GpuSpec]]:
    """Load every ``gpu/*.yaml`` -> (by key, by every name). A name two files claim (key, device name,
    label directory or alias) would make lookups ambiguous: :class:`SpecError` naming both files."""
    specs = {p: load_gpu_file(p) for p in sorted((conf_dir / "gpu").glob("*.yaml"))}
    owner: dict[str, Path] = {p.stem: p for p in specs}  # keys first: another file's name must not shadow one
    index: dict[str, GpuSpec] = {}
    for p, spec in specs.items():
        fields = [("device_name", spec.device_name), ("device_name", spec.label_dir)]
        for field, name in fields + [("aliases", a) for a in spec.aliases]:
            if owner.setdefault(name, p) != p:
                shown = spec.device_name if field == "device_name" else name
                raise SpecError(f"{p}: field {field!r} has value {shown!r}, which {owner[name]} already names")
        for name in spec.names:
            index[name] = spec
    return {s.key: s for s in specs.values()}, index


def all_gpus(conf_dir: Path = CONF_DIR) -> dict[str, GpuSpec]:
    """Every GPU of the catalog by key."""
    return dict(_catalog(Path(conf_dir))[0])


def get_gpu(name: str, conf_dir: Path = CONF_DIR) -> GpuSpec:
    """Look a GPU up by catalog key, exact device name, label-directory name or alias."""
    by_key, index = _catalog(Path(conf_dir))
    if name in index:
        return index[name]
    raise unknown_error("GPU", name, {k: [s.device_name, s.label_dir, *s.aliases] for k, s in by_key.items()})
