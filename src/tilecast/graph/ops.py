"""Operators of a workload graph: :class:`Op` (one kernel shape, counted) and :class:`OpGraph`.

Dims follow the data's kernel tables so an op row maps 1:1 to a kernel-predictor row:

- ``linear``: ``B=1, M=m`` (tokens), ``N=n`` (in features, reduced), ``K=k`` (out features)
- ``bmm``: ``[b, m, n] @ [b, n, k]`` (``n`` reduced); ``conv`` uses the same implicit-GEMM dims
  (``b`` groups, ``m`` = batch x output pixels, ``n`` = in channels x kernel area, ``k`` = out channels)
- ``vec``: ``op`` over ``b`` rows of ``h`` elements (``softmax``/``ln`` normalise rows of length ``h``)
- ``attn``: fused attention (``attn_prefill`` / ``attn_decode``) of ``b`` sequences, ``m`` query tokens
  over ``n`` key/value tokens, head dim ``k``, ``h`` query heads and ``hkv`` KV heads
- ``mem`` / ``allreduce`` / ``sendrecv``: ``h`` elements moved (a communication op's ``group`` attribute: the
  GPUs it spans, where not every GPU of the graph)
- ``moe``: a fused mixture-of-experts layer over ``m`` tokens, ``n`` hidden and ``k`` expert features (before
  the moe_tp split); ``mla`` (``mla_prefill`` / ``mla_decode``): latent attention of ``b`` sequences, ``m`` new
  tokens over ``n``, ``h`` heads on this GPU, ``k`` query/key features per head; ``a2a`` (``a2a_dispatch`` /
  ``a2a_combine``): expert-parallel all-to-all of ``m`` tokens of ``n`` features; ``gdn`` (``gdn_prefill`` /
  ``gdn_decode``): Gated DeltaNet of ``b`` sequences of ``m`` tokens, ``h`` value heads, ``hkv`` key heads,
  ``k`` key features. Their other dims are ``attrs`` (:data:`ATTR_KINDS`; work in :mod:`tilecast.graph.work`)

``dtype`` sets the bytes per element (:data:`tilecast.tiles.dtypes.DTYPE_BYTES`; fp32 as the NeuSight
data were measured); a vector op's ``mem_per_o`` is already in its dtype's bytes. ``attrs`` holds
family-specific dims as sorted ``(name, value)`` pairs: part of the op's key, spread into kernel-row columns
(:func:`encode_attrs` is their text in an op frame's ``attrs`` column; empty for the classic kinds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from tilecast.graph import work
from tilecast.tiles.attention import attention_bytes, attention_flops
from tilecast.tiles.dtypes import DTYPE_BYTES

BYTES_PER_ELEMENT = 4  # fp32, the element size graphs are lowered in before a dtype is applied
PHASES = ("fw", "bw", "acc")
#: kinds whose dims go beyond (b, m, n, k, h, hkv): the rest are in ``attrs``
ATTR_KINDS = ("moe", "mla", "a2a", "gdn")
KINDS = ("linear", "bmm", "conv", "vec", "attn", "mem", "allreduce", "sendrecv", *ATTR_KINDS)
GEMM_KINDS = frozenset({"linear", "bmm", "conv"})
SECTIONS = ("prologue", "layer", "epilogue")
COLUMNS = ["phase", "kind", "op", "dtype", "b", "m", "n", "k", "h", "hkv", "attrs", "count", "flops", "bytes",
           "total_flops", "total_bytes", "mem_per_o", "ops_per_o", "section", "name"]
#: ``(name, value)`` pairs, sorted by name: an op's family-specific dims
Attrs = tuple[tuple[str, Any], ...]


def make_attrs(**values: Any) -> Attrs:
    """Attributes as an op keeps them: sorted ``(name, value)`` pairs (ints, bools, strings)."""
    return tuple(sorted(values.items()))


def encode_attrs(attrs: Attrs) -> str:
    """``attrs`` as one string (``experts=256;gated=true;topk=8``): the op frame's ``attrs`` column."""
    return ";".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in attrs)


def decode_attrs(text: str) -> dict[str, Any]:
    """The attributes of an ``attrs`` string (integers, booleans and strings come back as such)."""
    out: dict[str, Any] = {}
    for part in filter(None, str(text).split(";")):
        key, _, value = part.partition("=")
        out[key] = (value == "true" if value in ("true", "false")
                    else int(value) if value.lstrip("-").isdigit() else value)
    return out


