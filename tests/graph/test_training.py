"""The training table (docs/method.md §2): each forward rule -> its backward and accumulation ops."""

import pytest

from tilecast.graph.tape import Tape
from tilecast.graph.training import BACKWARD, accumulation_ops, backward_ops


def _ops(node):
    return [(o.kind, o.op, o.dims) for o in backward_ops(node)]


def _node(record):
    t = Tape()
    record(t)
    return t.nodes[-1]


def test_linear_gives_dx_and_dw_gemms_and_accumulates_weight_and_bias():
    n = _node(lambda t: t.linear("fc", t.ext(4096 * 1280), 4096, 1280, 3840))
    assert _ops(n) == [("linear", "linear", (4096, 3840, 1280)), ("linear", "linear", (3840, 4096, 1280))]
    assert [o.h for o in accumulation_ops(n)] == [1280 * 3840, 3840]
    assert all(o.phase == "acc" and o.op == "add" for o in accumulation_ops(n))


def test_bmm_backward():
    n = _node(lambda t: t.matmul("qk", t.ext(1), t.ext(1), 80, 1024, 64, 1024))
    assert _ops(n) == [("bmm", "bmm", (80, 1024, 1024, 64)), ("bmm", "bmm", (80, 64, 1024, 1024))]
    assert accumulation_ops(n) == []


@pytest.mark.parametrize(("op", "inputs", "expected"), [
    ("add", 2, [("mem", "mem", (4096 * 1280,))] * 2),
    ("addu", 1, [("mem", "mem", (4096 * 1280,))]),
    ("mul", 2, [("vec", "mul", (4096, 1280))] * 2),
    ("mulu", 1, [("vec", "mulu", (4096, 1280))]),
    ("div", 2, [("vec", "div", (4096, 1280))] * 2),
    ("divu", 1, [("vec", "divu", (4096, 1280))]),
    ("powu", 1, [("vec", "powu", (4096, 1280)), ("vec", "mul", (4096, 1280)), ("vec", "mulu", (4096, 1280))]),
    ("tanh", 1, [("vec", "mulu", (4096, 1280)), ("vec", "addu", (4096, 1280))]),
    ("softmax", 1, [("vec", "mul", (4096, 1280)), ("vec", "softmax", (4096, 1280))]),
    ("ln", 1, [("vec", "mul", (4096, 1280))]),
    ("gelu", 1, [("vec", "gelu", (4096, 1280))]),
    ("relu", 1, [("vec", "relu", (4096, 1280))]),
])
def test_vector_rules(op, inputs, expected):
    n = _node(lambda t: t.vec("v", op, [t.ext(4096 * 1280)] * inputs, 4096, 1280))
    assert _ops(n) == expected


def test_memory_rules():
    emb = _node(lambda t: t.embedding("wte", t.ext(4096), 50257, 1280))
    assert _ops(emb) == [("mem", "mem", (50257 * 1280,))] * 2
    assert [o.h for o in accumulation_ops(emb)] == [50257 * 1280]
    shared = _node(lambda t: t.embedding("wte", t.ext(4096), 50257, 1280, owns=False))
    assert accumulation_ops(shared) == [] and len(_ops(shared)) == 2
    where = _node(lambda t: t.mem("where", [t.ext(1024 * 1024), t.ext(80 * 1024 * 1024), t.ext(1)], 80 * 1024 ** 2))
    assert _ops(where) == [("mem", "mem", (1024 ** 2 + 80 * 1024 ** 2 + 1,))] * 2  # inputs, twice
    rsqrt = _node(lambda t: t.mem("rsqrt", [t.ext(512)], 512, grad="rsqrt"))
    assert _ops(rsqrt) == [("mem", "mem", (1024,))]


def test_every_builder_rule_has_a_table_entry():
    from tilecast.graph import build_graph  # noqa: F401  (building all families exercises every rule)
    from tilecast.graph.build import as_workload, record
    from tilecast.specs import all_models

    def dtype(key: str) -> str:
        return "bf16" if all_models()[key].family == "moe" else "fp32"

    rules = {n.grad for key in all_models()
             for n in record(as_workload(key, 1, 16, "training", dtype=dtype(key))).nodes}
    assert rules <= set(BACKWARD)


def test_unknown_rule_is_named():
    t = Tape()
    t.vec("odd", "cosh", [t.ext(4)], 1, 4)
    with pytest.raises(KeyError, match="'odd': no backward rule 'cosh'"):
        backward_ops(t.nodes[0])
