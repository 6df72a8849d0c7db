"""Precisions: the one table of bytes per element, the names the data spells, and which dtype each op
kind of a workload runs in (docs/method.md §15).

A workload's ``dtype`` is what its GEMMs run in. ``fp32`` is the NeuSight-compatible path (CUDA cores,
TF32 off, unfused attention); ``tf32`` runs GEMMs on tensor cores at fp32 storage; ``bf16`` / ``fp16``
run every op in half precision on tensor cores; ``fp8`` runs the linear layers in fp8 (weights fp8,
activations quantised per tensor, as vLLM does) and everything else in bf16; ``fp4`` does the same in NVFP4
(Blackwell's 4-bit float: e2m1 values with one fp8 scale per 16-element block, so 4.5 bits an element;
activations quantised to NVFP4 before each GEMM); ``amp_bf16`` is mixed-precision training: bf16 compute
with fp32 master weights, gradients and optimizer state.

Mixture-of-experts layers run in the weight / activation formats their engines ship
(:data:`MOE_DTYPES`): ``fp8_block`` (DeepSeek's fp8 with one fp32 scale per 128 x 128 weight block and per
128 activation elements), ``fp4`` (NVFP4), ``mxfp4`` (OCP MX: e2m1 with one 8-bit power-of-two scale per 32
elements), ``w4a16_mxfp4`` (mxfp4 weights dequantised to bf16 in the kernel, gpt-oss), ``w4a8_mxfp4_mxfp8``
(mxfp4 weights, activations in mxfp8) and ``int4_wo`` (int4 weights, one bf16 scale per 128, bf16
activations). Each runs at the tensor-core peak of its compute dtype (:func:`peak_dtype`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tilecast.errors import UserError

if TYPE_CHECKING:  # not imported at run time: the jobs import this module before they check their config
    import pandas as pd

#: bytes per element of each storage / compute dtype; a block-scaled dtype counts its scales (NVFP4: 4 bits
#: plus one 8-bit scale per 16 elements = 0.5625 bytes)
DTYPE_BYTES: dict[str, float] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1,
                                 "fp4": 0.5 + 1.0 / 16, "fp8_block": 1 + 4.0 / (128 * 128),
                                 "mxfp4": 0.5 + 1.0 / 32, "w4a16_mxfp4": 0.5 + 1.0 / 32,
                                 "w4a8_mxfp4_mxfp8": 0.5 + 1.0 / 32, "int4_wo": 0.5 + 2.0 / 128}
#: dtypes a workload may ask for (``amp_bf16`` is a training recipe over bf16 compute)
WORKLOAD_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "amp_bf16")
#: dtypes whose GEMMs run on tensor cores (the ``tc_gemm`` family)
TENSOR_DTYPES = frozenset({"tf32", "bf16", "fp16", "fp8", "fp4"})
#: low-precision GEMM dtypes: weights stored quantised, the bf16 activation quantised before each GEMM,
#: a bf16 output (linears only; every other op of such a workload runs in bf16)
QUANTISED_DTYPES = frozenset({"fp8", "fp4"})
#: half-precision dtypes: fused attention, half vector ops
HALF_DTYPES = frozenset({"bf16", "fp16", "fp8", "fp4", "amp_bf16"})

#: the data's spellings of each dtype (AIConfigurator ``bfloat16``, NCCL ``half``, torch names)
ALIASES: dict[str, str] = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "fp8": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8", "e4m3": "fp8", "int8": "int8",
    "fp4": "fp4", "nvfp4": "fp4", "float4": "fp4", "float4_e2m1fn": "fp4", "e2m1": "fp4",
    "fp8_block": "fp8_block", "mxfp4": "mxfp4", "w4a16_mxfp4": "w4a16_mxfp4",
    "w4a8_mxfp4_mxfp8": "w4a8_mxfp4_mxfp8", "int4_wo": "int4_wo",
}


class MoeDtype(NamedTuple):
    """How an expert GEMM of a dtype stores and computes: bytes per weight and per activation element (block
    scales included) and the dtype whose tensor-core peak (:meth:`GpuSpec.peak_gflops`) it runs at."""

    weight_bytes: float
    act_bytes: float
    peak: str


#: expert-GEMM formats (the AIConfigurator ``moe_dtype`` values, in the project's names)
MOE_DTYPES: dict[str, MoeDtype] = {
    "bf16": MoeDtype(2.0, 2.0, "bf16"),
    "fp8": MoeDtype(1.0, 1.0, "fp8"),  # per-tensor scales
    "fp8_block": MoeDtype(DTYPE_BYTES["fp8_block"], 1 + 4.0 / 128, "fp8"),  # 128x128 / 1x128 fp32 scales
    "fp4": MoeDtype(DTYPE_BYTES["fp4"], DTYPE_BYTES["fp4"], "fp4"),  # NVFP4 weights and activations
    "mxfp4": MoeDtype(DTYPE_BYTES["mxfp4"], DTYPE_BYTES["mxfp4"], "fp4"),  # MXFP4 weights and activations
    "w4a16_mxfp4": MoeDtype(DTYPE_BYTES["w4a16_mxfp4"], 2.0, "bf16"),
    "w4a8_mxfp4_mxfp8": MoeDtype(DTYPE_BYTES["w4a8_mxfp4_mxfp8"], 1 + 1.0 / 32, "fp8"),
    "int4_wo": MoeDtype(DTYPE_BYTES["int4_wo"], 2.0, "bf16"),
}


def peak_dtype(name: str) -> str:
    """The dtype of :data:`~tilecast.specs.gpu.DTYPES` whose peak a (possibly compound) dtype runs at:
    itself for a plain dtype, the compute dtype of an expert-GEMM format (``w4a16_mxfp4`` -> ``bf16``)."""
    return MOE_DTYPES[name].peak if name in MOE_DTYPES else name


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
    if workload_dtype in QUANTISED_DTYPES or workload_dtype == "amp_bf16":
        return "bf16"
    return workload_dtype


#: op kinds whose weights a quantised workload holds in its dtype: linear layers and fused MoE experts
QUANTISED_KINDS = frozenset({"linear", "moe"})


#: linears every quantised release keeps in half precision (the Hugging Face quantisation configs exclude the MoE
#: router's gate, and Qwen's shared-expert gate, in fp8 and fp4 checkpoints alike): they run at the compute dtype
UNQUANTISED_LINEARS = frozenset({"mlp.router", "mlp.shared_expert_gate"})


def op_dtype(workload_dtype: str, kind: str) -> str:
    """The dtype an op of ``kind`` runs in: fp8 / fp4 workloads run linears and fused MoE experts in their
    dtype and the rest in bf16."""
    if workload_dtype in QUANTISED_DTYPES and kind in QUANTISED_KINDS:
        return workload_dtype
    return compute_dtype(workload_dtype)


def bytes_per_element(dtypes: Iterable[str] | np.ndarray | pd.Series) -> np.ndarray:
    """Bytes per element of each dtype name (vectorised; unknown names raise :class:`DtypeError`)."""
    values = np.asarray(dtypes if hasattr(dtypes, "__array__") else list(dtypes), dtype=object)  # array, Series
    if values.size == 0:
        return np.zeros(0)
    import pandas as pd

    codes, uniq = pd.factorize(values.astype(str).ravel())  # hashing, not sorting: O(rows)
    return np.array([DTYPE_BYTES[normalise_dtype(u)] for u in uniq], dtype=float)[codes]


def row_dtypes(rows: pd.DataFrame, column: str = "dtype") -> np.ndarray:
    """Each kernel row's dtype in the project's names (``fp32`` where the column is absent or empty)."""
    if column not in rows:
        return np.full(len(rows), "fp32", dtype=object)
    raw = rows[column].astype(object).where(rows[column].notna(), "fp32").astype(str).to_numpy(dtype=object)
    import pandas as pd

    codes, uniq = pd.factorize(raw)  # hashing, not sorting (np.unique sorts Python strings): O(rows)
    return np.array([normalise_dtype(u) for u in uniq], dtype=object)[codes]
