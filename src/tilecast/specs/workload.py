"""A workload: which model runs with which batch, sequence length and mode (frozen, validated).

Every forecast starts from one :class:`Workload`. Construction validates the numbers against the
model so a bad request fails early with an error that names the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilecast.specs.errors import SpecError
from tilecast.specs.model import ModelSpec, get_model
from tilecast.tiles.dtypes import HALF_DTYPES, WORKLOAD_DTYPES

MODES = ("inference", "training")
#: families whose attention width is ``num_heads * head_dim == hidden_size`` (switch uses d_kv, llama head_dim)
_HEADS_SPLIT_HIDDEN = frozenset({"gpt2", "opt", "bert", "mpt"})


class WorkloadError(SpecError):
    """A workload that cannot run: bad batch, sequence length, mode or model shape (names the value)."""


@dataclass(frozen=True)
class Workload:
    """``model`` (a :class:`ModelSpec`, or a catalog key resolved on construction) run at ``batch`` x
    ``seq_len`` tokens in ``mode`` (inference | training); ``fused`` for torch.compile-style fusion;
    ``parallel`` is reserved for the multi-GPU transforms (``graph.parallel``), e.g. ``{"dp": 4}``;
    ``dtype`` is one of :data:`~tilecast.tiles.dtypes.WORKLOAD_DTYPES` (``amp_bf16`` only trains)."""

    model: ModelSpec
    batch: int
    seq_len: int
    mode: str = "inference"
    fused: bool = False
    parallel: Any = None
    dtype: str = "fp32"
    kv_len: int = 0  # tokens per sequence already in the KV cache: a decode step is seq_len=1 over kv_len
    serving: bool = False  # the kernels a serving engine runs (fused norms / QKV / gate-up, last-token logits)

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            object.__setattr__(self, "model", get_model(self.model))
        if not isinstance(self.model, ModelSpec):
            raise WorkloadError(f"model must be a ModelSpec or a catalog key, got {self.model!r}")
        for name in ("batch", "seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise WorkloadError(f"{name} must be a positive integer, got {value!r}")
        if self.mode not in MODES:
            raise WorkloadError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.dtype not in WORKLOAD_DTYPES:
            raise WorkloadError(f"unknown dtype {self.dtype!r}; known: {', '.join(WORKLOAD_DTYPES)}")
        if not isinstance(self.kv_len, int) or isinstance(self.kv_len, bool) or self.kv_len < 0:
            raise WorkloadError(f"kv_len must be a non-negative integer, got {self.kv_len!r}")
        if (self.kv_len or self.serving) and (self.mode != "inference" or self.dtype not in HALF_DTYPES):
            raise WorkloadError(f"kv_len={self.kv_len} serving={self.serving}: a serving / KV-cache step needs "
                                f"mode=inference and a half-precision dtype (fused attention), got mode={self.mode} "
                                f"dtype={self.dtype}")
        if self.dtype == "amp_bf16" and self.mode != "training":
            raise WorkloadError("dtype amp_bf16 is a training recipe (bf16 compute, fp32 master weights); "
                                "for inference use dtype=bf16")
        spec = self.model
        if spec.max_positions and self.seq_len + self.kv_len > spec.max_positions:
            raise WorkloadError(f"seq_len={self.seq_len}" + (f" + kv_len={self.kv_len}" if self.kv_len else "")
                                + f" exceeds {spec.key}'s {spec.max_positions} positions")
        if spec.family in _HEADS_SPLIT_HIDDEN and spec.hidden_size % spec.num_heads:
            raise WorkloadError(f"{spec.key}: num_heads={spec.num_heads} does not divide "
                                f"hidden_size={spec.hidden_size}")
        if spec.num_heads % spec.num_kv_heads:
            raise WorkloadError(f"{spec.key}: num_kv_heads={spec.num_kv_heads} does not divide "
                                f"num_heads={spec.num_heads}")

    @property
    def training(self) -> bool:
        return self.mode == "training"

    @property
    def tokens(self) -> int:
        """Tokens per step: ``batch * seq_len``."""
        return self.batch * self.seq_len

    def describe(self) -> str:
        """One line for people: ``gpt2_large batch=4 seq_len=1024 training``."""
        fused = " fused" if self.fused else ""
        dtype = f" {self.dtype}" if self.dtype != "fp32" else ""
        return f"{self.model.key} batch={self.batch} seq_len={self.seq_len} {self.mode}{dtype}{fused}"
