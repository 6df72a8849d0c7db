"""BERT encoders: ``BertForSequenceClassification`` at inference, ``BertForPreTraining`` in training.

These are the heads the labels were measured with (the catalog configs say ``BertLMHeadModel``).
"""

from __future__ import annotations

from tilecast.graph.blocks import Ctx, activation, dropout, softmax_attention
from tilecast.graph.tape import Tensor

NUM_LABELS = 2  # sequence-classification head of the labels' inference runs


def attention(c: Ctx, x: Tensor, mask: Tensor) -> Tensor:
    """``BertSelfAttention`` + ``BertSelfOutput`` dense (the residual and LN are the caller's)."""
    t, s = c.tape, c.spec
    T, S, H, nh, hd = c.tokens, c.seq, s.hidden_size, s.num_heads, s.head_dim
    q = t.linear("attention.self.query", x, T, H, H)
    k = t.linear("attention.self.key", x, T, H, H)
    v = t.linear("attention.self.value", x, T, H, H)
    scores = t.matmul("attention.scores", q, k, c.batch * nh, S, hd, S)
    rows = c.batch * nh * S
    scores = t.vec("attention.scale", "divu", [scores], rows, S)
    scores = t.vec("attention.mask", "add", [scores, mask], rows, S)
    ctx = softmax_attention(c, "attention", scores, v, nh, S, S, hd)
    ctx = t.mem("attention.contiguous", [ctx], T * H)
    return dropout(c, "attention.output.dropout", t.linear("attention.output.dense", ctx, T, H, H))


def layer(c: Ctx, x: Tensor, mask: Tensor) -> Tensor:
    """``BertLayer``: post-LN attention and feed-forward blocks."""
    t, s = c.tape, c.spec
    T, H, F = c.tokens, s.hidden_size, s.intermediate_size
    x = t.ln("attention.output.LayerNorm", t.vec("attention.residual", "add", [attention(c, x, mask), x], T, H),
             T, H)
    h = activation(c, "intermediate.act", t.linear("intermediate.dense", x, T, H, F), T, F, s.activation)
    h = dropout(c, "output.dropout", t.linear("output.dense", h, T, F, H))
    return t.ln("output.LayerNorm", t.vec("output.residual", "add", [h, x], T, H), T, H)


def build(c: Ctx) -> None:
    """Embeddings (word gathered; position and token type free), encoder layers, then the head."""
    t, s = c.tape, c.spec
    B, S, T, H = c.batch, c.seq, c.tokens, s.hidden_size
    t.at("prologue")
    t.mem("token_type_ids.slice", [t.ext(s.max_positions), t.ext(1)], S)
    ext = t.mem("mask.expand", [t.ext(B * S)], B * S)
    mask = t.vec("mask.scale", "mulu", [ext], B, S)
    t.mem("position_ids.slice", [t.ext(s.max_positions), t.ext(1)], S)
    x = t.embedding("embeddings.word_embeddings", t.ext(T), s.vocab_size, H)
    t.free_params((s.max_positions + s.type_vocab_size) * H)  # position / token-type lookups: free
    x = t.vec("embeddings.add_token_type", "add", [x, t.ext(T * H)], T, H)
    x = t.vec("embeddings.add_position", "add", [x, t.ext(S * H)], T, H)
    x = dropout(c, "embeddings.dropout", t.ln("embeddings.LayerNorm", x, T, H))
    for i in range(s.num_layers):
        t.at("layer", i)
        x = layer(c, x, mask)
    t.at("epilogue")
    first = t.mem("pooler.first_token", [x], B * H)
    pooled = activation(c, "pooler.activation", t.linear("pooler.dense", first, B, H, H), B, H, "tanh")
    if not c.training:
        t.hold(t.linear("classifier", dropout(c, "dropout", pooled), B, H, NUM_LABELS))
        return
    h = t.linear("cls.predictions.transform.dense", x, T, H, H)
    h = t.ln("cls.predictions.transform.LayerNorm", activation(c, "cls.predictions.transform.act", h, T, H,
                                                                s.activation), T, H)
    t.linear("cls.predictions.decoder", h, T, H, s.vocab_size)
    t.tied_params(s.vocab_size * H)  # decoder.weight is the word embedding
    t.linear("cls.seq_relationship", pooled, B, H, 2)
