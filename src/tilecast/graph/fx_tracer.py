"""torch.fx tracer: any ``nn.Module`` -> an :class:`OpGraph`, on the meta device (no weights, no GPU).

The module is traced symbolically (custom modules are inlined, ``torch.nn`` modules stay leaves),
then run node by node on meta tensors shaped like the caller's example inputs: parameters are
swapped for meta tensors of the same shape (``torch.func.functional_call``), so nothing is
materialised and the caller's module is untouched. Each node is mapped by :mod:`tilecast.graph.fx_rules`
onto the builders' :class:`~tilecast.graph.tape.Tape`, so training expansion and fusion are the same
as for built graphs. Nodes no rule covers are listed in :attr:`TraceResult.unmapped` with their counts
and costed as a copy of their inputs and output, never dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.fx
from torch import nn
from torch.func import functional_call

from tilecast.errors import UserError
from tilecast.graph.fx_map import Mapper
from tilecast.graph.lower import lower
from tilecast.graph.ops import OpGraph
from tilecast.graph.tape import Tape

ShapeLike = Sequence[int] | torch.Size | torch.Tensor


class TraceError(RuntimeError):
    """The module cannot be traced or run on meta tensors; names the fx node."""


@dataclass(frozen=True)
class TraceResult:
    """A traced module's graph, the ops no rule covers (name -> count), and its parameter count."""

    graph: OpGraph
    unmapped: dict[str, int] = field(default_factory=dict)
    num_params: int = 0
    tape: Tape | None = field(default=None, compare=False, repr=False)


def _meta_input(x: ShapeLike, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return torch.empty_like(x, device="meta")
    shape = tuple(int(d) for d in x)
    return torch.empty(shape, dtype=dtype, device="meta")


def _meta_state(module: nn.Module) -> dict[str, torch.Tensor]:
    state = dict(module.named_parameters(remove_duplicate=False))
    state.update(dict(module.named_buffers(remove_duplicate=False)))
    return {name: torch.empty_like(t, device="meta") for name, t in state.items()}


def _sub_state(meta: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    head = prefix + "."
    return {k[len(head):]: v for k, v in meta.items() if k.startswith(head)}


def _execute(gm: torch.fx.GraphModule, node: torch.fx.Node, args: tuple, kwargs: dict,
             meta: dict[str, torch.Tensor]) -> object:
    if node.op == "get_attr":
        if node.target in meta:
            return meta[node.target]
        value = _attr(gm, node.target)  # a plain tensor attribute (neither parameter nor buffer)
        return torch.empty_like(value, device="meta") if isinstance(value, torch.Tensor) else value
    if node.op == "call_module":
        return functional_call(gm.get_submodule(node.target), _sub_state(meta, node.target), args, kwargs)
    if node.op == "call_function":
        return node.target(*args, **kwargs)
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    raise TraceError(f"fx node {node.name!r}: unexpected op {node.op!r}")


def _attr(gm: torch.fx.GraphModule, target: str) -> object:
    obj: object = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def trace_module(module: nn.Module, *example_inputs: ShapeLike, dtype: torch.dtype = torch.float32,
                 mode: str | None = None, fused: bool = False) -> TraceResult:
    """Trace ``module`` called with inputs of the given shapes (or tensors, whose shape and dtype are used).

    ``dtype`` applies to inputs given as shapes (``torch.long`` for token ids). ``mode`` defaults to
    the module's own (``training`` when ``module.training``); training adds backward and gradient
    accumulation ops by the same table as built graphs. Dropout costs a copy only in training.
    """
    mode = mode or ("training" if module.training else "inference")
    if mode not in ("inference", "training"):
        raise UserError(f"mode must be inference or training, got {mode!r}")
    try:
        gm = torch.fx.symbolic_trace(module)
    except Exception as exc:  # noqa: BLE001 - fx raises many types; report them uniformly
        raise TraceError(f"torch.fx cannot trace {type(module).__name__}: {exc}") from exc
    meta = _meta_state(module)
    inputs = iter(_meta_input(x, dtype) for x in example_inputs)
    tape = Tape()
    tape.at("layer")
    mapper = Mapper(tape, gm, training=mode == "training")
    env: dict[torch.fx.Node, object] = {}
    for node in gm.graph.nodes:
        if node.op == "output":
            break
        if node.op == "placeholder":
            try:
                env[node] = next(inputs)
            except StopIteration:
                raise TraceError(f"no example input for placeholder {node.name!r}") from None
            mapper.placeholder(node, env[node])
            continue
        args = torch.fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
        try:
            env[node] = _execute(gm, node, args, kwargs, meta)
        except Exception as exc:  # noqa: BLE001 - name the node whatever failed
            raise TraceError(f"fx node {node.name!r} ({node.op} {node.target}) failed on meta tensors: "
                             f"{exc}") from exc
        mapper.record(node, env[node])
    graph = OpGraph.from_ops(lower(tape, mode == "training", fused), num_layers=1,
                             model=type(module).__name__, mode=mode, fused=fused)
    n_params = sum(p.numel() for p in module.parameters())
    return TraceResult(graph, dict(Counter(mapper.unmapped)), n_params, tape)
