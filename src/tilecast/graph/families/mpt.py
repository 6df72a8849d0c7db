"""MosaicML MPT decoders as llm-foundry trains them (``MPTForCausalLM``, ``attn_impl: flash``).

Per block: LayerNorm, one fused ``Wqkv`` projection (split into q, k, v by views: no kernel), attention,
``out_proj``, residual add, LayerNorm, the ``up_proj`` -> GELU -> ``down_proj`` MLP, residual add. Dropouts
are 0 in MPTConfig (no kernel). Options read
from the model's config (MPTConfig's defaults in brackets): ``no_bias`` [false] drops every linear and norm
bias; ``learned_pos_emb`` [true] adds a learned position table (a gather and an add); ``attn_config.alibi``
[false] biases the scores instead (no kernel of its own: the attention kernel adds it). The LM head is the
token embedding (tied).

Fused attention (half precisions) follows llm-foundry's flash path: ``unpad_input`` gathers q, k and v
into token-major buffers and ``pad_input`` scatters the output back (one copy each), around one
FlashAttention kernel. In fp32 the eager chain of ``scaled_multihead_dot_product_attention`` is recorded
(scores, scale, causal mask, softmax, context).
"""

from __future__ import annotations

from tilecast.graph.blocks import Ctx, activation, softmax_attention
from tilecast.graph.tape import Tensor


def _flag(c: Ctx, key: str, default: bool, section: str | None = None) -> bool:
    cfg = c.spec.config.get(section) or {} if section else c.spec.config
    value = cfg.get(key)
    return default if value is None else bool(value)


def biased(c: Ctx) -> bool:
    """Linears and norms carry biases unless ``no_bias``."""
    return not _flag(c, "no_bias", False)


def norm(c: Ctx, name: str, x: Tensor) -> Tensor:
    """``LPLayerNorm`` (one layer-norm kernel in the compute dtype); weight, and bias unless ``no_bias``."""
    h = c.spec.hidden_size
    return c.tape.vec(name, "ln", [x], c.tokens, h, params=(h, h) if biased(c) else (h,))


def attention(c: Ctx, x: Tensor) -> Tensor:
    """``MultiheadAttention``: ``Wqkv``, split, attention (flash or eager), ``out_proj``."""
    t, s = c.tape, c.spec
    T, S, H, nh, hd = c.tokens, c.seq, s.hidden_size, s.num_heads, s.head_dim
    bias = biased(c)
    qkv = t.linear("attn.Wqkv", x, T, H, 3 * H, bias=bias)
    q = k = v = Tensor(qkv.node, T * H)  # qkv.chunk(3): views, no kernel; each a third of the fused output
    if c.fused_attention:
        q, k, v = (t.mem(f"attn.unpad.{n}", [x_], T * H) for n, x_ in zip("qkv", (q, k, v), strict=True))
        ctx = t.attention("attn.flash", q, k, v, c.batch, S, S + c.cached, nh, nh, hd)
        ctx = t.mem("attn.pad_output", [ctx], T * H)
    else:
        rows = c.batch * nh * S
        scores = t.matmul("attn.scores", q, k, c.batch * nh, S, hd, S)
        scores = t.vec("attn.scale", "mulu", [scores], rows, S)
        scores = t.mem("attn.causal_mask", [scores], scores.numel)
        ctx = t.mem("attn.contiguous", [softmax_attention(c, "attn", scores, v, nh, S, S, hd)], T * H)
    return t.linear("attn.out_proj", ctx, T, H, H, bias=bias)


def mlp(c: Ctx, x: Tensor) -> Tensor:
    """``MPTMLP``: ``up_proj`` -> exact GELU -> ``down_proj``."""
    t, s = c.tape, c.spec
    T, H, F = c.tokens, s.hidden_size, s.intermediate_size
    h = t.linear("mlp.up_proj", x, T, H, F, bias=biased(c))
    h = activation(c, "mlp.act", h, T, F, s.activation)
    return t.linear("mlp.down_proj", h, T, F, H, bias=biased(c))


def build(c: Ctx) -> None:
    """Token (+ learned position) embedding, ``n_layers`` pre-LN blocks, final LN, tied LM head."""
    t, s = c.tape, c.spec
    T, H = c.tokens, s.hidden_size
    t.at("prologue")
    x = t.embedding("wte", t.ext(T), s.vocab_size, H)
    if _flag(c, "learned_pos_emb", True) and not _flag(c, "alibi", False, "attn_config"):
        pos = t.embedding("wpe", t.ext(T), s.max_positions, H)
        x = t.vec("embed.add", "add", [x, pos], T, H)
    for i in range(s.num_layers):
        t.at("layer", i)
        x = t.vec("attn.residual", "add", [x, attention(c, norm(c, "norm_1", x))], T, H)
        x = t.vec("mlp.residual", "add", [x, mlp(c, norm(c, "norm_2", x))], T, H)
    t.at("epilogue")
    x = norm(c, "norm_f", x)
    t.hold(t.linear("lm_head", x, T, H, s.vocab_size, bias=False))
    t.tied_params(s.vocab_size * H)  # the LM head is wte.weight