@dataclass(frozen=True)
class Op:
    """One kernel shape in one phase; ``count`` instances of it run. ``flops``/``bytes`` are per instance."""

    phase: str
    kind: str
    op: str
    b: int = 1
    m: int = 0
    n: int = 0
    k: int = 0
    h: int = 0
    count: int = 1
    section: str = "layer"
    name: str = ""
    mem_per_o: float = 0.0  # vec: bytes moved per output element (at ``dtype``)
    ops_per_o: float = 0.0  # vec: flops per output element
    dtype: str = "fp32"
    hkv: int = 0  # attn: key/value heads
    attrs: Attrs = ()  # family-specific dims (sorted name / value pairs), see the module docstring

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"op phase must be one of {PHASES}, got {self.phase!r}")
        if self.kind not in KINDS:
            raise ValueError(f"op kind must be one of {KINDS}, got {self.kind!r}")
        if self.section not in SECTIONS:
            raise ValueError(f"op section must be one of {SECTIONS}, got {self.section!r}")
        if self.count < 0:
            raise ValueError(f"op count must be >= 0, got {self.count}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"op dtype must be one of {tuple(DTYPE_BYTES)}, got {self.dtype!r}")

    @property
    def key(self) -> tuple:
        """Identity for merging: everything but ``count`` and ``name``."""
        return (self.phase, self.kind, self.op, self.b, self.m, self.n, self.k, self.h, self.section,
                round(self.mem_per_o, 9), round(self.ops_per_o, 9), self.dtype, self.hkv, self.attrs)

    def attr(self, name: str, default: Any = None) -> Any:
        """The value of attribute ``name`` (``default`` where the op has none)."""
        return next((v for k, v in self.attrs if k == name), default)

    @property
    def dims(self) -> tuple[int, ...]:
        """Shape in the data's convention: (M, N, K) linear, (B, M, N, K) bmm/conv, (B, H) vec, (H,) others."""
        if self.kind == "linear":
            return (self.m, self.n, self.k)
        if self.kind in ("bmm", "conv"):
            return (self.b, self.m, self.n, self.k)
        if self.kind in ("attn", *ATTR_KINDS):
            return (self.b, self.m, self.n, self.k, self.h, self.hkv)
        if self.kind == "vec":
            return (self.b, self.h)
        return (self.h,)

    @property
    def flops(self) -> float:
        """Floating-point operations of one instance."""
        if self.kind in GEMM_KINDS:
            return 2.0 * self.b * self.m * self.n * self.k
        if self.kind == "vec":
            return self.ops_per_o * self.b * self.h
        if self.kind == "attn":
            return float(attention_flops(self.b, self.m, self.n, self.k, self.h, self.attr("window", 0)))
        if self.kind in ATTR_KINDS:
            return work.attr_flops_bytes(self.kind, self.op, self.dtype, self.dims, self.attrs)[0]
        return 0.0

    @property
    def bytes(self) -> float:
        """Bytes moved by one instance (GEMM: both operands and the result once)."""
        size = DTYPE_BYTES[self.dtype]
        if self.kind in GEMM_KINDS:
            return float(size * self.b * (self.m * self.n + self.n * self.k + self.m * self.k))
        if self.kind == "vec":
            return self.mem_per_o * self.b * self.h
        if self.kind == "attn":
            return float(attention_bytes(self.b, self.m, self.n, self.k, self.h, self.hkv, size, size,
                                         self.attr("window", 0)))
        if self.kind in ATTR_KINDS:
            return work.attr_flops_bytes(self.kind, self.op, self.dtype, self.dims, self.attrs)[1]
        return float(size * self.h)




def gemm(phase: str, kind: str, dims: tuple[int, ...], **kw: Any) -> Op:
    """A linear (``dims`` = M, N, K) or bmm/conv (``dims`` = B, M, N, K) op."""
    if kind == "linear":
        m, n, k = dims
        return Op(phase, "linear", "linear", 1, m, n, k, **kw)
    b, m, n, k = dims
    return Op(phase, kind, kind, b, m, n, k, **kw)


def vec(phase: str, op: str, b: int, h: int, mem_per_o: float, ops_per_o: float, **kw: Any) -> Op:
    """A vector op over ``b`` rows of ``h`` elements."""
    return Op(phase, "vec", op, b, 0, 0, 0, h, mem_per_o=mem_per_o, ops_per_o=ops_per_o, **kw)


def mem(phase: str, elements: int, **kw: Any) -> Op:
    """Pure data movement of ``elements`` fp32 values (read + write counted in ``elements``)."""
    return Op(phase, "mem", "mem", 1, 0, 0, 0, elements, mem_per_o=float(BYTES_PER_ELEMENT), **kw)


def attn(phase: str, op: str, dims: tuple[int, ...], **kw: Any) -> Op:
    """A fused attention op; ``dims`` = (b, m, n, k, h, hkv) as in :attr:`Op.dims` (``attrs``: its ``window``)."""
    b, m, n, k, h, hkv = dims
    return Op(phase, "attn", op, b, m, n, k, h, hkv=hkv, **kw)


def attr_op(phase: str, kind: str, op: str, dims: tuple[int, ...], attrs: Attrs, **kw: Any) -> Op:
    """An op of :data:`ATTR_KINDS`; ``dims`` = (b, m, n, k, h, hkv) as in :attr:`Op.dims`."""
    b, m, n, k, h, hkv = dims
    return Op(phase, kind, op, b, m, n, k, h, hkv=hkv, attrs=attrs, **kw)


def comm_op(phase: str, kind: str, elements: int, section: str, name: str, count: int = 1, attrs: Attrs = ()) -> Op:
    """An ``allreduce`` / ``sendrecv`` of ``elements`` fp32 values (``attrs``: its ``group`` where it spans fewer
    GPUs than the graph's degree)."""
    return Op(phase, kind, kind, 1, 0, 0, 0, int(elements), count=count, section=section, name=name,
              mem_per_o=4.0, attrs=attrs)


def with_dtype(op: Op, dtype: str) -> Op:
    """``op`` (lowered at fp32) run in ``dtype``: bytes per element, and a vector op's bytes per output."""
    if dtype == op.dtype:
        return op
    scale = DTYPE_BYTES[dtype] / DTYPE_BYTES[op.dtype]
    return replace(op, dtype=dtype, mem_per_o=op.mem_per_o * scale)


#: merged ops: :attr:`Op.key` -> [first op of that key, summed count, distinct names in order]
Tally = dict[tuple, list]


def tally_ops(ops: Iterable[Op]) -> Tally:
    """Group ops by :attr:`Op.key` (ops with ``count == 0`` dropped), summing counts and collecting names.

    The same :class:`Op` object met again (lowering memoises repeated kernels) is keyed once.
    """
    out: Tally = {}
    key_of: dict[int, tuple[Op, tuple]] = {}  # id -> (op, key); holding the op keeps its id unique
    for op in ops:
        if op.count == 0:
            continue
        seen = key_of.get(id(op))
        if seen is None:
            seen = key_of[id(op)] = (op, op.key)
        key = seen[1]
        entry = out.get(key)
        if entry is None:
            out[key] = [op, op.count, [op.name] if op.name else []]
            continue
        entry[1] += op.count
        if op.name and op.name not in entry[2]:
            entry[2].append(op.name)
    return out


def ops_of_tally(tally: Tally) -> tuple[Op, ...]:
    """One op per key of ``tally`` (first-seen order) with the summed count; names of merged origins
    joined (the first three, then how many more)."""
    out = []
    for op, count, parts in tally.values():
        label = ", ".join(parts[:3]) + (f" (+{len(parts) - 3})" if len(parts) > 3 else "")
        out.append(op if (count == op.count and label == op.name) else replace(op, count=count, name=label))
    return tuple(out)


def merge_ops(ops: Iterable[Op]) -> tuple[Op, ...]:
    """Merge ops with the same :attr:`Op.key`, summing counts; names of merged origins are joined."""
    return ops_of_tally(tally_ops(ops))


@dataclass(frozen=True)
class OpGraph:
    """The operator inventory of one workload: distinct ops with multiplicities.

    ``num_layers`` is the number of repeated blocks (``section == "layer"`` ops summed over all of
    them); ``meta`` carries the workload description (model, batch, seq_len, mode, fused).
    """

    ops: tuple[Op, ...]
    num_layers: int = 1
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_ops(cls, ops: Iterable[Op], num_layers: int = 1, **meta: Any) -> OpGraph:
        """Build a graph, merging identical ops."""
        return cls(merge_ops(ops), num_layers, dict(meta))

    def select(self, phase: str | None = None, kind: str | Iterable[str] | None = None,
               section: str | None = None) -> OpGraph:
        """The sub-graph of ops matching every given filter."""
        kinds = {kind} if isinstance(kind, str) else (set(kind) if kind is not None else None)
        ops = tuple(o for o in self.ops if (phase is None or o.phase == phase)
                    and (kinds is None or o.kind in kinds) and (section is None or o.section == section))
        return OpGraph(ops, self.num_layers, dict(self.meta))

    def total_flops(self, phase: str | None = None, kind: str | Iterable[str] | None = None,
                    section: str | None = None) -> float:
        """FLOPs summed over all instances (optionally of one phase / kind / section)."""
        return float(sum(o.count * o.flops for o in self.select(phase, kind, section).ops))

    def total_bytes(self, phase: str | None = None, kind: str | Iterable[str] | None = None,
                    section: str | None = None) -> float:
        """Bytes moved summed over all instances (optionally of one phase / kind / section)."""
        return float(sum(o.count * o.bytes for o in self.select(phase, kind, section).ops))

    def count(self, phase: str | None = None, kind: str | Iterable[str] | None = None) -> int:
        """Number of op instances (kernel launches)."""
        return sum(o.count for o in self.select(phase, kind).ops)

    def to_frame(self) -> pd.DataFrame:
        """One row per distinct op: the columns of :data:`COLUMNS`."""
        rows = [{"phase": o.phase, "kind": o.kind, "op": o.op, "dtype": o.dtype, "b": o.b, "m": o.m, "n": o.n,
                 "k": o.k, "h": o.h, "hkv": o.hkv, "attrs": encode_attrs(o.attrs), "count": o.count,
                 "flops": o.flops, "bytes": o.bytes,
                 "total_flops": o.count * o.flops, "total_bytes": o.count * o.bytes,
                 "mem_per_o": o.mem_per_o, "ops_per_o": o.ops_per_o, "section": o.section, "name": o.name}
                for o in self.ops]
        return pd.DataFrame(rows, columns=COLUMNS)

    def __len__(self) -> int:
        return len(self.ops)
