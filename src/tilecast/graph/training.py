"""Training expansion (docs/method.md §2): each forward node -> its backward ops and gradient accumulation.

One table, :data:`BACKWARD`, maps a node's ``grad`` rule to the ops its backward runs; gradient
accumulation ("acc") is one ``VECadd`` over every parameter tensor the node owns. Reading the
table top to bottom is reading the method:

=============  ==========================================================================
rule           backward ops
=============  ==========================================================================
linear         Linear(tokens, out, in) for dX and Linear(out, tokens, in) for dW
linear_frozen  Linear(tokens, out, in) for dX only (a frozen weight: LoRA's base)
bmm            BMM(b, m, k, n) and BMM(b, n, m, k)
add / addu     one MEM of the output per tensor input (2 / 1)
mul / div      the same VEC op once per tensor input (binary: 2; ``mulu``/``divu``: 1)
powu           powu, mul, mulu (``pow`` with a tensor exponent: pow, mul, mul)
tanh           mulu, addu
softmax        mul, softmax
ln, rmsnorm    mul
gelu, relu...  the same op once
embedding      2 MEM of the table (vocab x hidden)
copy           2 MEM of the inputs (dropout, getitem, where, contiguous, mean, ...)
rsqrt          1 MEM of input and output
attn           5 BMM(b h, m, d, n / 2): FlashAttention's backward recomputes the scores and
               runs five GEMMs over the causal half (2.5x the forward FLOPs)
mla_prefill    the same over MLA's decompressed heads: 3 BMM of the q/k features, 2 of the v features
rope, conv1d   the same op once (rope), twice (conv1d: input and weight gradients)
moe            the fused MoE layer twice (the grouped GEMMs for the input and for the weight gradients)
gdn_prefill    the chunked Gated DeltaNet twice (the chunked backward recomputes and runs the reverse scan)
a2a_dispatch   the expert-parallel all-to-all in the other direction: a dispatch's gradient is combined,
a2a_combine    a combine's gradient dispatched (DeepEP, normal mode)
allreduce      one all-reduce of the same size over the same GPUs (Megatron's conjugate collective)
=============  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Callable

from tilecast.graph.ops import Op, attr_op, comm_op, gemm, mem, vec
from tilecast.graph.tape import Node
from tilecast.tiles.ops import mem_per_output, ops_per_output


def _vec_ops(*names: str) -> Callable[[Node], list[tuple]]:
    return lambda n: [("vec", name, n.dims) for name in names]


def _same_op_per_input(n: Node) -> list[tuple]:
    return [("vec", n.op, n.dims)] * (2 if n.op in ("mul", "div", "sub") else 1)


def _mem_per_input(n: Node) -> list[tuple]:
    return [("mem", n.out_numel)] * (2 if n.op in ("add", "sub") else 1)


#: grad rule -> function(node) -> [("linear"|"bmm", dims) | ("vec", op, (b, h)) | ("mem", elements)]
BACKWARD: dict[str, Callable[[Node], list[tuple]]] = {
    "linear": lambda n: [("linear", (n.dims[0], n.dims[2], n.dims[1])),
                         ("linear", (n.dims[2], n.dims[0], n.dims[1]))],
    "linear_frozen": lambda n: [("linear", (n.dims[0], n.dims[2], n.dims[1]))],
    "bmm": lambda n: [("bmm", (n.dims[0], n.dims[1], n.dims[3], n.dims[2])),
                      ("bmm", (n.dims[0], n.dims[2], n.dims[1], n.dims[3]))],
    "conv": lambda n: [("conv", (n.dims[0], n.dims[1], n.dims[3], n.dims[2])),
                       ("conv", (n.dims[0], n.dims[3], n.dims[1], n.dims[2]))],
    "add": _mem_per_input, "addu": _mem_per_input, "sub": _mem_per_input, "subu": _mem_per_input,
    "mul": _same_op_per_input, "mulu": _same_op_per_input, "div": _same_op_per_input,
    "divu": _same_op_per_input,
    "powu": _vec_ops("powu", "mul", "mulu"),
    "tanh": _vec_ops("mulu", "addu"),
    "softmax": _vec_ops("mul", "softmax"),
    "ln": _vec_ops("mul"), "rmsnorm": _vec_ops("mul"),
    "pow": _vec_ops("pow", "mul", "mul"),
    "gelu": _vec_ops("gelu"), "relu": _vec_ops("relu"), "silu": _vec_ops("silu"),
    "sigmoid": _vec_ops("sigmoid"), "neg": _vec_ops("neg"),
    "embedding": lambda n: [("mem", n.dims[0] * n.dims[1])] * 2,
    "copy": lambda n: [("mem", sum(n.in_numels))] * 2,
    "rsqrt": lambda n: [("mem", sum(n.in_numels) + n.out_numel)],
    "attn": lambda n: [("bmm", (n.dims[0] * n.dims[4], n.dims[1], n.dims[3], max(n.dims[2] // 2, 1)))] * 5,
    "mla_prefill": lambda n: (
        [("bmm", (n.dims[0] * n.dims[4], n.dims[1], n.dims[3], max(n.dims[2] // 2, 1)))] * 3
        + [("bmm", (n.dims[0] * n.dims[4], n.dims[1], dict(n.attrs)["v"], max(n.dims[2] // 2, 1)))] * 2),
    "rope": _vec_ops("rope"),
    "conv1d": _vec_ops("conv1d", "conv1d"),
    "moe": lambda n: [("attr", "moe", "moe")] * 2,
    "gdn_prefill": lambda n: [("attr", "gdn", "gdn_prefill")] * 2,
    "a2a_dispatch": lambda n: [("attr", "a2a", "a2a_dispatch")],
    "a2a_combine": lambda n: [("attr", "a2a", "a2a_combine")],
    "allreduce": lambda n: [("comm", "allreduce", n.dims[0])],
    "none": lambda n: [],
}

#: ``attr`` items whose backward runs in another mode: an all-to-all's gradient is a prompt-sized one (DeepEP
#: normal mode), whatever the forward's
_BACKWARD_ATTRS = {"a2a": {"mode": "normal"}}


def backward_ops(node: Node, name: str | None = None) -> list[Op]:
    """The backward ops of one forward node (phase ``bw``, the node's section)."""
    try:
        rule = BACKWARD[node.grad]
    except KeyError:
        raise KeyError(f"node {node.name!r}: no backward rule {node.grad!r}; known: {', '.join(BACKWARD)}") \
            from None
    kw = {"section": node.section, "name": name or f"{node.name}.grad"}
    out = []
    for item in rule(node):
        if item[0] == "attr":
            attrs = tuple(sorted({**dict(node.attrs), **_BACKWARD_ATTRS.get(item[1], {})}.items()))
            out.append(attr_op("bw", item[1], item[2], _six(node.dims), attrs, **kw))
        elif item[0] == "comm":
            out.append(comm_op("bw", item[1], item[2], node.section, kw["name"], attrs=node.attrs))
        elif item[0] == "mem":
            out.append(mem("bw", item[1], **kw))
        elif item[0] == "vec":
            b, h = item[2]
            out.append(vec("bw", item[1], b, h, mem_per_output(item[1]), ops_per_output(item[1]), **kw))
        else:
            out.append(gemm("bw", item[0], item[1], **kw))
    return out


def _six(dims: tuple[int, ...]) -> tuple[int, ...]:
    """An attribute kind's node dims as (b, m, n, k, h, hkv)."""
    return tuple(dims) + (0,) * (6 - len(dims))


def accumulation_ops(node: Node) -> list[Op]:
    """Gradient accumulation: one ``VECadd`` of each parameter tensor the node owns (phase ``acc``)."""
    return [vec("acc", "add", 1, p, mem_per_output("add"), 1.0, section=node.section,
                name=f"{node.name}.acc") for p in node.params]
