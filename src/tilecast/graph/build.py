"""``build_graph``: a workload -> its :class:`OpGraph` (forward, and backward + accumulation in training).

Repeated blocks are not all recorded. In the families of :data:`REPEATING_FAMILIES` every block
records the same kernels whatever its index, and a block's lowering depends only on its neighbours
(fusion groups reach across one block boundary at most), so the merged op counts of ``L`` blocks
are affine in ``L``: ``counts(L) = counts(3) + (L - 3) * (counts(3) - counts(2))`` (first block,
one middle block, last block). :func:`layer_ops` records the model with 2 and 3 blocks and scales;
``scale_layers=False`` records every block (the reference the tests compare against).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from tilecast.graph.blocks import Ctx
from tilecast.graph.families import BUILDERS
from tilecast.graph.lower import lower
from tilecast.graph.ops import Op, OpGraph, merge_ops, ops_of_tally, tally_ops, with_dtype
from tilecast.graph.tape import Tape
from tilecast.specs import ModelSpec, Workload, WorkloadError
from tilecast.specs.layout import Layout
from tilecast.tiles.dtypes import HALF_DTYPES, UNQUANTISED_LINEARS, compute_dtype, op_dtype

#: families whose blocks record identical kernels whatever their index (switch alternates sparse and
#: dense blocks and sizes its router losses by the number of sparse blocks: recorded in full)
REPEATING_FAMILIES = frozenset({"gpt2", "opt", "bert", "llama", "mpt"})
#: block counts recorded to scale from (first + last; first + middle + last)
SHORT_BLOCKS = (2, 3)
#: families recorded only with fused kernels (half precision): their serving-engine kernels are all there is
FUSED_ONLY_FAMILIES = frozenset({"moe"})


def as_workload(model: ModelSpec | str | Workload, batch: int | None = None, seq_len: int | None = None,
                mode: str = "inference", fused: bool = False, dtype: str = "fp32") -> Workload:
    """A validated :class:`Workload` from a workload, or from a model (spec or catalog key) and numbers."""
    if isinstance(model, Workload):
        return model
    return Workload(model, batch, seq_len, mode, fused, dtype=dtype)


def fused_attention(workload: Workload) -> bool:
    """Whether the workload's attention runs fused: half precisions run SDPA / FlashAttention, as the
    measured frameworks do; fp32 / tf32 keep the eager chain the NeuSight labels were measured with."""
    return workload.dtype in HALF_DTYPES


def record(workload: Workload) -> Tape:
    """Run the family builder: the forward kernels of one step, layers unrolled."""
    spec = workload.model
    if spec.family not in BUILDERS:
        raise WorkloadError(f"{spec.key}: no graph builder for family {spec.family!r}; "
                            f"known: {', '.join(BUILDERS)}")
    if spec.family in FUSED_ONLY_FAMILIES and not fused_attention(workload):
        raise WorkloadError(f"{spec.key}: mixture-of-experts decoders are modelled as engines and training "
                            f"frameworks run them, in {' / '.join(sorted(HALF_DTYPES - {'amp_bf16'}))} or amp_bf16 "
                            f"(fused kernels), not dtype={workload.dtype}")
    tape = Tape()
    BUILDERS[spec.family](Ctx(tape, spec, workload.batch, workload.seq_len, workload.training,
                              fused_attention(workload), workload.kv_len, workload.serving, layout_of(workload)))
    return tape


def layout_of(workload: Workload) -> Layout | None:
    """The layout a workload carries in ``parallel`` (a mixture-of-experts model's), else None."""
    return workload.parallel if isinstance(workload.parallel, Layout) else None


@functools.lru_cache(maxsize=8)  # a workload's graphs are built together (scoring groups them)
def _recorded(spec: ModelSpec, config: str, batch: int, seq_len: int, training: bool, attention: bool,
              kv_len: int, serving: bool, layout: Layout | None = None) -> Tape:
    return record(Workload(spec, batch, seq_len, "training" if training else "inference",
                           dtype="bf16" if attention else "fp32", kv_len=kv_len, serving=serving, parallel=layout))


def recorded(workload: Workload) -> Tape:
    """:func:`record`, shared: the fused and plain graphs and the memory model of a workload read one
    tape (recent ones are kept per process). Read-only: passes that change a tape copy it."""
    spec = workload.model
    return _recorded(spec, repr(sorted(spec.config.items())), workload.batch, workload.seq_len, workload.training,
                     fused_attention(workload), workload.kv_len, workload.serving, layout_of(workload))


def num_blocks(spec: ModelSpec) -> int:
    """Repeated blocks of a model (encoder plus decoder blocks for encoder-decoders)."""
    return spec.num_layers + spec.num_decoder_layers


def scalable(spec: ModelSpec) -> bool:
    """Whether ``spec``'s graph can be recorded with :data:`SHORT_BLOCKS` blocks and scaled to all of them."""
    return (spec.family in REPEATING_FAMILIES and not spec.num_decoder_layers
            and spec.num_layers > SHORT_BLOCKS[-1])


def with_blocks(workload: Workload, blocks: int) -> Workload:
    """The same workload on the same model cut to ``blocks`` repeated blocks."""
    return dataclasses.replace(workload, model=dataclasses.replace(workload.model, num_layers=blocks))


def layer_ops(workload: Workload, lower_tape: Callable[[Tape], list[Op]], scale_layers: bool = True) \
        -> tuple[Op, ...]:
    """The merged ops ``lower_tape`` makes of ``workload``'s recorded tape, for all its blocks.

    With ``scale_layers`` (and a :func:`scalable` model) from two short recordings (module docstring);
    a count that would not scale (an op of the 2-block graph missing from the 3-block one, or fewer
    of it) falls back to recording every block.
    """
    spec = workload.model
    if not (scale_layers and scalable(spec)):
        return merge_ops(lower_tape(recorded(workload)))
    n_short, n_long = SHORT_BLOCKS
    short = tally_ops(lower_tape(recorded(with_blocks(workload, n_short))))
    long = tally_ops(lower_tape(recorded(with_blocks(workload, n_long))))
    extra = spec.num_layers - n_long
    for key, (_, count, names) in short.items():
        entry = long.get(key)
        if entry is None or entry[1] < count or any(n not in entry[2] for n in names):
            return merge_ops(lower_tape(recorded(workload)))
    for key, entry in long.items():
        per_block = entry[1] - (short[key][1] if key in short else 0)
        entry[1] += extra * per_block
    return ops_of_tally(long)


def apply_dtype(ops: tuple[Op, ...], dtype: str) -> tuple[Op, ...]:
    """Ops lowered at fp32 run at workload ``dtype``: each in :func:`~tilecast.tiles.dtypes.op_dtype` (the linears of
    :data:`~tilecast.tiles.dtypes.UNQUANTISED_LINEARS`, a MoE router, at the compute dtype)."""
    if dtype == "fp32":
        return ops
    return tuple(with_dtype(o, compute_dtype(dtype) if o.name in UNQUANTISED_LINEARS else op_dtype(dtype, o.kind))
                 for o in ops)


def build_graph(model: ModelSpec | str | Workload, batch: int | None = None, seq_len: int | None = None,
                mode: str = "inference", fused: bool = False, scale_layers: bool = True,
                dtype: str = "fp32") -> OpGraph:
    """The operator graph of ``model`` at ``batch`` x ``seq_len`` in ``mode`` (inference | training) at
    ``dtype`` (:mod:`tilecast.tiles.dtypes`: each op runs in :func:`~tilecast.tiles.dtypes.op_dtype`).

    ``model`` is a :class:`ModelSpec`, a catalog key, or a whole :class:`Workload` (then the other
    arguments are ignored). ``fused`` merges vector ops as torch.compile does (forward only).
    ``scale_layers=False`` records every block instead of scaling two short recordings (same graph).
    Bad input raises :class:`~tilecast.specs.WorkloadError` naming the value.
    """
    wl = as_workload(model, batch, seq_len, mode, fused, dtype)
    ops = apply_dtype(layer_ops(wl, lambda tape: lower(tape, wl.training, wl.fused), scale_layers), wl.dtype)
    return OpGraph(ops, num_blocks(wl.model), dict(model=wl.model.key, batch=wl.batch, seq_len=wl.seq_len,
                                                     mode=wl.mode, fused=wl.fused, dtype=wl.dtype))
