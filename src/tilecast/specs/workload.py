"""A workload: which model runs with which batch, sequence length and mode (frozen, validated).

Every forecast starts from one :class:`Workload`. Construction validates the numbers against the
model so a bad request fails early with an error that names the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilecast.specs.errors import SpecError
from tilecast.specs.model import ModelSpec, get_model

MODES = ("inference", "training")
#: families whose attention width is ``num_heads * head_dim == hidden_size`` (switch uses d_kv, llama head_dim)
_HEADS_SPLIT_HIDDEN = frozenset({"gpt2", "opt", "bert"})


class WorkloadError(SpecError):
    """A workload that cannot run: bad batch, sequence length, mode or model shape (names the value)."""


@dataclass(frozen=True)
class Workload:
    """``model`` (a :class:`ModelSpec`, or a catalog key resolved on construction) run at ``batch`` x
    ``seq_len`` tokens in ``mode`` (inference | training); ``fused`` for torch.compile-style fusion;
    ``parallel`` is reserved for the multi-GPU transforms (``graph.parallel``), e.g. ``{"dp": 4}``."""

    model: ModelSpec
    batch: int
    seq_len: int
    mode: str = "inference"
    fused: bool = False
    parallel: Any = None

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
        spec = self.model
        if spec.max_positions and self.seq_len > spec.max_positions:
            raise WorkloadError(f"seq_len={self.seq_len} exceeds {spec.key}'s {spec.max_positions} positions")
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
        return f"{self.model.key} batch={self.batch} seq_len={self.seq_len} {self.mode}{fused}"
