"""OPT decoders (``OPTForCausalLM``)."""

from __future__ import annotations

from tilecast.graph.blocks import Ctx, activation, dropout, softmax_attention
from tilecast.graph.tape import Tensor


def attention(c: Ctx, x: Tensor, mask: Tensor) -> Tensor:
    """``OPTAttention``: q (scaled), k, v projections made contiguous per head, masked softmax, out_proj."""
    t, s = c.tape, c.spec
    T, S, H, nh, hd = c.tokens, c.seq, s.hidden_size, s.num_heads, s.head_dim
    q = t.vec("attn.scaling", "mulu", [t.linear("attn.q_proj", x, T, H, H)], T, H)
    k = t.mem("attn.k_contiguous", [t.linear("attn.k_proj", x, T, H, H)], T * H)
    v = t.mem("attn.v_contiguous", [t.linear("attn.v_proj", x, T, H, H)], T * H)
    q = t.mem("attn.q_contiguous", [q], T * H)
    t.hold(k, v)  # use_cache: the per-head key / value copies are returned
    if c.fused_attention:  # SDPA / FlashAttention: no score matrix, causal mask implied
        ctx = t.attention("attn.sdpa", q, k, v, c.batch, S, S + c.cached, nh, nh, hd)
        return t.linear("attn.out_proj", ctx, T, H, H)
    scores = t.matmul("attn.scores", q, k, c.batch * nh, S, hd, S)
    scores = t.vec("attn.mask", "add", [scores, mask], c.batch * nh * S, S)
    ctx = softmax_attention(c, "attn", scores, v, nh, S, S, hd)
    return t.linear("attn.out_proj", ctx, T, H, H)


def build(c: Ctx) -> None:
    """Embeddings with OPT's learned positions (offset 2), pre-LN blocks, final LN, LM head."""
    t, s = c.tape, c.spec
    B, S, T, H, F = c.batch, c.seq, c.tokens, s.hidden_size, s.intermediate_size
    P = s.word_embed_proj_dim or H  # != H: project_in / project_out around the decoder (opt-350m style)
    t.at("prologue")
    x = t.embedding("embed_tokens", t.ext(T), s.vocab_size, P)
    if P != H:
        x = t.linear("project_in", x, T, P, H, bias=False)
    t.vec("mask.cond", "addu", [t.ext(S)], 1, S)
    causal = t.mem("mask.causal", [t.ext(S * S)], S * S)
    t.mem("mask.expand", [t.ext(B * S)], B * S)
    pos = t.mem("positions.cumsum", [t.ext(B * S)], B * S)
    pos = t.vec("positions.mul", "mul", [pos, t.ext(B * S)], B, S)
    pos = t.mem("positions.slice", [pos], B * S)
    t.vec("positions.offset", "addu", [pos], B, S)
    t.free_params((s.max_positions + 2) * H)  # embed_positions lookup: free (docs/method.md §2)
    mask = Tensor(causal.node, B * S * S)  # the (B, 1, S, S) combined mask (free ops) the layers add
    x = t.vec("embed.add", "add", [x, t.ext(T * H)], T, H)
    for i in range(s.num_layers):
        t.at("layer", i)
        a = attention(c, t.ln("self_attn_layer_norm", x, T, H), mask)
        x = t.vec("attn.residual", "add", [x, dropout(c, "attn.dropout", a)], T, H)
        h = t.linear("fc1", t.ln("final_layer_norm", x, T, H), T, H, F)
        h = t.linear("fc2", activation(c, "activation_fn", h, T, F, s.activation), T, F, H)
        x = t.vec("mlp.residual", "add", [x, dropout(c, "mlp.dropout", h)], T, H)
    t.at("epilogue")
    x = t.ln("final_layer_norm", x, T, H)
    if P != H:
        x = t.linear("project_out", x, T, H, P, bias=False)
    logits = t.linear("lm_head", x, T, P, s.vocab_size, bias=False)
    t.tied_params(s.vocab_size * P)  # lm_head.weight is the token embedding
    t.hold(t.mem("logits.contiguous", [logits], logits.numel, alias=True))  # already contiguous: a no-op
