"""Name tables of the fx tracer: which torch callables, Tensor methods and modules map to which op.

Keys are torch callables (``call_function``), method names (``call_method``) or module classes
(``call_module``). Anything absent from every table and producing a tensor is *unmapped*: the
tracer lists it with its count and costs it as a copy of its inputs and output.
"""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import nn

#: arithmetic: base op name; binary when two tensor operands, else the ``u`` (scalar) variant
ARITHMETIC: dict[object, str] = {
    operator.add: "add", operator.iadd: "add", torch.add: "add", "add": "add", "add_": "add",
    operator.sub: "sub", operator.isub: "sub", torch.sub: "sub", "sub": "sub", "rsub": "sub", torch.rsub: "sub",
    operator.mul: "mul", operator.imul: "mul", torch.mul: "mul", "mul": "mul", "mul_": "mul",
    operator.truediv: "div", operator.itruediv: "div", torch.div: "div", torch.true_divide: "div",
    "div": "div", "div_": "div", "truediv": "div",
    operator.pow: "pow", torch.pow: "pow", "pow": "pow",
}

#: one-input elementwise / row-wise vector ops
UNARY: dict[object, str] = {
    torch.tanh: "tanh", "tanh": "tanh", F.tanh: "tanh",
    F.gelu: "gelu", "gelu": "gelu", F.relu: "relu", torch.relu: "relu", "relu": "relu", "relu_": "relu",
    F.silu: "silu", "silu": "silu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", "sigmoid": "sigmoid",
    torch.exp: "exp", "exp": "exp", torch.sqrt: "sqrt", "sqrt": "sqrt",
    operator.neg: "neg", torch.neg: "neg", "neg": "neg",
}
SOFTMAX = frozenset({F.softmax, torch.softmax, "softmax"})
LAYER_NORM = frozenset({F.layer_norm, torch.layer_norm})
DROPOUT = frozenset({F.dropout, torch.dropout, "dropout"})
EMBEDDING = frozenset({F.embedding, torch.embedding})
MATMUL = frozenset({torch.matmul, operator.matmul, torch.bmm, torch.mm, "matmul", "bmm", "mm", "__matmul__"})
LINEAR = frozenset({F.linear, torch.addmm, "addmm"})
OUTER = frozenset({torch.outer, torch.ger, "outer"})  # rank-1 GEMM: Linear(len(a), 1, len(b))
CONV = frozenset({F.conv1d, F.conv2d, F.conv3d, torch.conv1d, torch.conv2d, torch.conv3d})
#: data movement costed as MEM (backward: two copies of the inputs), as the reference graphs do
COPIES: dict[object, str] = {
    torch.where: "copy", "where": "copy", "masked_fill": "copy", "masked_fill_": "copy",
    torch.masked_fill: "copy", torch.cat: "copy", torch.concat: "copy", torch.stack: "copy",
    torch.cumsum: "copy", "cumsum": "copy", torch.mean: "copy", "mean": "copy", torch.sum: "copy",
    "sum": "copy", torch.amax: "copy", "amax": "copy", "max": "copy", torch.max: "copy",
    "clone": "copy", torch.clone: "copy", "repeat": "copy", torch.repeat_interleave: "copy",
    "repeat_interleave": "copy", torch.gather: "copy", "gather": "copy", torch.index_select: "copy",
    "index_select": "copy", "scatter": "copy", "scatter_add": "copy", torch.tril: "copy", "tril": "copy",
    torch.triu: "copy", "triu": "copy", F.pad: "copy", F.one_hot: "copy", torch.argmax: "copy",
    "argmax": "copy", torch.count_nonzero: "copy", "count_nonzero": "copy", torch.rsqrt: "rsqrt",
    "rsqrt": "rsqrt", operator.getitem: "copy", operator.setitem: "copy",
}
#: dtype casts: free when the dtype does not change, a copy otherwise
CASTS = frozenset({"to", "type", "float", "half", "bfloat16", "double", "long", "int", "bool"})
#: views, shape queries and tensor factories: no kernel in the reference's model
FREE = frozenset({
    "view", "reshape", "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten", "expand", "expand_as",
    "size", "dim", "split", "chunk", "unbind", "detach", "view_as", "narrow", "unflatten", "new_zeros",
    "new_ones", "new_full", "new_empty", "numel", "type_as", "requires_grad_", "is_contiguous",
    torch.reshape, torch.permute, torch.transpose, torch.unsqueeze, torch.squeeze, torch.flatten, torch.split,
    torch.chunk, torch.unbind, torch.arange, torch.ones, torch.zeros, torch.full, torch.empty, torch.rand,
    torch.randn, torch.ones_like, torch.zeros_like, torch.full_like, torch.empty_like, torch.rand_like,
    torch.randn_like, torch.tensor, torch.finfo, torch.iinfo, getattr,
})

#: leaf modules -> rule name understood by the tracer
MODULES: dict[type, str] = {
    nn.Linear: "linear", nn.Conv1d: "conv", nn.Conv2d: "conv", nn.Conv3d: "conv", nn.Embedding: "embedding",
    nn.LayerNorm: "ln", nn.Dropout: "dropout", nn.Dropout1d: "dropout", nn.Dropout2d: "dropout",
    nn.ReLU: "relu", nn.GELU: "gelu", nn.SiLU: "silu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid",
    nn.Softmax: "softmax", nn.Identity: "free", nn.Flatten: "free", nn.Unflatten: "free",
}
if hasattr(nn, "RMSNorm"):
    MODULES[nn.RMSNorm] = "rmsnorm"


def callable_name(target: object) -> str:
    """A readable name of an fx target (``torch.max_pool2d``, ``Tensor.foo``, ``nn.BatchNorm2d``)."""
    if isinstance(target, str):
        return f"Tensor.{target}"
    if isinstance(target, type):
        return f"{target.__module__.replace('torch.nn.modules', 'nn').split('.')[0]}.{target.__name__}"
    module = getattr(target, "__module__", None) or "torch"
    name = getattr(target, "__name__", repr(target))
    return f"{module.replace('torch.nn.functional', 'F').replace('_operator', 'operator')}.{name}"
