"""What the collector can run: op name -> kernel recipe (inputs for a shape, the call, its table).

Dims follow the data (docs/method.md §1): GEMM ``(B, M, N, K)`` is ``[B, M, N] @ [B, N, K]``; ``linear`` is
``x[B*M, N] @ W[K, N]^T + b[K]`` (B = 1 in the data: M tokens, N in-features, K out-features); vector
ops are ``(B, H)``: B rows of H elements (``softmax`` / ``ln`` over H). Binary ops take two tensors,
``...u`` ops a tensor and a Python scalar, as the data's VEC op names mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tilecast.collect.errors import CollectDtypeError, UnsupportedOpError

GEMM_DIMS = ("B", "M", "N", "K")
VEC_DIMS = ("B", "H")

#: dtype name -> torch dtype (the names of the ``dtype`` column)
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}

Shape = tuple[int, ...]
Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class KernelOp:
    """One op the collector measures."""

    name: str  # OPName in the tables
    table: str  # output table stem, as the shipped test tables: bmm, linear, elem, softmax, ln
    dims: tuple[str, ...]
    n_inputs: int  # tensor inputs of an elementwise op (1: unary / with a scalar, 2: binary)
    run: Callable[..., torch.Tensor]

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        """Shapes of the tensors ``run`` takes for dims ``shape``."""
        if self.dims == GEMM_DIMS:
            b, m, n, k = shape
            if self.name == "bmm":
                return [(b, m, n), (b, n, k)]
            return [(b * m, n), (k, n), (k,)]
        b, h = shape
        if self.name == "ln":
            return [(b, h), (h,), (h,)]
        return [(b, h)] * self.n_inputs

    def output_numel(self, shape: Shape) -> int:
        if self.dims == GEMM_DIMS:
            b, m, _, k = shape
            return b * m * k
        return shape[0] * shape[1]

    def bytes_needed(self, shape: Shape, dtype: str) -> int:
        """Device bytes the inputs and output take (the memory check before a shape runs)."""
        numel = sum(_prod(s) for s in self.input_shapes(shape)) + self.output_numel(shape)
        return numel * torch.empty((), dtype=DTYPES[dtype]).element_size()

    def make_inputs(self, shape: Shape, dtype: str, device: str | torch.device) -> Inputs:
        """Random inputs in [0.5, 1.5) (no zero divisors, no negative bases for ``pow``)."""
        dt = DTYPES[dtype]
        return tuple(torch.empty(s, dtype=dt, device=device).uniform_(0.5, 1.5) for s in self.input_shapes(shape))


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _vec(name: str, fn: Callable[..., torch.Tensor], n_inputs: int, table: str = "elem") -> KernelOp:
    return KernelOp(name, table, VEC_DIMS, n_inputs, fn)


#: op name -> recipe. Scalars as in the traced models (gelu_new: x * 0.5, x ** 3.0, 1.0 + t, ...).
KERNEL_OPS: dict[str, KernelOp] = {
    "bmm": KernelOp("bmm", "bmm", GEMM_DIMS, 2, torch.bmm),
    "linear": KernelOp("linear", "linear", GEMM_DIMS, 3, F.linear),
    "add": _vec("add", torch.add, 2),
    "mul": _vec("mul", torch.mul, 2),
    "div": _vec("div", torch.div, 2),
    "pow": _vec("pow", torch.pow, 2),
    "addu": _vec("addu", lambda x: x + 1.0, 1),
    "mulu": _vec("mulu", lambda x: x * 0.5, 1),
    "divu": _vec("divu", lambda x: x / 8.0, 1),
    "powu": _vec("powu", lambda x: torch.pow(x, 3.0), 1),
    "relu": _vec("relu", F.relu, 1),
    "gelu": _vec("gelu", F.gelu, 1),
    "tanh": _vec("tanh", torch.tanh, 1),
    "softmax": _vec("softmax", lambda x: F.softmax(x, dim=-1), 1, table="softmax"),
    "ln": _vec("ln", lambda x, w, b: F.layer_norm(x, (x.size(-1),), w, b), 1, table="ln"),
}


def kernel_op(name: str) -> KernelOp:
    """The recipe for op ``name``; unknown -> :class:`UnsupportedOpError` listing the known ops."""
    if name not in KERNEL_OPS:
        raise UnsupportedOpError(f"op {name!r} is not supported by the collector; "
                                 f"supported ops: {', '.join(KERNEL_OPS)}")
    return KERNEL_OPS[name]


def check_dtype(name: str) -> torch.dtype:
    """The torch dtype for dtype name ``name``; unknown -> :class:`CollectDtypeError`."""
    if name not in DTYPES:
        raise CollectDtypeError(f"dtype {name!r} is not supported by the collector; "
                                    f"supported dtypes: {', '.join(DTYPES)}")
    return DTYPES[name]
