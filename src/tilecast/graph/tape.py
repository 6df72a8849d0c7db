"""The builders' dataflow record: a :class:`Tape` of forward :class:`Node` s in execution order.

A builder walks the model once per layer (layers are unrolled, so fusion sees the true producer /
consumer edges at block boundaries) and records one node per costed kernel. Each node keeps what
later passes need: its inputs (producers and element counts) for fusion and memory-per-output,
the rule its backward follows (``grad``, a key of :data:`tilecast.graph.training.BACKWARD`) and the
parameter tensors it owns (for gradient accumulation and the memory footprint).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

EXTERNAL = -1


@dataclass(frozen=True)
class Tensor:
    """A value flowing between nodes: its producer (``EXTERNAL`` for inputs, weights, buffers) and size."""

    node: int
    numel: int


@dataclass(frozen=True)
class Node:
    """One forward kernel.

    ``dims``: (m, n, k) linear, (b, m, n, k) bmm/conv, (b, h) vec, (vocab, h) embedding, () mem
    (mem and embedding are costed by their input and output element counts).
    ``kind`` is an :class:`~tilecast.graph.ops.Op` kind, plus ``embedding`` (a gather costed as mem).
    """

    id: int
    name: str
    kind: str
    op: str
    dims: tuple[int, ...]
    inputs: tuple[Tensor, ...]
    out_numel: int
    grad: str
    params: tuple[int, ...] = ()
    section: str = "layer"
    layer: int = -1
    saved: bool = False  # mem nodes: a mask kept for backward (dropout), one byte per element
    alias: bool = False  # mem nodes: the output is a view of the first input (no memory of its own)
    attrs: tuple = ()  # family-specific dims of the op (sorted name / value pairs, graph.ops.make_attrs)

    @property
    def in_numels(self) -> tuple[int, ...]:
        return tuple([t.numel for t in self.inputs])

    @property
    def signature(self) -> tuple:
        """Everything its ops depend on (not its position, block or producers): blocks repeat signatures."""
        return (self.kind, self.op, self.dims, tuple([t.numel for t in self.inputs]), self.out_numel, self.grad,
                self.params, self.section, self.name, self.attrs)


@dataclass
class Tape:
    """Records nodes; ``section``/``layer`` tag everything recorded until they change."""

    nodes: list[Node] = field(default_factory=list)
    section: str = "prologue"
    layer: int = -1
    param_numels: list[int] = field(default_factory=list)  # + free lookups' tables, - tied duplicates
    held: list[int] = field(default_factory=list)  # nodes whose outputs live to the end of the pass


    def at(self, section: str, layer: int = -1) -> None:
        """Tag the following nodes with ``section`` (and block index ``layer``)."""
        self.section, self.layer = section, layer

    @staticmethod
    def ext(numel: int) -> Tensor:
        """An external tensor (input, weight, buffer, scalar) of ``numel`` elements."""
        return Tensor(EXTERNAL, int(numel))

    def add(self, name: str, kind: str, op: str, dims: Sequence[int], inputs: Sequence[Tensor],
             out_numel: int, grad: str, params: Sequence[int] = (), saved: bool = False,
             alias: bool = False, attrs: tuple = ()) -> Tensor:
        node = Node(len(self.nodes), name, kind, op, tuple(int(d) for d in dims), tuple(inputs),
                    int(out_numel), grad, tuple(int(p) for p in params), self.section, self.layer, saved, alias,
                    tuple(attrs))
        self.nodes.append(node)
        return Tensor(node.id, node.out_numel)

    def linear(self, name: str, x: Tensor, m: int, n: int, k: int, bias: bool = True) -> Tensor:
        """``x [m, n] @ W [n, k] (+ b)``: a Linear over ``m`` tokens; owns ``W`` (and ``b``)."""
        params = (n * k, k) if bias else (n * k,)
        return self.add(name, "linear", "linear", (m, n, k), [x], m * k, "linear", params)

    def matmul(self, name: str, a: Tensor, b_: Tensor, b: int, m: int, n: int, k: int) -> Tensor:
        """Batched ``[b, m, n] @ [b, n, k]`` of two activations."""
        return self.add(name, "bmm", "bmm", (b, m, n, k), [a, b_], b * m * k, "bmm")

    def vec(self, name: str, op: str, inputs: Sequence[Tensor], b: int, h: int, grad: str | None = None,
            params: Sequence[int] = ()) -> Tensor:
        """Vector op ``op`` producing ``b`` rows of ``h``; backward by ``grad`` (default: ``op``)."""
        return self.add(name, "vec", op, (b, h), inputs, b * h, grad or op, params)

    def attention(self, name: str, q: Tensor, k: Tensor, v: Tensor, b: int, q_len: int, kv_len: int, heads: int,
                  kv_heads: int, head_dim: int, window: int = 0) -> Tensor:
        """Fused causal attention (FlashAttention): ``b`` sequences, ``q_len`` queries over ``kv_len`` keys,
        GQA with ``kv_heads``; writes only its ``b x q_len x heads x head_dim`` output. ``window`` > 0: a sliding
        window (a decode step then reads at most ``window`` keys; a prompt carries the window as an attribute)."""
        op = "attn_decode" if q_len == 1 and kv_len > 1 else "attn_prefill"
        if window and q_len == 1:
            kv_len, window = min(kv_len, window), 0
        attrs = (("window", int(window)),) if window and kv_len > window else ()
        return self.add(name, "attn", op, (b, q_len, kv_len, head_dim, heads, kv_heads), [q, k, v],
                        b * q_len * heads * head_dim, "attn", attrs=attrs)

    def special(self, name: str, kind: str, op: str, dims: Sequence[int], inputs: Sequence[Tensor], out_numel: int,
                attrs: tuple, params: Sequence[int] = (), grad: str | None = None) -> Tensor:
        """An op of :data:`tilecast.graph.ops.ATTR_KINDS` (fused MoE, MLA, all-to-all, Gated DeltaNet): ``dims``
        (b, m, n, k, h, hkv) and its ``attrs``; backward by ``grad`` (default: ``op``)."""
        return self.add(name, kind, op, dims, inputs, out_numel, grad or op, params, attrs=attrs)

    def comm(self, name: str, kind: str, x: Tensor, elements: int, group: int, grad: str = "none") -> Tensor:
        """A collective (``allreduce``) of ``elements`` over ``group`` GPUs, in place (the result is ``x``'s
        storage); backward by ``grad`` (``allreduce``: the conjugate one, ``none``: nothing)."""
        return self.add(name, kind, kind, (int(elements),), [x], x.numel, grad, alias=True,
                        attrs=(("group", int(group)),)) if elements and group > 1 else x

    def ln(self, name: str, x: Tensor, rows: int, h: int) -> Tensor:
        """LayerNorm over rows of ``h``; owns weight and bias."""
        return self.vec(name, "ln", [x], rows, h, params=(h, h))

    def mem(self, name: str, inputs: Sequence[Tensor], out_numel: int, grad: str = "copy",
            saved: bool = False, alias: bool = False) -> Tensor:
        """Data movement (slice, mask select, dropout in training, contiguous copy ...); ``alias``: the
        eager module returns a view of its first input (costed as the reference graphs cost it, but no
        memory of its own)."""
        return self.add(name, "mem", "mem", (), inputs, out_numel, grad, saved=saved, alias=alias)

    def embedding(self, name: str, ids: Tensor, vocab: int, h: int, owns: bool = True) -> Tensor:
        """Row gather from a ``vocab x h`` table for ``ids.numel`` ids; ``owns`` the table unless it is
        another gather's (a second use of a shared table accumulates no second gradient)."""
        return self.add(name, "embedding", "mem", (vocab, h), [ids], ids.numel * h, "embedding",
                         (vocab * h,) if owns else ())

    def hold(self, *tensors: Tensor) -> None:
        """Outputs the pass returns (logits, the key / value cache of ``use_cache``): their producers'
        outputs stay allocated to the end (a view keeps its whole base tensor). Costs no kernel."""
        self.held.extend(t.node for t in tensors if t.node != EXTERNAL and t.node not in self.held)

    def free_params(self, numel: int) -> None:
        """Parameters whose use costs nothing in the graph (position / token-type tables)."""
        self.param_numels.append(int(numel))

    def tied_params(self, numel: int) -> None:
        """A tensor two nodes own (tied LM head and embedding): counted once in :attr:`num_params`."""
        self.param_numels.append(-int(numel))

    def consumers(self) -> list[list[int]]:
        """For each node, the ids of the nodes that read its output (in order, repeats removed)."""
        cons: list[list[int]] = [[] for _ in self.nodes]
        for node in self.nodes:
            for t in node.inputs:
                if t.node != EXTERNAL and node.id not in cons[t.node]:
                    cons[t.node].append(node.id)
        return cons

    @property
    def num_params(self) -> int:
        """Parameter elements: owned by nodes, plus free lookups' tables, minus tied duplicates."""
        return sum(sum(n.params) for n in self.nodes) + sum(self.param_numels)
