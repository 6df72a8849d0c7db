"""Operator vocabulary of kernel rows: op name -> family, and per-output-element costs (METHOD.md §1)."""

from __future__ import annotations

#: vector ops with two tensor inputs (12 bytes moved per fp32 output element)
BINARY_VEC = frozenset({"add", "mul", "div", "pow", "sub"})
#: vector ops with one tensor input (8 bytes per output element); "u" = with a scalar
UNARY_VEC = frozenset({"addu", "mulu", "divu", "powu", "subu", "tanh", "gelu", "relu", "silu", "sigmoid",
                       "exp", "neg", "rsqrt", "sqrt"})
GEMM_OPS = frozenset({"bmm", "linear"})

#: kernel family of each op name; one predictor is trained per family
FAMILY_OF_OP: dict[str, str] = {
    "bmm": "bmm",
    "linear": "linear",
    "softmax": "softmax",
    "ln": "layernorm",
    "rmsnorm": "layernorm",
    **{op: "elementwise" for op in BINARY_VEC | UNARY_VEC},
}
FAMILIES = ("bmm", "linear", "elementwise", "softmax", "layernorm")

#: flops per output element
OPS_PER_OUTPUT: dict[str, float] = {"softmax": 5.0, "ln": 6.0, "rmsnorm": 4.0}


def family_of(op: str) -> str | None:
    """Family of a kernel op name, or None for an op no predictor covers."""
    return FAMILY_OF_OP.get(op)


def ops_per_output(op: str) -> float:
    """FLOPs per output element of a vector op (1 for plain elementwise)."""
    return OPS_PER_OUTPUT.get(op, 1.0)


def mem_per_output(op: str) -> float:
    """fp32 bytes moved per output element of a vector op (inputs + output)."""
    return 12.0 if op in BINARY_VEC else 8.0
