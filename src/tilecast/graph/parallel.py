"""Multi-GPU execution as graph transforms: data, tensor and pipeline parallel, any degree (docs/method.md §9).

A :class:`Parallel` names the scheme as the labels do (``dp4``, ``tp4``, ``pp4_1``: pipeline with one
micro-batch, ``pp4_4``: four). Each GPU runs the graph of its share of the work plus the
communication it needs, as ``allreduce`` / ``sendrecv`` ops of ``h`` fp32 elements:

- **dp** (replicated model): the graph of ``batch / p`` samples; in training one gradient
  all-reduce per parameter tensor (the ``acc`` ops name them), in the backward phase; they overlap
  the backward pass (the timing lives in :mod:`tilecast.forecast.schedule`).
- **tp** (Megatron): derived from the dataflow of the recorded forward :class:`Tape`, not from names.
  Inside each layer a linear that reads a replicated tensor is column-parallel (out features / p),
  one that reads a sharded tensor is row-parallel (in features / p) and is followed by an
  all-reduce of its output; attention maths and activations between them run on 1/p of the heads
  or features. In training every replicated tensor that feeds column-parallel linears needs an
  all-reduce of its gradient. The word embedding and the LM head are vocab-parallel (ceil(V / p)
  rows; the embedding's output is all-reduced). Norms, residuals and dropouts on the residual
  stream stay replicated.
- **pp** (GPipe): the graph of one micro-batch (``batch / microbatches``); one send-recv of the
  micro-batch's hidden states per stage boundary and direction. Which layers sit on which stage
  is the schedule's business (prologue on the first stage, epilogue on the last).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from tilecast.graph.build import apply_dtype, build_graph, layer_ops, num_blocks
from tilecast.graph.layout_graph import LAYOUT_FAMILIES, build_layout_graph
from tilecast.graph.lower import lower
from tilecast.graph.ops import Op, OpGraph, comm_op
from tilecast.graph.tape import EXTERNAL, Node, Tape, Tensor
from tilecast.specs import ModelSpec, get_model
from tilecast.specs.layout import Layout, parse_layout
from tilecast.specs.workload import Workload, WorkloadError

KINDS = ("dp", "tp", "pp")
_TAG = re.compile(r"^(?P<kind>[a-z]+)(?P<degree>\d+)(?:_(?P<micro>\d+))?$")
TAG_FORMAT = "dp<p> | tp<p> | pp<p>[_<micro-batches>]"


class ParallelismError(WorkloadError):
    """A parallel scheme that cannot run this workload (names the scheme and the value that breaks it)."""


@dataclass(frozen=True)
class Parallel:
    """A multi-GPU scheme: ``kind`` dp | tp | pp over ``degree`` GPUs; pp with ``microbatches``."""

    kind: str
    degree: int
    microbatches: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParallelismError(f"parallel kind {self.kind!r} is not one of {', '.join(KINDS)}")
        for name in ("degree", "microbatches"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ParallelismError(f"parallel {name} must be a positive integer, got {value!r}")
        if self.kind != "pp" and self.microbatches != 1:
            raise ParallelismError(f"micro-batches apply to pipeline parallel only, got {self.kind} with "
                                   f"{self.microbatches}")

    @property
    def tag(self) -> str:
        """The labels' spelling: ``dp4``, ``tp4``, ``pp4_1``."""
        return f"{self.kind}{self.degree}_{self.microbatches}" if self.kind == "pp" else f"{self.kind}{self.degree}"

    @property
    def gpus(self) -> int:
        return self.degree


def parse_parallel(value: str | Parallel | None) -> Parallel | None:
    """``"dp4"`` / ``"tp8"`` / ``"pp4_2"`` (``pp4`` = one micro-batch) -> :class:`Parallel`; None / "" /
    "none" / "plain" -> None. A malformed value raises :class:`ParallelismError` naming it."""
    if value is None or isinstance(value, Parallel):
        return value
    text = str(value).strip().lower()
    if text in ("", "none", "null", "plain", "1"):
        return None
    m = _TAG.match(text)
    if not m or m["kind"] not in KINDS:
        raise ParallelismError(f"parallel={value!r} is not {TAG_FORMAT} (e.g. dp4, tp4, pp4_1)")
    if m["micro"] is not None and m["kind"] != "pp":
        raise ParallelismError(f"parallel={value!r}: micro-batches (_<n>) apply to pp only")
    return Parallel(m["kind"], int(m["degree"]), int(m["micro"] or 1))


