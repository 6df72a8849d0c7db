"""Measure a GPU (or the CPU): kernel tables in the shipped schema, end-to-end labels, a spec draft.

Entry points: ``python jobs/collect.py ...`` (Hydra) or ``python -m tilecast.collect ...`` (same
options, no Hydra needed: for GPU machines without it). See conf/collect.yaml for every option.
"""

from tilecast.collect.e2e import E2eRequest, collect_e2e
from tilecast.collect.errors import (
    CollectDtypeError,
    CollectError,
    NoGpuError,
    ShapeSourceError,
    UnsupportedOpError,
)
from tilecast.collect.job import run
from tilecast.collect.kernel_ops import DTYPES, KERNEL_OPS
from tilecast.collect.kernels import KernelRequest, collect_kernels
from tilecast.collect.timing import TimingPlan

__all__ = ["DTYPES", "KERNEL_OPS", "CollectError", "E2eRequest", "KernelRequest", "NoGpuError",
           "ShapeSourceError", "TimingPlan", "CollectDtypeError", "UnsupportedOpError", "collect_e2e",
           "collect_kernels", "run"]
