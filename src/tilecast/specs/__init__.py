"""Frozen, validated value objects: GPU spec sheets and model configs (no I/O beyond the catalog)."""

from tilecast.specs.errors import SpecError, UnknownSpecError
from tilecast.specs.gpu import GpuSpec, UnsupportedDtypeError, all_gpus, get_gpu, load_gpu_file
from tilecast.specs.model import (
    ModelSpec,
    UnsupportedModelError,
    all_models,
    get_model,
    load_model_file,
    unsupported_models,
)
from tilecast.specs.workload import Workload, WorkloadError

__all__ = ["GpuSpec", "ModelSpec", "SpecError", "UnknownSpecError", "UnsupportedDtypeError", "UnsupportedModelError",
           "all_gpus", "all_models", "get_gpu", "get_model", "load_gpu_file", "load_model_file", "unsupported_models",
           "Workload", "WorkloadError"]
