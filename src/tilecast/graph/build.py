"""``build_graph``: a workload -> its :class:`OpGraph` (forward, and backward + accumulation in training)."""

from __future__ import annotations

from tilecast.graph.blocks import Ctx
from tilecast.graph.families import BUILDERS
from tilecast.graph.lower import lower
from tilecast.graph.ops import OpGraph
from tilecast.graph.tape import Tape
from tilecast.specs import ModelSpec, Workload, WorkloadError


def as_workload(model: ModelSpec | str | Workload, batch: int | None = None, seq_len: int | None = None,
                mode: str = "inference", fused: bool = False) -> Workload:
    """A validated :class:`Workload` from a workload, or from a model (spec or catalog key) and numbers."""
    if isinstance(model, Workload):
        return model
    return Workload(model, batch, seq_len, mode, fused)


def record(workload: Workload) -> Tape:
    """Run the family builder: the forward kernels of one step, layers unrolled."""
    spec = workload.model
    if spec.family not in BUILDERS:
        raise WorkloadError(f"{spec.key}: no graph builder for family {spec.family!r}; "
                            f"known: {', '.join(BUILDERS)}")
    tape = Tape()
    BUILDERS[spec.family](Ctx(tape, spec, workload.batch, workload.seq_len, workload.training))
    return tape


def num_blocks(spec: ModelSpec) -> int:
    """Repeated blocks of a model (encoder plus decoder blocks for encoder-decoders)."""
    return spec.num_layers + spec.num_decoder_layers


def build_graph(model: ModelSpec | str | Workload, batch: int | None = None, seq_len: int | None = None,
                mode: str = "inference", fused: bool = False) -> OpGraph:
    """The operator graph of ``model`` at ``batch`` x ``seq_len`` in ``mode`` (inference | training).

    ``model`` is a :class:`ModelSpec`, a catalog key, or a whole :class:`Workload` (then the other
    arguments are ignored). ``fused`` merges vector ops as torch.compile does (forward only).
    Bad input raises :class:`~tilecast.specs.WorkloadError` naming the value.
    """
    wl = as_workload(model, batch, seq_len, mode, fused)
    tape = record(wl)
    return OpGraph.from_ops(lower(tape, wl.training, wl.fused), num_layers=num_blocks(wl.model),
                            model=wl.model.key, batch=wl.batch, seq_len=wl.seq_len, mode=wl.mode,
                            fused=wl.fused)
