"""Precisions: the one table of bytes per element, the names the data spells, and which dtype each op
kind of a workload runs in (docs/method.md §15).

A workload's ``dtype`` is what its GEMMs run in. ``fp32`` is the NeuSight-compatible path (CUDA cores,
TF32 off, unfused attention); ``tf32`` runs GEMMs on tensor cores at fp32 storage; ``bf16`` / ``fp16``
run every op in half precision on tensor cores; ``fp8`` runs the linear layers in fp8 (weights fp8,
activations quantised per tensor, as vLLM does) and everything else in bf16; ``amp_bf16`` is
mixed-precision training: bf16 compute with fp32 master weights, gradients and optimizer state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from tilecast.errors import UserError

if TYPE_CHECKING:  # not imported at run time: the jobs import this module before they check their config
    import pandas as pd

#: bytes per element of each storage / compute dtype
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
#: dtypes a workload may ask for (``amp_bf16`` is a training recipe over bf16 compute)
WORKLOAD_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "amp_bf16")
#: dtypes whose GEMMs run on tensor cores (the ``tc_gemm`` family)
TENSOR_DTYPES = frozenset({"tf32", "bf16", "fp16", "fp8"})
#: half-precision dtypes: fused attention, half vector ops
HALF_DTYPES = frozenset({"bf16", "fp16", "fp8", "amp_bf16"})

#: the data's spellings of each dtype (AIConfigurator ``bfloat16``, NCCL ``half``, torch names)
ALIASES: dict[str, str] = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "fp8": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8", "e4m3": "fp8", "int8": "int8",
}


class DtypeError(UserError):
    """An unknown dtype name (the message lists the known ones)."""


def normalise_dtype(name: object) -> str:
    """The project's name of a dtype as any source spells it (``bfloat16`` -> ``bf16``)."""
    key = str(name).strip().lower()
    if key not in ALIASES:
        raise DtypeError(f"unknown dtype {name!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    return ALIASES[key]


def check_workload_dtype(name: object) -> str:
    """A workload dtype, validated (unknown -> :class:`DtypeError` listing :data:`WORKLOAD_DTYPES`)."""
    if name not in WORKLOAD_DTYPES:
        raise DtypeError(f"unknown dtype {name!r}; known: {', '.join(WORKLOAD_DTYPES)}")
    return str(name)


def compute_dtype(workload_dtype: str) -> str:
    """The dtype non-linear ops (vector ops, attention, bmm) of a workload run in."""
    return {"fp8": "bf16", "amp_bf16": "bf16"}.get(workload_dtype, workload_dtype)


def op_dtype(workload_dtype: str, kind: str) -> str:
    """The dtype an op of ``kind`` runs in: fp8 workloads run linears in fp8 and the rest in bf16."""
    if workload_dtype == "fp8" and kind == "linear":
        return "fp8"
    return compute_dtype(workload_dtype)


def bytes_per_element(dtypes: Iterable[str] | np.ndarray | pd.Series) -> np.ndarray:
    """Bytes per element of each dtype name (vectorised; unknown names raise :class:`DtypeError`)."""
    values = np.asarray(dtypes if hasattr(dtypes, "__array__") else list(dtypes), dtype=object)  # array, Series
    if values.size == 0:
        return np.zeros(0)
    uniq, inverse = np.unique(values.astype(str), return_inverse=True)
    return np.array([DTYPE_BYTES[normalise_dtype(u)] for u in uniq], dtype=float)[inverse.ravel()]


def row_dtypes(rows: pd.DataFrame, column: str = "dtype") -> np.ndarray:
    """Each kernel row's dtype in the project's names (``fp32`` where the column is absent or empty)."""
    if column not in rows:
        return np.full(len(rows), "fp32", dtype=object)
    raw = rows[column].astype(object).where(rows[column].notna(), "fp32").astype(str).to_numpy(dtype=object)
    uniq, inverse = np.unique(raw, return_inverse=True)
    return np.array([normalise_dtype(u) for u in uniq], dtype=object)[inverse.ravel()]