def local_batch(batch: int, parallel: Parallel | None) -> int:
    """Samples one GPU runs at a time: ``batch / p`` for dp, one micro-batch for pp, ``batch`` otherwise."""
    if parallel is None or parallel.kind == "tp":
        return batch
    share = parallel.degree if parallel.kind == "dp" else parallel.microbatches
    what = "GPUs" if parallel.kind == "dp" else "micro-batches"
    if batch % share:
        raise ParallelismError(f"{parallel.tag}: batch={batch} does not split evenly over {share} {what}")
    return batch // share


def check_parallel(model: ModelSpec, batch: int, parallel: Parallel | None) -> None:
    """Raise :class:`ParallelismError` when ``parallel`` cannot split this model / batch."""
    if parallel is None:
        return
    local_batch(batch, parallel)
    p = parallel.degree
    if parallel.kind == "tp":
        for field in ("num_heads", "num_kv_heads", "intermediate_size"):
            value = getattr(model, field)
            if value % p:
                raise ParallelismError(f"{parallel.tag}: tensor-parallel degree {p} does not divide "
                                       f"{model.key}'s {field}={value}")
    if parallel.kind == "pp":
        layers = model.num_layers + model.num_decoder_layers
        if p > layers:
            raise ParallelismError(f"{parallel.tag}: {p} pipeline stages but {model.key} has {layers} layers")


# ----------------------------------------------------------------------------------------------- data


def data_parallel(graph: OpGraph, parallel: Parallel) -> OpGraph:
    """Add one backward all-reduce per gradient tensor (one per ``acc`` op; none at inference)."""
    comm = [comm_op("bw", "allreduce", o.b * o.h, o.section, f"allreduce({o.name})", o.count)
            for o in graph.ops if o.phase == "acc"]
    return OpGraph.from_ops([*graph.ops, *comm], graph.num_layers, **_meta(graph, parallel))


# ------------------------------------------------------------------------------------------- pipeline


def pipeline_parallel(graph: OpGraph, parallel: Parallel, hidden_states: int, training: bool) -> OpGraph:
    """Add one send-recv of ``hidden_states`` elements per stage boundary (forward, and backward in training)."""
    boundaries = parallel.degree - 1
    comm = []
    if boundaries:
        comm.append(comm_op("fw", "sendrecv", hidden_states, "layer", "stage.sendrecv", boundaries))
        if training:
            comm.append(comm_op("bw", "sendrecv", hidden_states, "layer", "stage.sendrecv.grad", boundaries))
    return OpGraph.from_ops([*graph.ops, *comm], graph.num_layers, **_meta(graph, parallel))


# --------------------------------------------------------------------------------------------- tensor

ROWS, FEATURES = "rows", "features"


@dataclass(frozen=True)
class _Shard:
    """A forward node as one TP rank runs it; ``axis`` is how its output is split (None: replicated)."""

    node: Node
    axis: str | None


def _split(value: int, p: int, what: str, tag: str) -> int:
    if value % p:
        raise ParallelismError(f"{tag}: tensor-parallel degree {p} does not divide {what}={value}")
    return value // p


