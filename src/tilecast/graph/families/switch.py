"""Switch Transformers (``SwitchTransformersForConditionalGeneration``): a T5 encoder-decoder whose
every ``sparse_step``-th feed-forward is a mixture of experts. The decoder runs ``seq_len`` tokens too.

Block 0 of each stack computes the relative position bias once for all blocks; it is tagged
``prologue`` (hoisted) so ``layer`` ops stay the same in every block.
"""

from __future__ import annotations

from tilecast.graph.blocks import Ctx, activation, dropout, rms_norm, softmax_attention
from tilecast.graph.families.moe import is_sparse, router_losses, sparse_mlp
from tilecast.graph.tape import Tensor

NUM_BUCKETS = "relative_attention_num_buckets"


def position_bias(c: Ctx, mask: Tensor, bidirectional: bool) -> Tensor:
    """``compute_bias``: relative-position buckets on S x S, the bias table lookup, plus the mask."""
    t, s, S = c.tape, c.spec, c.seq
    t.mem("bias.context_position", [t.ext(S)], S)
    t.mem("bias.memory_position", [t.ext(S)], S)
    if bidirectional:
        pos = t.vec("bias.positive", "mulu", [t.ext(S * S)], S, S)
        t.vec("bias.offset", "addu", [pos], S, S)
    large = t.vec("bias.log_ratio", "divu", [t.ext(S * S)], S, S)
    large = t.vec("bias.log_scale", "divu", [large], S, S)
    large = t.vec("bias.log_mul", "mulu", [large], S, S)
    large = t.vec("bias.log_add", "addu", [large], S, S)
    buckets = t.mem("bias.where", [t.ext(S * S), t.ext(S * S), large], S * S)
    if bidirectional:
        buckets = t.vec("bias.buckets", "add", [buckets, t.ext(S * S)], S, S)
    else:
        buckets = t.vec("bias.buckets", "addu", [buckets], S, S)
    bias = t.embedding("relative_attention_bias", buckets, s.config.get(NUM_BUCKETS, 32), s.num_heads)
    return t.vec("bias.add_mask", "add", [bias, mask], c.batch * s.num_heads * S, S)


def attention(c: Ctx, name: str, x: Tensor, kv: Tensor, bias: Tensor, cache: bool = False) -> Tensor:
    """``SwitchTransformersAttention`` (T5: no scaling; position bias and mask added to the scores);
    ``cache``: a decoder block's key / value projections are returned (use_cache)."""
    t, s = c.tape, c.spec
    T, S, H, nh, d = c.tokens, c.seq, s.hidden_size, s.num_heads, s.head_dim
    inner = nh * d
    q = t.linear(f"{name}.q", x, T, H, inner, bias=False)
    k = t.linear(f"{name}.k", kv, T, H, inner, bias=False)
    v = t.linear(f"{name}.v", kv, T, H, inner, bias=False)
    if cache:
        t.hold(k, v)
    scores = t.matmul(f"{name}.scores", q, k, c.batch * nh, S, d, S)
    scores = t.vec(f"{name}.add_bias", "add", [scores, bias], c.batch * nh * S, S)
    ctx = t.mem(f"{name}.contiguous", [softmax_attention(c, name, scores, v, nh, S, S, d)], T * inner)
    return dropout(c, f"{name}.dropout", t.linear(f"{name}.o", ctx, T, inner, H, bias=False))


def feed_forward(c: Ctx, block: int, x: Tensor) -> Tensor:
    """Dense ``wi -> act -> dropout -> wo`` or the sparse MLP, then dropout."""
    t, s = c.tape, c.spec
    T, H, F = c.tokens, s.hidden_size, s.intermediate_size
    h = rms_norm(c, "ff.layer_norm", x, T, H)
    if is_sparse(c, block):
        h = sparse_mlp(c, h)
    else:
        h = t.linear("ff.wi", h, T, H, F, bias=False)
        h = dropout(c, "ff.dropout", activation(c, "ff.act", h, T, F, s.activation))
        h = t.linear("ff.wo", h, T, F, H, bias=False)
    return t.vec("ff.residual", "add", [x, dropout(c, "ff.out_dropout", h)], T, H)


def self_attention_block(c: Ctx, x: Tensor, bias: Tensor, cache: bool = False) -> Tensor:
    h = rms_norm(c, "attn.layer_norm", x, c.tokens, c.spec.hidden_size)
    return c.tape.vec("attn.residual", "add", [x, attention(c, "attn", h, h, bias, cache)], c.tokens,
                      c.spec.hidden_size)


def build(c: Ctx) -> None:
    """Encoder stack, decoder stack (self- and cross-attention), scaled LM head, router losses."""
    t, s = c.tape, c.spec
    B, S, T, H, nh = c.batch, c.seq, c.tokens, s.hidden_size, s.num_heads
    n_enc, n_dec = s.num_layers, s.num_decoder_layers
    t.at("prologue")
    x = dropout(c, "encoder.dropout", t.embedding("shared", t.ext(T), s.vocab_size, H))
    enc_mask = t.vec("encoder.mask", "mulu", [t.mem("encoder.mask_expand", [t.ext(B * S)], B * S)], B, S)
    enc_bias = position_bias(c, enc_mask, bidirectional=True)
    for i in range(n_enc):
        t.at("layer", i)
        x = feed_forward(c, i, self_attention_block(c, x, enc_bias))
    t.at("prologue")
    enc = dropout(c, "encoder.final_dropout", rms_norm(c, "encoder.final_layer_norm", x, T, H))
    t.hold(enc)  # encoder_last_hidden_state is returned
    t.mem("decoder.causal.arange_q", [t.ext(S)], S)
    t.mem("decoder.causal.arange_k", [t.ext(S)], S)
    causal = t.mem("decoder.causal.expand", [t.ext(B * S * S)], B * S * S)
    pad = t.mem("decoder.mask_expand", [t.ext(B * S)], B * S)
    dmask = t.vec("decoder.causal.mul", "mul", [causal, pad], B * S, S)
    dmask = t.vec("decoder.causal.scale", "mulu", [dmask], B * S, S)
    xmask = t.vec("decoder.cross_mask", "mulu", [t.mem("decoder.cross_mask_expand", [t.ext(B * S)], B * S)],
                  B, S)
    y = dropout(c, "decoder.dropout", t.embedding("shared", t.ext(T), s.vocab_size, H, owns=False))
    self_bias = position_bias(c, dmask, bidirectional=False)
    cross_bias = t.vec("cross.bias.add_mask", "add", [t.ext(nh * S * S), xmask], B * nh * S, S)
    for i in range(n_dec):
        t.at("layer", n_enc + i)
        y = self_attention_block(c, y, self_bias, cache=True)
        h = rms_norm(c, "cross.layer_norm", y, T, H)
        y = t.vec("cross.residual", "add", [y, attention(c, "cross", h, enc, cross_bias, cache=True)], T, H)
        y = feed_forward(c, i, y)
    t.at("epilogue")
    y = dropout(c, "decoder.final_dropout", rms_norm(c, "decoder.final_layer_norm", y, T, H))
    y = t.vec("lm_head.scale", "mulu", [y], T, H)  # tied embeddings: x * d_model ** -0.5
    t.hold(t.linear("lm_head", y, T, H, s.vocab_size, bias=False))
    if s.tie_word_embeddings:
        t.tied_params(s.vocab_size * H)
    router_losses(c, sum(is_sparse(c, i) for i in range(n_enc)))
    router_losses(c, sum(is_sparse(c, i) for i in range(n_dec)))
