"""Reader for the traced reference graphs (``data/neusight/graphs``): a pure DataFrame -> OpGraph parser.

A reference graph has one row per torch.fx node (``Name, OpName, FwOps, BwOps, AccOps, Prev, Next,
InputShapes, OutputShape``); ``FwOps`` etc. are Python literals ``[[kind, args], ...]`` with kinds
``Linear (M,N,K)``, ``BMM (B,M,N,K)``, ``VEC<op> (B,H)``, ``MEM (shape, ...)``, ``ALLREDUCE[_ASYNC] (n,)``
and ``SENDRECV (n,)``. Dense models were traced one layer deep: the layer's rows count ``num_layers``
times (docs/method.md §2); the layer is the rows from the first to the last node named after block 0
(``h_0``, ``layer_0``, ``layers_0``, ``block_0``) plus the residual add / dropout / view rows right
after it. Switch and fused graphs are full depth: every row counts once. Fused rows
(``OpName == "fused"``) become one vector kernel, as :mod:`tilecast.graph.fusion` costs them.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from tilecast.graph.ops import BYTES_PER_ELEMENT, Op, OpGraph, gemm, mem, vec
from tilecast.tiles.ops import mem_per_output, ops_per_output

_LAYER_PATTERNS = (re.compile(r"(?:^|_)block_(\d+)(?:_|$)"), re.compile(r"(?:^|_)layers?_(\d+)(?:_|$)"),
                   re.compile(r"(?:^|_)h_(\d+)(?:_|$)"))
_LAYER_TAIL_OPNAMES = frozenset({"misc", "VECadd", "dropout"})  # a 1-layer trace's residual tail


def _literal(cell: object) -> tuple:
    if not isinstance(cell, str) or cell in ("", "[]"):
        return ()
    return _parse(cell)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> tuple:
    """A literal cell as a tuple (cached: the same cells repeat across rows and graphs)."""
    return tuple(ast.literal_eval(text))


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def _layer_index(name: str) -> int | None:
    for pattern in _LAYER_PATTERNS:
        m = pattern.search(name)
        if m:
            return int(m.group(1))
    return None


def _sections(df: pd.DataFrame) -> tuple[list[str], bool]:
    """Section of every row and whether the trace is full depth (more than layer 0 present)."""
    index = [_layer_index(str(n)) for n in df["Name"]]
    rows = [i for i, x in enumerate(index) if x is not None]
    if not rows:
        return ["prologue"] * len(df), True
    full_depth = max(x for x in index if x is not None) > 0
    first, last = rows[0], rows[-1]
    if not full_depth:
        opnames = list(df["OpName"])
        while last + 1 < len(df) and index[last + 1] is None and opnames[last + 1] in _LAYER_TAIL_OPNAMES:
            last += 1
    return ["prologue" if i < first else "epilogue" if i > last else "layer" for i in range(len(df))], full_depth


def _vec_mem_per_o(op: str, inputs: list, output: object) -> float:
    """Fw vector op: 4 x (input + output elements) / output elements, from the row's shapes."""
    if not inputs or not output:
        return mem_per_output(op)
    out = _numel(output)
    return BYTES_PER_ELEMENT * (sum(_numel(s) for s in inputs) + out) / out if out else mem_per_output(op)


def _op(phase: str, kind: str, args: Sequence, mpo: float | None, **kw) -> Op:
    if kind == "Linear":
        return gemm(phase, "linear", tuple(int(a) for a in args), **kw)
    if kind == "BMM":
        return gemm(phase, "bmm", tuple(int(a) for a in args), **kw)
    if kind.startswith("VEC"):
        name = kind[3:]
        b, h = (int(a) for a in args)
        return vec(phase, name, b, h, mem_per_output(name) if mpo is None else mpo, ops_per_output(name), **kw)
    if kind == "MEM":
        return mem(phase, sum(_numel(s) for s in args), **kw)
    if kind.startswith("ALLREDUCE") or kind == "SENDRECV":
        base = "allreduce" if kind.startswith("ALLREDUCE") else "sendrecv"
        return Op(phase, base, kind.lower(), h=int(args[0]), mem_per_o=float(BYTES_PER_ELEMENT), **kw)
    raise ValueError(f"reference op kind {kind!r} is not known")