def _resized(node: Node, shards: dict[int, _Shard], original: dict[int, int]) -> tuple[Tensor, ...]:
    """Inputs re-sized to their producers' rank-local outputs (in proportion for partial reads)."""
    out = []
    for t in node.inputs:
        if t.node == EXTERNAL:
            out.append(t)
            continue
        old, new = original[t.node], shards[t.node].node.out_numel
        out.append(Tensor(t.node, new if t.numel == old else max(1, t.numel * new // old)))
    return tuple(out)


class _TensorParallelPass:
    """One walk over the forward nodes in order, rewriting each (see the module docstring)."""

    def __init__(self, tape: Tape, parallel: Parallel, vocab_size: int) -> None:
        self.tape, self.p, self.tag = tape, parallel.degree, parallel.tag
        self.vocab, self.vocab_local = vocab_size, math.ceil(vocab_size / parallel.degree)
        self.original = {n.id: n.out_numel for n in tape.nodes}
        self.shards: dict[int, _Shard] = {}
        self.comm: list[Op] = []
        self.grad_inputs: dict[int, Node] = {}  # replicated tensors read by column-parallel linears

    def run(self) -> tuple[Tape, list[Op]]:
        for node in self.tape.nodes:
            axes = [self.shards[t.node].axis for t in node.inputs if t.node != EXTERNAL]
            axis = next((a for a in axes if a is not None), None)
            new, out_axis = self.rewrite(replace(node, inputs=_resized(node, self.shards, self.original)), axis)
            self.shards[node.id] = _Shard(new, out_axis)
        for producer in self.grad_inputs.values():
            self.comm.append(comm_op("bw", "allreduce", producer.out_numel, producer.section,
                                     f"{producer.name}.grad_allreduce"))
        tape = Tape(nodes=[self.shards[n.id].node for n in self.tape.nodes], section=self.tape.section,
                    layer=self.tape.layer, param_numels=list(self.tape.param_numels), held=list(self.tape.held))
        return tape, self.comm

    def rewrite(self, node: Node, axis: str | None) -> tuple[Node, str | None]:
        if node.kind == "linear":
            return self.linear(node, axis)
        if axis is None:
            if node.kind == "embedding" and len(node.dims) == 2 and node.dims[0] == self.vocab:
                h = node.dims[1]  # vocab-parallel table; the partial lookups are all-reduced
                self.comm.append(comm_op("fw", "allreduce", node.out_numel, node.section, f"{node.name}.allreduce"))
                params = (self.vocab_local * h,) if node.params else ()
                return replace(node, dims=(self.vocab_local, h), params=params), None
            return node, None
        if node.kind in ("bmm", "conv"):  # heads split: the batch x heads dimension
            b, m, n, k = node.dims
            b = _split(b, self.p, f"batch x heads of {node.name}", self.tag)
            return replace(node, dims=(b, m, n, k), out_numel=b * m * k), ROWS
        if node.kind == "attn":  # heads split; KV heads too, replicated when fewer than the ranks
            b, m, n, k, h, hkv = node.dims
            h = _split(h, self.p, f"heads of {node.name}", self.tag)
            hkv = max(1, hkv // self.p) if hkv < self.p else _split(hkv, self.p, f"KV heads of {node.name}", self.tag)
            return replace(node, dims=(b, m, n, k, h, hkv), out_numel=b * m * h * k), FEATURES
        if node.kind == "vec":
            b, h = node.dims
            if axis == FEATURES and h > 1 and node.op not in ("softmax", "ln", "rmsnorm"):
                h = _split(h, self.p, f"features of {node.name}", self.tag)
            else:
                b = _split(b, self.p, f"rows of {node.name}", self.tag)
            return replace(node, dims=(b, h), out_numel=b * h), axis
        return replace(node, out_numel=max(1, math.ceil(node.out_numel / self.p))), axis

    def linear(self, node: Node, axis: str | None) -> tuple[Node, str | None]:
        m, n, k = node.dims
        bias = len(node.params) > 1
        lm_head = node.section == "epilogue" and k == self.vocab and axis is None
        if node.section != "layer" and not lm_head:
            return node, None
        if axis is not None:  # row-parallel: split the reduction, all-reduce the partial outputs
            n = _split(n, self.p, f"in features of {node.name}", self.tag)
            self.comm.append(comm_op("fw", "allreduce", m * k, node.section, f"{node.name}.allreduce"))
            return replace(node, dims=(m, n, k), params=(n * k, k) if bias else (n * k,)), None
        k = self.vocab_local if lm_head else _split(k, self.p, f"out features of {node.name}", self.tag)
        source = node.inputs[0].node if node.inputs else EXTERNAL
        if source != EXTERNAL:
            self.grad_inputs.setdefault(source, self.tape.nodes[source])
        return replace(node, dims=(m, n, k), params=(n * k, k) if bias else (n * k,), out_numel=m * k), FEATURES


def tensor_parallel_tape(tape: Tape, parallel: Parallel, vocab_size: int) -> tuple[Tape, list[Op]]:
    """The tape one tensor-parallel rank runs and the all-reduces it needs (the input tape is unchanged).

    Communication: a forward all-reduce after every row-parallel linear and after the vocab-parallel
    embedding; a backward all-reduce of every replicated tensor that column-parallel linears read
    (phase ``bw``: keep them only in training).
    """
    return _TensorParallelPass(tape, parallel, vocab_size).run()


def tensor_parallel(tape: Tape, parallel: Parallel, spec: ModelSpec, training: bool, fused: bool,
                    lower: Callable[[Tape, bool, bool], list[Op]], num_layers: int,
                    meta: dict | None = None) -> OpGraph:
    """Lower one tensor-parallel rank's tape with ``lower(tape, training, fused)`` and add its all-reduces."""
    ops = tensor_parallel_ops(tape, parallel, spec, training, fused, lower)
    return OpGraph.from_ops(ops, num_layers, **(meta or {}), parallel=parallel.tag, degree=parallel.degree,
                            microbatches=parallel.microbatches)


def tensor_parallel_ops(tape: Tape, parallel: Parallel, spec: ModelSpec, training: bool, fused: bool,
                        lower: Callable[[Tape, bool, bool], list[Op]]) -> list[Op]:
    """The ops of one tensor-parallel rank: its lowered tape, then its all-reduces (backward ones in training)."""
    sharded, comm = tensor_parallel_tape(tape, parallel, spec.vocab_size)
    comm = [c for c in comm if training or c.phase == "fw"]
    return [*lower(sharded, training, fused), *comm]


def as_layout(parallel: str | Parallel | Layout | None) -> Layout:
    """A mixture-of-experts model's layout from any spelling: a :class:`Layout`, its tag (``tp4ep4``), or a
    scheme: ``tp<n>`` (attention and experts tensor parallel), ``dp<n>`` (data-parallel attention, experts
    expert-parallel over the same GPUs); pipeline parallelism is refused."""
    if isinstance(parallel, Layout):
        return parallel
    par = parallel if isinstance(parallel, Parallel) else None
    if par is None and parallel is not None:
        try:
            par = parse_parallel(parallel)
        except ParallelismError:
            return parse_layout(parallel)
    if par is None:
        return Layout()
    if par.kind == "pp":
        raise ParallelismError(f"{par.tag}: pipeline parallelism of mixture-of-experts models is not modelled; "
                               "use a layout (tp<n>[dp<n>][ep<n>])")
    return Layout(tp=par.degree) if par.kind == "tp" else Layout(dp=par.degree, ep=par.degree)


def _dense_parallel(parallel: str | Parallel | Layout | None) -> str | Parallel | None:
    """A dense model's scheme from a layout: ``tp<n>`` (a dense model has no experts, and attention data
    parallelism of a dense model is ``dp<n>``)."""
    if not isinstance(parallel, Layout):
        return parallel
    if parallel.ep > 1 or (parallel.tp > 1 and parallel.dp > 1):
        raise ParallelismError(f"layout {parallel.tag}: a dense model runs tp<n> or dp<n>, not both or experts")
    if parallel.gpus == 1:
        return None
    return Parallel("tp", parallel.tp) if parallel.tp > 1 else Parallel("dp", parallel.dp)


def build_parallel_graph(model: ModelSpec | str, batch: int, seq_len: int, mode: str = "inference",
                         parallel: str | Parallel | Layout | None = None, fused: bool = False,
                         scale_layers: bool = True, dtype: str = "fp32", kv_len: int = 0,
                         serving: bool = False) -> OpGraph:
    """The op graph one GPU runs for ``model`` at global ``batch`` under ``parallel`` (None: one GPU),
    at workload ``dtype`` (``kv_len``: tokens per sequence already cached, a decode step's context;
    ``serving``: a serving engine's kernels).

    ``meta`` gains ``parallel`` (tag), ``degree`` and ``microbatches``; a scheme that cannot split
    the workload raises :class:`ParallelismError` naming the value. ``scale_layers=False`` records
    every block (see :func:`tilecast.graph.build.layer_ops`; the graph is the same). A mixture-of-experts
    model is recorded per :class:`~tilecast.specs.layout.Layout` (:func:`as_layout`;
    :mod:`tilecast.graph.layout_graph`).
    """
    spec = get_model(model) if isinstance(model, str) else model
    if spec.family in LAYOUT_FAMILIES:
        return build_layout_graph(spec, batch, seq_len, mode, as_layout(parallel), fused, scale_layers, dtype,
                                  kv_len, serving)
    par = parse_parallel(_dense_parallel(parallel))
    check_parallel(spec, batch, par)
    wl = Workload(spec, local_batch(batch, par), seq_len, mode, fused, dtype=dtype, kv_len=kv_len, serving=serving)
    if par is None:
        return build_graph(wl, scale_layers=scale_layers)
    if par.kind == "tp":
        meta = {"model": spec.key, "batch": batch, "seq_len": seq_len, "mode": mode, "fused": fused, "dtype": dtype}
        ops = apply_dtype(layer_ops(wl, lambda tape: tensor_parallel_ops(tape, par, spec, wl.training, fused, lower),
                                    scale_layers), dtype)
        return OpGraph(ops, num_blocks(spec), {**meta, "parallel": par.tag, "degree": par.degree,
                                               "microbatches": par.microbatches})
    graph = build_graph(wl, scale_layers=scale_layers)
    graph = OpGraph(graph.ops, graph.num_layers, {**graph.meta, "batch": batch})
    if par.kind == "dp":
        return data_parallel(graph, par)
    return pipeline_parallel(graph, par, wl.tokens * spec.hidden_size, wl.training)


def _meta(graph: OpGraph, parallel: Parallel) -> dict:
    return {**graph.meta, "parallel": parallel.tag, "degree": parallel.degree,
            "microbatches": parallel.microbatches}
