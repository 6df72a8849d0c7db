"""Switch-Transformer mixture of experts: the top-1 router, capacity-padded experts, router losses.

Each expert runs on a buffer padded to its capacity, ``batch x expert_capacity`` tokens (the HF
router keeps at most ``expert_capacity`` tokens per expert and sequence), whatever the routing;
the gather / scatter copies move the tokens actually routed, taken as an even split of the tokens
capped at capacity (the reference trace recorded one random routing instead).
"""

from __future__ import annotations

import math

from tilecast.graph.blocks import Ctx, activation, dropout
from tilecast.graph.tape import Tensor


def capacity(c: Ctx) -> int:
    """Rows each expert's GEMMs run on: the capacity-padded buffer."""
    return c.batch * c.spec.expert_capacity


def routed_tokens(c: Ctx) -> int:
    """Tokens an expert receives under an even split, capped at its capacity."""
    return min(capacity(c), math.ceil(c.tokens / c.spec.num_experts))


def sparse_mlp(c: Ctx, x: Tensor) -> Tensor:
    """``SwitchTransformersSparseMLP``: route, run every expert on its buffer, scale by router probs."""
    t, s = c.tape, c.spec
    T, H, F, E = c.tokens, s.hidden_size, s.intermediate_size, s.num_experts
    cap, n = capacity(c), routed_tokens(c)
    r_in = x
    if c.training:  # router jitter noise: x * U(1-eps, 1+eps)
        r_in = t.vec("router.jitter", "mul", [x, t.ext(T * H)], T, H)
    logits = t.linear("router.classifier", r_in, T, H, E, bias=False)
    probs = t.vec("router.softmax", "softmax", [logits], T, E)
    prio = t.mem("router.cumsum", [t.ext(T * E)], T * E)
    mask = t.vec("router.capacity_mask", "mul", [t.ext(T * E), prio], T, E)
    out = x
    for e in range(E):
        sel = t.mem(f"experts.{e}.select_mask", [mask], T)
        count = t.mem(f"experts.{e}.count", [sel], 1)
        rows = t.mem(f"experts.{e}.gather", [x, sel], n * H)
        buf = t.mem(f"experts.{e}.fill", [t.ext(cap * H), count, rows], 1)
        h = t.linear(f"experts.{e}.wi", Tensor(buf.node, cap * H), cap, H, F, bias=False)
        h = dropout(c, f"experts.{e}.dropout", activation(c, f"experts.{e}.act", h, cap, F, s.activation))
        h = t.linear(f"experts.{e}.wo", h, cap, F, H, bias=False)
        back = t.mem(f"experts.{e}.take", [h, count], n * H)
        out = t.mem(f"experts.{e}.scatter", [Tensor(out.node, T * H), sel, back], 1)
    return t.vec("router.scale", "mul", [Tensor(probs.node, T), Tensor(out.node, T * H)], T, H)


def router_losses(c: Ctx, n_sparse: int) -> None:
    """z-loss and load-balancing loss over the concatenated router logits of one stack."""
    if n_sparse == 0:
        return
    t, E, B = c.tape, c.spec.num_experts, c.batch
    L = n_sparse * c.seq
    t.vec("router_z_loss.pow", "powu", [t.ext(B * L)], B, L)
    probs = t.vec("router_aux_loss.softmax", "softmax", [t.ext(B * L * E)], B * L, E)
    tokens = t.mem("router_aux_loss.tokens_per_expert", [t.ext(B * L * E)], B * E)
    prob_mean = t.mem("router_aux_loss.prob_per_expert", [probs], B * E)
    prod = t.vec("router_aux_loss.mul", "mul", [tokens, prob_mean], B, E)
    t.mem("router_aux_loss.mean", [prod], 1)


def is_sparse(c: Ctx, block: int) -> bool:
    """HF's rule: block ``i`` has experts when ``i % sparse_step == 1`` (every block for step 1)."""
    step = c.spec.sparse_step
    return c.spec.num_experts > 0 and step > 0 and (step == 1 or block % step == 1)
