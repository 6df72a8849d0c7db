"""Llama-style decoders (``LlamaForCausalLM``, eager attention): RMSNorm, rotary, GQA, SwiGLU.

No reference graph ships for this family; the kernels follow the HF modules op by op in the
reference's vocabulary (slices and concatenations as MEM, ``-x`` as ``neg``).
"""

from __future__ import annotations

from tilecast.graph.blocks import Ctx, activation, rms_norm, softmax_attention
from tilecast.graph.tape import Tensor


def rotary(c: Ctx, name: str, x: Tensor, heads: int, cos: Tensor, sin: Tensor) -> Tensor:
    """``apply_rotary_pos_emb`` on one of q / k: ``x * cos + rotate_half(x) * sin``."""
    t, hd = c.tape, c.spec.head_dim
    rows, n = c.batch * heads * c.seq, x.numel
    a = t.vec(f"{name}.mul_cos", "mul", [x, cos], rows, hd)
    x1 = t.mem(f"{name}.x1", [x], n // 2, alias=True)  # slices: views
    x2 = t.vec(f"{name}.neg", "neg", [t.mem(f"{name}.x2", [x], n // 2, alias=True)], rows, hd // 2)
    rot = t.mem(f"{name}.cat", [x2, x1], n)
    b = t.vec(f"{name}.mul_sin", "mul", [rot, sin], rows, hd)
    return t.vec(f"{name}.add", "add", [a, b], rows, hd)


def attention(c: Ctx, x: Tensor, mask: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``LlamaAttention``: q/k/v projections (GQA), rotary, repeat_kv, scaled masked softmax, o_proj."""
    t, s = c.tape, c.spec
    T, S, H, nh, nkv, hd = c.tokens, c.seq, s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim
    q = rotary(c, "attn.q_rotary", t.linear("attn.q_proj", x, T, H, nh * hd, bias=False), nh, cos, sin)
    k = rotary(c, "attn.k_rotary", t.linear("attn.k_proj", x, T, H, nkv * hd, bias=False), nkv, cos, sin)
    v = t.linear("attn.v_proj", x, T, H, nkv * hd, bias=False)
    t.hold(k, v)  # use_cache: the cache keeps the rotated keys and the values (before repeat_kv)
    if nkv != nh:  # repeat_kv: expand + reshape materialises nh heads
        k = t.mem("attn.repeat_k", [k], T * nh * hd)
        v = t.mem("attn.repeat_v", [v], T * nh * hd)
    rows = c.batch * nh * S
    scores = t.matmul("attn.scores", q, k, c.batch * nh, S, hd, S)
    scores = t.vec("attn.scale", "mulu", [scores], rows, S)
    scores = t.vec("attn.mask", "add", [scores, t.mem("attn.mask_slice", [mask], mask.numel)], rows, S)
    ctx = t.mem("attn.contiguous", [softmax_attention(c, "attn", scores, v, nh, S, S, hd)], T * nh * hd)
    return t.linear("attn.o_proj", ctx, T, nh * hd, H, bias=False)


def mlp(c: Ctx, x: Tensor) -> Tensor:
    """``LlamaMLP``: ``down(act(gate(x)) * up(x))``."""
    t, s = c.tape, c.spec
    T, H, F = c.tokens, s.hidden_size, s.intermediate_size
    gate = activation(c, "mlp.act", t.linear("mlp.gate_proj", x, T, H, F, bias=False), T, F, s.activation)
    up = t.linear("mlp.up_proj", x, T, H, F, bias=False)
    return t.linear("mlp.down_proj", t.vec("mlp.mul", "mul", [gate, up], T, F), T, F, H, bias=False)


def build(c: Ctx) -> None:
    """Embedding, rotary tables and causal mask, pre-RMSNorm blocks, final norm, LM head."""
    t, s = c.tape, c.spec
    B, S, T, H, hd = c.batch, c.seq, c.tokens, s.hidden_size, s.head_dim
    t.at("prologue")
    x = t.embedding("embed_tokens", t.ext(T), s.vocab_size, H)
    freqs = t.matmul("rotary.freqs", t.ext(B * hd // 2), t.ext(B * S), B, hd // 2, 1, S)  # inv_freq @ pos
    emb = t.mem("rotary.cat", [freqs, freqs], B * S * hd)
    cos = t.mem("rotary.cos", [emb], B * S * hd)
    sin = t.mem("rotary.sin", [emb], B * S * hd)
    mask = t.mem("causal_mask.expand", [t.ext(S * S)], B * S * S)
    for i in range(s.num_layers):
        t.at("layer", i)
        a = attention(c, rms_norm(c, "input_layernorm", x, T, H), mask, cos, sin)
        x = t.vec("attn.residual", "add", [x, a], T, H)
        x = t.vec("mlp.residual", "add", [x, mlp(c, rms_norm(c, "post_attention_layernorm", x, T, H))], T, H)
    t.at("epilogue")
    x = rms_norm(c, "norm", x, T, H)
    t.hold(t.linear("lm_head", x, T, H, s.vocab_size, bias=False))
    if s.tie_word_embeddings:
        t.tied_params(s.vocab_size * H)
