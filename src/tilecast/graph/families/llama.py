"""Llama-style decoders (``LlamaForCausalLM``, eager attention): RMSNorm, rotary, GQA, SwiGLU; with
``ModelSpec.qk_norm`` also Qwen3's per-head q / k RMSNorm (``Qwen3ForCausalLM``).

No reference graph ships for this family; the kernels follow the HF modules op by op in the
reference's vocabulary (slices and concatenations as MEM, ``-x`` as ``neg``).

With ``Ctx.engine`` (a serving workload) the kernels are a serving engine's (vLLM / TensorRT-LLM) instead:
one QKV GEMM and one gate-up GEMM per layer, a fused residual-add + RMSNorm, one rotary kernel over q
and k, fused attention over the KV cache, a fused SiLU x mul, and logits of each sequence's last token.
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


def qk_norm(c: Ctx, name: str, x: Tensor, heads: int) -> Tensor:
    """Qwen3's ``q_norm`` / ``k_norm``: RMSNorm over each head's ``head_dim`` (a no-op without ``qk_norm``)."""
    return rms_norm(c, name, x, c.tokens * heads, c.spec.head_dim) if c.spec.qk_norm else x


def attention(c: Ctx, x: Tensor, mask: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``LlamaAttention``: q/k/v projections (GQA), rotary, repeat_kv, scaled masked softmax, o_proj."""
    t, s = c.tape, c.spec
    T, S, H, nh, nkv, hd = c.tokens, c.seq, s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim
    q = t.linear("attn.q_proj", x, T, H, nh * hd, bias=False)
    q = rotary(c, "attn.q_rotary", qk_norm(c, "attn.q_norm", q, nh), nh, cos, sin)
    k = t.linear("attn.k_proj", x, T, H, nkv * hd, bias=False)
    k = rotary(c, "attn.k_rotary", qk_norm(c, "attn.k_norm", k, nkv), nkv, cos, sin)
    v = t.linear("attn.v_proj", x, T, H, nkv * hd, bias=False)
    t.hold(k, v)  # use_cache: the cache keeps the rotated keys and the values (before repeat_kv)
    if c.fused_attention:  # SDPA / FlashAttention: GQA read directly, no score matrix, causal mask implied
        ctx = t.attention("attn.sdpa", q, k, v, c.batch, S, S + c.cached, nh, nkv, hd)
        return t.linear("attn.o_proj", ctx, T, nh * hd, H, bias=False)
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


def engine_layer(c: Ctx, x: Tensor, residual: Tensor | None) -> tuple[Tensor, Tensor]:
    """One decoder layer as serving engines run it; returns (hidden, residual) for the next layer."""
    t, s = c.tape, c.spec
    T, S, H, nh, nkv, hd, F = (c.tokens, c.seq, s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim,
                               s.intermediate_size)
    norm_in = [x] if residual is None else [x, residual]  # fused_add_rms_norm reads both, writes both
    h = t.vec("input_layernorm", "rmsnorm", norm_in, T, H, params=(H,))
    qkv = t.linear("attn.qkv_proj", h, T, H, (nh + 2 * nkv) * hd, bias=False)
    if s.qk_norm:
        qkv = t.vec("attn.qk_norm", "rmsnorm", [qkv], T * (nh + nkv), hd, params=(hd, hd))
    qk = t.vec("attn.rotary", "rope", [qkv], T, (nh + nkv) * hd)
    t.hold(qk, qkv)
    ctx = t.attention("attn.attn", qk, qk, qkv, c.batch, S, S + c.cached, nh, nkv, hd)
    a = t.linear("attn.o_proj", ctx, T, nh * hd, H, bias=False)
    h = t.vec("post_attention_layernorm", "rmsnorm", [a, x], T, H, params=(H,))
    gate_up = t.linear("mlp.gate_up_proj", h, T, H, 2 * F, bias=False)
    act = t.vec("mlp.act", "mul", [gate_up], T, F)  # silu_and_mul: reads 2F, writes F per token
    return t.linear("mlp.down_proj", act, T, F, H, bias=False), a


def build_engine(c: Ctx) -> None:
    """Embedding, the engine's decoder layers, final fused norm, the LM head over last tokens."""
    t, s = c.tape, c.spec
    T, H = c.tokens, s.hidden_size
    t.at("prologue")
    x, residual = t.embedding("embed_tokens", t.ext(T), s.vocab_size, H), None
    for i in range(s.num_layers):
        t.at("layer", i)
        x, residual = engine_layer(c, x, residual)
    t.at("epilogue")
    x = t.vec("norm", "rmsnorm", [x, residual], T, H, params=(H,))
    last = t.mem("last_token", [x], c.batch * H, alias=True)
    t.hold(t.linear("lm_head", last, c.batch, H, s.vocab_size, bias=False))
    if s.tie_word_embeddings:
        t.tied_params(s.vocab_size * H)


def build(c: Ctx) -> None:
    """Embedding, rotary tables and causal mask, pre-RMSNorm blocks, final norm, LM head."""
    if c.engine:
        return build_engine(c)
    t, s = c.tape, c.spec
    B, S, T, H, hd = c.batch, c.seq, c.tokens, s.hidden_size, s.head_dim
    t.at("prologue")
    x = t.embedding("embed_tokens", t.ext(T), s.vocab_size, H)
    freqs = t.matmul("rotary.freqs", t.ext(B * hd // 2), t.ext(B * S), B, hd // 2, 1, S)  # inv_freq @ pos
    emb = t.mem("rotary.cat", [freqs, freqs], B * S * hd)
    cos = t.mem("rotary.cos", [emb], B * S * hd)
    sin = t.mem("rotary.sin", [emb], B * S * hd)
    mask = None if c.fused_attention else t.mem("causal_mask.expand", [t.ext(S * S)], B * S * S)
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