def _batched_matmul(fw: list, inputs: list, output: object) -> tuple[int, int, int, int] | None:
    """(B, M, N, K) of a ``Linear(B*M, N, K)``-labelled row that multiplies two batched activations."""
    if [k for k, _ in fw] != ["Linear"] or len(inputs) != 2 or not all(len(s) >= 3 for s in inputs) \
            or not output or len(output) < 3:
        return None
    rows, n, k = (int(a) for a in fw[0][1])
    m = int(output[-2])
    if k != int(output[-1]) or rows % m:
        return None
    return rows // m, m, n, k


def _row_ops(row: dict, section: str, canonical_matmul: bool) -> list[Op]:
    kw = {"section": section, "name": str(row["Name"])}
    fw, bw, acc = _literal(row["FwOps"]), _literal(row["BwOps"]), _literal(row["AccOps"])
    if not (fw or bw or acc):
        return []
    inputs = _literal(row.get("InputShapes", "[]"))
    shape = row.get("OutputShape")
    output = _parse(f"({shape},)")[0] if isinstance(shape, str) and shape else None
    out: list[Op] = []
    bmm = _batched_matmul(fw, inputs, output) if canonical_matmul and row["OpName"] == "Linear" else None
    if bmm is not None:  # some q @ k^T were labelled Linear(B*M, N, K): read back as the BMM they are
        b, m, n, k = bmm
        grads = [gemm("bw", "bmm", (b, m, k, n), **kw), gemm("bw", "bmm", (b, n, m, k), **kw)] if bw else []
        return [gemm("fw", "bmm", bmm, **kw), *grads]
    vecs = [(k, a) for k, a in fw if k.startswith("VEC")]
    if row["OpName"] == "fused" and vecs:
        for kind, args in fw:
            if not kind.startswith("VEC"):
                out.append(_op("fw", kind, args, None, **kw))
        last = vecs[-1][0][3:]
        b, h = (int(a) for a in vecs[-1][1])
        out.append(vec("fw", last, b, h, _vec_mem_per_o(last, inputs, output),
                       sum(ops_per_output(k[3:]) for k, _ in vecs), **kw))
    else:
        for kind, args in fw:
            mpo = _vec_mem_per_o(kind[3:], inputs, output) if kind.startswith("VEC") else None
            out.append(_op("fw", kind, args, mpo, **kw))
    out += [_op("bw", kind, args, None, **kw) for kind, args in bw]
    out += [_op("acc", kind, args, None, **kw) for kind, args in acc]
    return out


def parse_reference(df: pd.DataFrame, num_layers: int = 1, canonical_matmul: bool = True,
                    **meta: object) -> OpGraph:
    """The op inventory of a reference graph.

    ``num_layers``: how often a one-layer trace's layer rows count (ignored for full-depth traces).
    ``canonical_matmul``: read activation x activation matmuls the trace labelled ``Linear`` back as
    the BMM they are (their backward rebuilt as a BMM's, no gradient accumulation); see
    ``docs/graph-differences.md``.
    """
    missing = {"Name", "OpName", "FwOps", "BwOps", "AccOps"} - set(df.columns)
    if missing:
        raise ValueError(f"not a reference graph: missing columns {sorted(missing)}")
    sections, full_depth = _sections(df)
    reps = 1 if full_depth else num_layers
    ops: list[Op] = []
    columns = [c for c in df.columns if c in ("Name", "OpName", "FwOps", "BwOps", "AccOps", "InputShapes",
                                              "OutputShape")]
    records = (dict(zip(columns, values, strict=True)) for values in df[columns].itertuples(False, None))
    for row, section in zip(records, sections, strict=True):
        for op in _row_ops(row, section, canonical_matmul):
            ops.append(op if section != "layer" or reps == 1 else replace(op, count=op.count * reps))
    return OpGraph.from_ops(ops, num_layers=num_layers, full_depth=full_depth, **meta)
