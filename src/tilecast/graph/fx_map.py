"""Maps executed fx nodes (with their meta values) onto :class:`~tilecast.graph.tape.Tape` nodes."""

from __future__ import annotations

import math
import operator
import re

import torch
import torch.fx
from torch import nn

from tilecast.graph import fx_rules as R
from tilecast.graph.tape import Tape, Tensor

_LIST_INDEX = re.compile(r"\.(\d+)(?:\.|$)")


def _numel(x: torch.Tensor) -> int:
    return int(x.numel())


def _rows(out: torch.Tensor, h: int | None = None) -> tuple[int, int]:
    """(b, h): rows x row length of an output (the data's vector convention)."""
    h = h or (int(out.shape[-1]) if out.dim() else 1)
    return max(1, _numel(out) // max(h, 1)), h


class Mapper:
    """Records one tape node per costed fx node; views alias their input's producer."""

    def __init__(self, tape: Tape, gm: torch.fx.GraphModule, training: bool) -> None:
        self.tape, self.gm, self.training = tape, gm, training
        self.values: dict[torch.fx.Node, object] = {}
        self.val: dict[torch.fx.Node, Tensor] = {}
        self.param_names = {n for n, _ in gm.named_parameters(remove_duplicate=False)}
        self.owned: set[str] = set()
        self.unmapped: list[str] = []
        self.seen_layer = False

    # ------------------------------------------------------------------ helpers
    def placeholder(self, node: torch.fx.Node, value: torch.Tensor) -> None:
        self.values[node], self.val[node] = value, Tape.ext(_numel(value))

    def _inputs(self, node: torch.fx.Node) -> list[tuple[torch.fx.Node, torch.Tensor, Tensor]]:
        out = []
        for n in node.all_input_nodes:
            v = self.values.get(n)
            if isinstance(v, torch.Tensor):
                src = self.val.get(n, Tape.ext(_numel(v)))
                out.append((n, v, Tensor(src.node, _numel(v))))
        return out

    def _params(self, node: torch.fx.Node) -> list[int]:
        """Parameters fed to a functional call through ``get_attr`` (each owned by its first user)."""
        found = []
        for n in node.all_input_nodes:
            if n.op == "get_attr" and n.target in self.param_names and n.target not in self.owned:
                self.owned.add(n.target)
                found.append(_numel(self.values[n]))
        return found

    def _section(self, node: torch.fx.Node) -> None:
        stack = node.meta.get("nn_module_stack") or {}
        path = next(iter(stack.values()), ("",))[0] if stack else (node.target if node.op == "call_module"
                                                                     else "")
        if _LIST_INDEX.search(f".{path}"):
            self.seen_layer = True
            self.tape.at("layer", int(_LIST_INDEX.search(f".{path}").group(1)))
        else:
            self.tape.at("epilogue" if self.seen_layer else "prologue")

    def _alias(self, node: torch.fx.Node, out: torch.Tensor) -> None:
        ins = self._inputs(node)
        self.val[node] = Tensor(ins[0][2].node, _numel(out)) if ins else Tape.ext(_numel(out))

    def _copy(self, node: torch.fx.Node, out: object, grad: str = "copy") -> None:
        ins = [t for _, _, t in self._inputs(node)]
        n_out = _numel(out) if isinstance(out, torch.Tensor) else 1
        self.val[node] = self.tape.mem(node.name, ins, n_out, grad=grad)

    # ------------------------------------------------------------------ dispatch
    def record(self, node: torch.fx.Node, out: object) -> None:
        self.values[node] = out
        if node.op == "get_attr":
            if isinstance(out, torch.Tensor):
                self.val[node] = Tape.ext(_numel(out))
            return
        if node.op == "call_module":
            self._section(node)
            self._module(node, self.gm.get_submodule(node.target), out)
            return
        if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
            self._alias(node, out[0])  # split / chunk: views; their getitems cost the copy
            self.val[node] = Tensor(self.val[node].node, 1)
            return
        if node.target is operator.setitem:
            self._section(node)
            self._copy(node, out)
            return
        if not isinstance(out, torch.Tensor):
            return  # sizes, dtypes, scalars: free
        self._section(node)
        self._function(node, node.target, out)

    def _function(self, node: torch.fx.Node, target: object, out: torch.Tensor) -> None:
        t, ins = self.tape, self._inputs(node)
        if target in R.ARITHMETIC:
            base = R.ARITHMETIC[target]
            name = base if len(ins) >= 2 else f"{base}u"
            self.val[node] = t.vec(node.name, name, [x for _, _, x in ins], *_rows(out), params=self._params(node))
        elif target in R.UNARY:
            self.val[node] = t.vec(node.name, R.UNARY[target], [ins[0][2]], *_rows(out))
        elif target in R.SOFTMAX:
            dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else -1)
            self.val[node] = t.vec(node.name, "softmax", [ins[0][2]], *_rows(out, int(out.shape[dim])))
        elif target in R.LAYER_NORM:
            h = math.prod(node.args[1]) if len(node.args) > 1 else int(out.shape[-1])
            self.val[node] = t.vec(node.name, "ln", [ins[0][2]], *_rows(out, h), params=self._params(node))
        elif target in R.DROPOUT:
            train = node.kwargs.get("training", node.args[2] if len(node.args) > 2 else self.training)
            self._copy(node, out) if train else self._alias(node, out)
        elif target in R.OUTER:
            dims = (_numel(ins[0][1]), 1, _numel(ins[-1][1]))
            self.val[node] = t.add(node.name, "linear", "linear", dims, [ins[0][2]], _numel(out), "linear",
                                   self._params(node))
        elif target in R.MATMUL or target in R.LINEAR:
            self._gemm(node, target, ins, out)
        elif target in R.CONV:
            groups = node.kwargs.get("groups", node.args[6] if len(node.args) > 6 else 1)
            self._conv(node, ins[0][2], ins[1][1], int(groups), out, self._params(node))
        elif target in R.EMBEDDING:
            w = ins[1][1]
            self.val[node] = t.add(node.name, "embedding", "mem", tuple(w.shape), [ins[0][2]], _numel(out),
                                   "embedding", self._params(node))
        elif target is operator.getitem and not isinstance(self.values.get(node.args[0]), torch.Tensor):
            src = self.val.get(node.args[0])
            self.val[node] = t.mem(node.name, [src] if src else [], _numel(out))
        elif target in R.COPIES:
            self._copy(node, out, R.COPIES[target])
        elif target in R.CASTS or target == "contiguous":
            same = ins and (ins[0][1].dtype == out.dtype if target != "contiguous" else ins[0][1].is_contiguous())
            self._alias(node, out) if same else self._copy(node, out)
        elif target in R.FREE:
            self._alias(node, out)
        else:
            self.unmapped.append(R.callable_name(target))
            self._copy(node, out)

    def _gemm(self, node: torch.fx.Node, target: object, ins: list, out: torch.Tensor) -> None:
        t, params = self.tape, self._params(node)
        if target in ("addmm", torch.addmm):
            x, w = ins[1][1], ins[2][1]
            dims, src = (int(x.shape[0]), int(x.shape[1]), int(w.shape[1])), ins[1][2]
        elif target is torch.nn.functional.linear:
            x, w = ins[0][1], ins[1][1]
            dims, src = (_numel(x) // int(w.shape[1]), int(w.shape[1]), int(w.shape[0])), ins[0][2]
        else:
            a, b = ins[0][1], ins[-1][1]
            if b.dim() <= 2 or a.dim() == 1:
                n, k = int(a.shape[-1]), int(b.shape[-1]) if b.dim() > 1 else 1
                dims, src = (max(1, _numel(a) // n), n, k), ins[0][2]
            else:
                bmm = (_numel(out) // (int(out.shape[-2]) * int(out.shape[-1])), int(out.shape[-2]),
                       int(a.shape[-1]), int(out.shape[-1]))
                self.val[node] = t.matmul(node.name, ins[0][2], ins[-1][2], *bmm)
                return
        self.val[node] = t.add(node.name, "linear", "linear", dims, [src], _numel(out), "linear", params)

    def _conv(self, node: torch.fx.Node, x: Tensor, w: torch.Tensor, groups: int, out: torch.Tensor,
              params: list[int]) -> None:
        cout, cin_g = int(w.shape[0]), int(w.shape[1])
        dims = (groups, int(out.shape[0]) * math.prod(int(d) for d in out.shape[2:]),
                cin_g * math.prod(int(d) for d in w.shape[2:]), cout // groups)
        self.val[node] = self.tape.add(node.name, "conv", "conv", dims, [x], _numel(out), "conv", params)

    def _module(self, node: torch.fx.Node, sub: nn.Module, out: object) -> None:
        rule = next((r for cls, r in R.MODULES.items() if isinstance(sub, cls)), None)
        t, ins, name = self.tape, self._inputs(node), str(node.target)
        params = [int(p.numel()) for p in sub.parameters()]
        if not isinstance(out, torch.Tensor) or rule == "free":
            if isinstance(out, torch.Tensor):
                self._alias(node, out)
            return
        x = ins[0][2] if ins else Tape.ext(1)
        if rule == "linear":
            dims = (_numel(ins[0][1]) // sub.in_features, sub.in_features, sub.out_features)
            self.val[node] = t.add(name, "linear", "linear", dims, [x], _numel(out), "linear", params)
        elif rule == "conv":
            self._conv(node, x, sub.weight, sub.groups, out, params)
        elif rule == "embedding":
            self.val[node] = t.add(name, "embedding", "mem", (sub.num_embeddings, sub.embedding_dim), [x],
                                   _numel(out), "embedding", params)
        elif rule in ("ln", "rmsnorm"):
            h = math.prod(getattr(sub, "normalized_shape", (out.shape[-1],)))
            self.val[node] = t.vec(name, rule, [x], *_rows(out, h), params=params)
        elif rule == "dropout":
            self._copy(node, out) if self.training else self._alias(node, out)
        elif rule == "softmax":
            dim = sub.dim if sub.dim is not None else -1
            self.val[node] = t.vec(name, "softmax", [x], *_rows(out, int(out.shape[dim])))
        elif rule is not None:
            self.val[node] = t.vec(name, rule, [x], *_rows(out), params=params)
        else:
            self.unmapped.append(R.callable_name(type(sub)))
            self.val[node] = t.add(name, "mem", "mem", (), [x for _, _, x in ins], _numel(out), "copy", params)
