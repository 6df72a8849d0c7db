"""GPT-2 style decoders (``GPT2LMHeadModel``: the gpt2_* and gpt3_* configs)."""

from __future__ import annotations

from tilecast.graph.blocks import Ctx, activation, dropout, softmax_attention
from tilecast.graph.tape import Tensor


def attention(c: Ctx, x: Tensor) -> Tensor:
    """``GPT2Attention``: fused QKV Conv1D, split, scaled scores, causal ``where``, softmax, projection."""
    t, s = c.tape, c.spec
    T, S, H, nh, hd = c.tokens, c.seq, s.hidden_size, s.num_heads, s.head_dim
    qkv = t.linear("attn.c_attn", x, T, H, 3 * H)
    t.hold(qkv)  # use_cache: the returned key / value are views of the fused QKV output
    q, k, v = (t.mem(f"attn.split.{p}", [Tensor(qkv.node, 1)], T * H, alias=True) for p in "qkv")
    if c.fused_attention:  # SDPA / FlashAttention: no score matrix, causal mask implied
        ctx = t.attention("attn.sdpa", q, k, v, c.batch, S, S + c.cached, nh, nh, hd)
        return dropout(c, "attn.resid_dropout", t.linear("attn.c_proj", ctx, T, H, H))
    scores = t.matmul("attn.scores", q, k, c.batch * nh, S, hd, S)
    scores = t.vec("attn.scale", "div", [scores, t.ext(1)], c.batch * nh * S, S)  # / torch.full(sqrt(d))
    causal = t.mem("attn.bias_slice", [t.ext(s.max_positions ** 2), t.ext(1), t.ext(1)], S * S, alias=True)
    scores = t.mem("attn.where", [causal, scores, t.ext(1)], scores.numel)
    ctx = softmax_attention(c, "attn", scores, v, nh, S, S, hd)
    ctx = t.mem("attn.contiguous", [ctx], T * H)
    out = t.linear("attn.c_proj", ctx, T, H, H)
    return dropout(c, "attn.resid_dropout", out)


def mlp(c: Ctx, x: Tensor) -> Tensor:
    """``GPT2MLP``: c_fc, activation, c_proj, dropout."""
    t, s = c.tape, c.spec
    T, H, F = c.tokens, s.hidden_size, s.intermediate_size
    h = t.linear("mlp.c_fc", x, T, H, F)
    h = activation(c, "mlp.act", h, T, F, s.activation)
    h = t.linear("mlp.c_proj", h, T, F, H)
    return dropout(c, "mlp.dropout", h)


def build(c: Ctx) -> None:
    """Token + position embedding, ``num_layers`` pre-LN blocks, final LN and the LM head."""
    t, s = c.tape, c.spec
    T, H = c.tokens, s.hidden_size
    t.at("prologue")
    x = t.embedding("wte", t.ext(T), s.vocab_size, H)
    t.free_params(s.max_positions * H)  # wpe lookup: free (docs/method.md §2)
    x = t.vec("embed.add", "add", [x, t.ext(c.seq * H)], T, H)
    x = dropout(c, "drop", x)
    for i in range(s.num_layers):
        t.at("layer", i)
        a = attention(c, t.ln("ln_1", x, T, H))
        x = t.vec("attn.residual", "add", [x, a], T, H)
        m = mlp(c, t.ln("ln_2", x, T, H))
        x = t.vec("mlp.residual", "add", [x, m], T, H)
    t.at("epilogue")
    x = t.ln("ln_f", x, T, H)
    t.hold(t.linear("lm_head", x, T, H, s.vocab_size, bias=False))
    t.tied_params(s.vocab_size * H)  # lm_head.weight is the token embedding
