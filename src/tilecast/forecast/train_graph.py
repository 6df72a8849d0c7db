"""The op graph one GPU runs for one micro-batch of a :class:`~tilecast.specs.train_run.TrainRun`.

The family builder records ``micro_batch`` sequences of ``seq_len / cp`` tokens (the rank's share of each
sequence under context parallelism) in training mode at the run's dtype; then, on the recorded tape:

- **LoRA** (``lora_rank > 0``, :func:`lora_tape`): every linear of the blocks is frozen (its backward is the
  input gradient only, no weight gradient, rule ``linear_frozen``) and gets a trainable adapter beside it,
  ``x -> A (in x r) -> B (r x out)``, added to its output; every other parameter is frozen too (no weight
  gradient, no accumulation; the embedding's backward is dropped, nothing upstream needs it);
- **tp** (Megatron, :func:`tilecast.graph.parallel.tensor_parallel_ops`): the rank's shards and its
  all-reduces (exposed: they sit between the layer's kernels);
- **cp**: each rank's causal attention covers ``1/cp`` of the causal triangle of the whole sequence
  (load-balanced chunks), i.e. ``cp`` times the triangle of its own ``seq_len / cp`` tokens: the attention
  ops (and their backward) count ``cp`` times;
- **the loss** (not in the NeuSight-style graph, which measured forward + backward without it): the fused
  cross-entropy over the logits (vocab-parallel under tp), one row-softmax pass in the forward and one
  elementwise pass writing the logits' gradient in the backward.
"""

from __future__ import annotations

from dataclasses import replace

from tilecast.graph.build import apply_dtype, layer_ops, num_blocks
from tilecast.graph.lower import lower
from tilecast.graph.ops import Op, OpGraph, vec
from tilecast.graph.parallel import Parallel, tensor_parallel_ops
from tilecast.graph.tape import EXTERNAL, Tape, Tensor
from tilecast.specs import ModelSpec, Workload
from tilecast.specs.train_run import LoraError, TrainRun
from tilecast.tiles.dtypes import DTYPE_BYTES, compute_dtype
from tilecast.tiles.ops import mem_per_output, ops_per_output


def rank_workload(run: TrainRun) -> Workload:
    """One micro-batch on one rank: ``micro_batch`` sequences of ``seq_len / cp`` tokens, training, at the
    run's dtype."""
    return Workload(run.model, run.micro_batch, run.seq_len // run.cp, "training", dtype=run.dtype)


def lora_tape(tape: Tape, rank: int) -> Tape:
    """``tape`` with every parameter frozen and a rank-``rank`` adapter beside each linear of the blocks
    (module docstring); :class:`LoraError` when the blocks hold no linear."""
    if not any(n.kind == "linear" and n.section == "layer" for n in tape.nodes):
        raise LoraError("LoRA adapts the linear layers of a model's blocks, and this model's blocks have none")
    out = Tape(section=tape.section, layer=tape.layer)
    moved: dict[int, Tensor] = {}

    def inputs(node) -> list[Tensor]:
        return [t if t.node == EXTERNAL else Tensor(moved[t.node].node, t.numel) for t in node.inputs]

    for node in tape.nodes:
        out.at(node.section, node.layer)
        grad = node.grad
        if node.kind == "linear":
            grad = "linear_frozen"
        elif node.kind == "embedding":
            grad = "none"
        base = out.add(node.name, node.kind, node.op, node.dims, inputs(node), node.out_numel, grad, (),
                       node.saved, node.alias)
        if node.kind == "linear" and node.section == "layer":
            m, n, k = node.dims
            x = inputs(node)[0]
            a = out.linear(f"{node.name}.lora_A", x, m, n, rank, bias=False)
            b = out.linear(f"{node.name}.lora_B", a, m, rank, k, bias=False)
            base = out.vec(f"{node.name}.lora_add", "add", [base, b], m, k)
        moved[node.id] = base
    out.held = [moved[i].node for i in tape.held]
    return out


def adapter_params(tape: Tape, rank: int) -> int:
    """Trainable parameters of rank-``rank`` adapters on the linears of ``tape``'s blocks (all blocks recorded)."""
    return sum(rank * (n.dims[1] + n.dims[2]) for n in tape.nodes if n.kind == "linear" and n.section == "layer")


def loss_ops(run: TrainRun, spec: ModelSpec) -> list[Op]:
    """The fused cross-entropy over the rank's logits (``tokens x vocab / tp``): a softmax pass forward and a
    pass writing the logits' gradient backward, at the compute dtype."""
    tokens = run.micro_batch * run.seq_len // run.cp
    vocab = -(-spec.vocab_size // run.tp)
    dtype = compute_dtype(run.dtype)
    scale = DTYPE_BYTES[dtype] / 4.0
    kw = {"section": "epilogue", "dtype": dtype}
    return [vec("fw", "softmax", tokens, vocab, mem_per_output("softmax") * scale, ops_per_output("softmax"),
                name="loss.cross_entropy", **kw),
            vec("bw", "mulu", tokens, vocab, mem_per_output("mulu") * scale, ops_per_output("mulu"),
                name="loss.cross_entropy.grad", **kw)]


def _context_parallel(ops: tuple[Op, ...], cp: int) -> tuple[Op, ...]:
    """Attention ops (and their backward) counted ``cp`` times (module docstring)."""
    if cp == 1:
        return ops
    names = {o.name for o in ops if o.kind == "attn"}
    grads = {f"{n}.grad" for n in names}
    return tuple(replace(o, count=o.count * cp) if (o.name in names or o.name in grads) and o.kind in ("attn", "bmm")
                 else o for o in ops)


def micro_batch_graph(run: TrainRun, scale_layers: bool = True) -> OpGraph:
    """The ops one rank runs for one micro-batch (forward, backward, accumulation, loss, tp all-reduces)."""
    wl = rank_workload(run)
    spec = wl.model
    par = Parallel("tp", run.tp) if run.tp > 1 else None

    def lower_tape(tape: Tape) -> list[Op]:
        if run.lora_rank:
            tape = lora_tape(tape, run.lora_rank)
        if par is None:
            return lower(tape, True, False)
        return tensor_parallel_ops(tape, par, spec, True, False, lower)

    ops = apply_dtype(layer_ops(wl, lower_tape, scale_layers), run.dtype)
    ops = _context_parallel((*ops, *loss_ops(run, spec)), run.cp)
    return OpGraph(ops, num_blocks(spec), {"model": spec.key, "batch": run.micro_batch,
                                           "seq_len": run.seq_len // run.cp, "mode": "training",
                                           "dtype": run.dtype, "parallel": f"tp{run.tp}" if par else None,
                                           "degree": run.tp})


__all__ = ["adapter_params", "lora_tape", "loss_ops", "micro_batch_graph", "rank_workload"]
