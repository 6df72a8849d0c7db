"""Mixture-of-experts decoders (family ``moe``) as serving engines run them, one GPU's share of a :class:`Layout`.

Every layer records what vLLM / SGLang / TensorRT-LLM launch on one GPU of a ``tp x dp`` instance
(docs/method.md §21):

- **attention** on the GPU's attention rank: ``dp`` groups each serve ``ceil(batch / dp)`` sequences, split
  ``tp`` ways by heads (Megatron: column-parallel in, row-parallel out, an all-reduce over the ``tp`` GPUs):
  - GQA (full, sliding-window, chunked): one QKV GEMM (with the output gate of Qwen3.5), per-head q / k norm,
    one rotary kernel, fused attention (a sliding window caps the keys; sinks cost one extra logit per head,
    nothing measurable), the gate, the output GEMM;
  - MLA (DeepSeek, Kimi, GLM-5): the fused ``q_a`` / ``kv_a`` down-projection (replicated, as engines keep it),
    the latent norms, ``q_b``, rotary; a prompt decompresses keys and values (``kv_b``) and runs
    ``mla_prefill``; a decode step runs the absorbed form: ``q_nope x W_UK`` and ``out x W_UV`` as batched
    GEMMs around ``mla_decode`` over the latent cache. DeepSeek sparse attention adds the indexer (its
    projections and the scores of every query against every cached key) and caps decode attention at
    ``index_topk`` keys;
  - Gated DeltaNet (Qwen3.5's linear layers): the q / k / v / z and b / a projections, the causal convolution,
    ``gdn_prefill`` (chunked) or ``gdn_decode`` (one recurrent step), the gated norm, the output GEMM;
- **MLP**: a dense layer's gate-up / SiLU x mul / down (``tp`` split); a MoE layer's router GEMM, the shared
  experts as dense GEMMs (``tp`` split), then the routed experts as one fused ``moe`` op over all ``batch x seq``
  tokens of the instance on the GPU's ``experts / ep`` experts with ``inter / moe_tp`` features each. Tokens
  reach the experts by DeepEP all-to-all (``a2a_dispatch`` before, ``a2a_combine`` after; low-latency mode
  for decode, normal for a prompt) when attention is data parallel and the experts purely expert parallel
  (``dp > 1``, ``moe_tp = 1``); with ``dp = 1`` every GPU already holds every token and one all-reduce over the
  instance sums the experts' and the shared experts' partial outputs; with ``dp > 1`` and ``moe_tp > 1`` the
  tokens are all-gathered and the outputs reduce-scattered, costed as one all-reduce of all tokens.
- vocabulary-parallel embedding (all-reduced) and LM head (a serving step's last tokens only).

Training (``Ctx.training``) adds the router's probabilities and its auxiliary load-balancing loss per MoE
layer; the backward expansion (:mod:`tilecast.graph.training`) runs the fused MoE twice (input and weight
gradients), each all-to-all in the other direction and each all-reduce once more.
"""

from __future__ import annotations

from tilecast.graph.blocks import Ctx
from tilecast.graph.ops import make_attrs
from tilecast.graph.tape import Tensor
from tilecast.graph.work import DEFAULT_DISTRIBUTION
from tilecast.specs.layout import Layout


def layout_of(c: Ctx) -> Layout:
    """The context's layout (one GPU when none is given)."""
    return c.layout or Layout()


def _shape(c: Ctx) -> tuple[int, int, int]:
    """(local sequences, local tokens, tokens through the MoE group) of this step."""
    lay = layout_of(c)
    local = lay.local_batch(c.batch)
    return local, local * c.seq, c.tokens


def _linear(c: Ctx, name: str, x: Tensor, m: int, n: int, k: int, bias: bool = False) -> Tensor:
    return c.tape.linear(name, x, m, n, k, bias=bias)


def _tp_allreduce(c: Ctx, name: str, x: Tensor, tokens: int) -> Tensor:
    """The row-parallel output's all-reduce over the attention tensor-parallel group."""
    lay = layout_of(c)
    return c.tape.comm(name, "allreduce", x, tokens * c.spec.hidden_size, lay.tp, grad="allreduce")


def gqa(c: Ctx, x: Tensor, kind: str) -> Tensor:
    """GQA attention (full / sliding / chunked) on this GPU's heads; returns the output projection's result."""
    t, s, lay = c.tape, c.spec, layout_of(c)
    B, T, _ = _shape(c)
    H, hd = s.hidden_size, s.head_dim
    h, kv = s.num_heads // lay.tp, max(1, s.num_kv_heads // lay.tp)
    gate = 2 if s.attn_output_gate else 1  # Qwen3.5: q_proj yields the query and a sigmoid gate per head
    qkv = _linear(c, "attn.qkv_proj", x, T, H, (gate * h + 2 * kv) * hd, bias=s.attention_bias)
    if s.qk_norm:
        qkv = t.vec("attn.qk_norm", "rmsnorm", [qkv], T * (h + kv), hd, params=(hd, hd))
    rope = s.rotary_dim or hd
    qk = t.vec("attn.rotary", "rope", [qkv], T, (h + kv) * rope)
    t.hold(qk, qkv)
    window = s.sliding_window if kind in ("sliding", "chunked") else 0
    ctx = t.attention("attn.attn", qk, qk, qkv, B, c.seq, c.seq + c.cached, h, kv, hd, window=window)
    if s.attn_output_gate:
        ctx = t.vec("attn.output_gate", "mul", [ctx, qkv], T, h * hd)
    return _linear(c, "attn.o_proj", ctx, T, h * hd, H, bias=s.attention_bias)


def mla(c: Ctx, x: Tensor) -> Tensor:
    """Multi-head latent attention on this GPU's heads (module docstring)."""
    t, s, lay, a = c.tape, c.spec, layout_of(c), c.spec.mla
    B, T, _ = _shape(c)
    H, h = s.hidden_size, s.num_heads // lay.tp
    qk, latent = a.qk_head_dim, a.latent_dim
    if a.q_lora_rank:
        down = _linear(c, "attn.fused_qkv_a_proj", x, T, H, a.q_lora_rank + latent)
        q_in = t.vec("attn.q_a_layernorm", "rmsnorm", [down], T, a.q_lora_rank, params=(a.q_lora_rank,))
        q = _linear(c, "attn.q_b_proj", q_in, T, a.q_lora_rank, h * qk)
    else:
        down = _linear(c, "attn.kv_a_proj_with_mqa", x, T, H, latent)
        q_in = x
        q = _linear(c, "attn.q_proj", x, T, H, h * qk)
    kv = t.vec("attn.kv_a_layernorm", "rmsnorm", [down], T, a.kv_lora_rank, params=(a.kv_lora_rank,))
    q = t.vec("attn.rotary", "rope", [q, down], T, (h + 1) * a.qk_rope_head_dim)
    t.hold(kv)  # the cache: the latent and the rotary key of every token
    keys = c.seq + c.cached
    if s.sparse_attn is not None:
        keys = indexer(c, x, q_in, keys)
    dims = make_attrs(kv_lora=a.kv_lora_rank, rope=a.qk_rope_head_dim, nope=a.qk_nope_head_dim, v=a.v_head_dim)
    if c.seq > 1:  # a prompt: decompress keys and values per head, attention over them
        kv_full = _linear(c, "attn.kv_b_proj", kv, T, a.kv_lora_rank, h * (a.qk_nope_head_dim + a.v_head_dim))
        ctx = t.special("attn.mla", "mla", "mla_prefill", (B, c.seq, c.seq + c.cached, qk, h, 1), [q, kv_full],
                        T * h * a.v_head_dim, dims)
        out_features = h * a.v_head_dim
    else:  # a decode step: the absorbed form over the latent cache
        q_lat = t.add("attn.q_absorb", "bmm", "bmm", (h, T, a.qk_nope_head_dim, a.kv_lora_rank), [q],
                      h * T * a.kv_lora_rank, "bmm", params=(h * a.qk_nope_head_dim * a.kv_lora_rank,))
        ctx = t.special("attn.mla", "mla", "mla_decode", (B, 1, keys, qk, h, 1), [q_lat, kv],
                        T * h * a.kv_lora_rank, dims)
        ctx = t.add("attn.v_absorb", "bmm", "bmm", (h, T, a.kv_lora_rank, a.v_head_dim), [ctx],
                    h * T * a.v_head_dim, "bmm", params=(h * a.kv_lora_rank * a.v_head_dim,))
        out_features = h * a.v_head_dim
    return _linear(c, "attn.o_proj", ctx, T, out_features, H)


def indexer(c: Ctx, x: Tensor, q_in: Tensor, keys: int) -> int:
    """DeepSeek sparse attention's lightning indexer: its projections, the scores of every query against every
    cached key (all heads share one key vector per token) and the top-k pick; returns the keys attention reads."""
    t, s, sp = c.tape, c.spec, c.spec.sparse_attn
    B, T, _ = _shape(c)
    H, q_rank = s.hidden_size, s.mla.q_lora_rank or s.hidden_size
    iq = _linear(c, "attn.indexer.wq_b", q_in, T, q_rank, sp.index_heads * sp.index_head_dim)
    ik = _linear(c, "attn.indexer.wk", x, T, H, sp.index_head_dim)
    weights = _linear(c, "attn.indexer.weights_proj", x, T, H, sp.index_heads)
    t.hold(ik)
    scores = t.matmul("attn.indexer.scores", iq, ik, B, c.seq * sp.index_heads, sp.index_head_dim, keys)
    t.vec("attn.indexer.topk", "mul", [scores, weights], T, keys)
    return min(keys, sp.index_topk)


def gated_deltanet(c: Ctx, x: Tensor) -> Tensor:
    """Gated DeltaNet (Qwen3.5's linear-attention layers) on this GPU's heads."""
    t, s, lay, la = c.tape, c.spec, layout_of(c), c.spec.linear_attn
    B, T, _ = _shape(c)
    H = s.hidden_size
    hk, hv = la.key_heads // lay.tp, la.value_heads // lay.tp
    key, value = hk * la.key_head_dim, hv * la.value_head_dim
    qkvz = _linear(c, "linear_attn.in_proj_qkvz", x, T, H, 2 * key + 2 * value)
    ba = _linear(c, "linear_attn.in_proj_ba", x, T, H, 2 * hv)
    conv = t.vec("linear_attn.conv1d", "conv1d", [qkvz], T, 2 * key + value, params=(
        (2 * key + value) * la.conv_kernel,))
    state = "fp32" if la.state_dtype == "fp32" else "bf16"
    op = "gdn_decode" if c.seq == 1 else "gdn_prefill"
    out = t.special("linear_attn.gdn", "gdn", op, (B, c.seq, 0, la.key_head_dim, hv, hk), [conv, ba],
                    T * value, make_attrs(dv=la.value_head_dim, state=state), params=(2 * hv,))
    out = t.vec("linear_attn.norm", "rmsnorm", [out, qkvz], T * hv, la.value_head_dim, params=(la.value_head_dim,))
    return _linear(c, "linear_attn.out_proj", out, T, value, H)


def dense_mlp(c: Ctx, x: Tensor, features: int, name: str = "mlp") -> Tensor:
    """A gated MLP of ``features`` split ``tp`` ways (dense layers, shared experts)."""
    t, s, lay = c.tape, c.spec, layout_of(c)
    _, T, _ = _shape(c)
    f = features // lay.tp
    gate_up = _linear(c, f"{name}.gate_up_proj", x, T, s.hidden_size, 2 * f)
    act = t.vec(f"{name}.act", "mul", [gate_up], T, f)  # silu_and_mul
    return _linear(c, f"{name}.down_proj", act, T, f, s.hidden_size)


def moe_mlp(c: Ctx, x: Tensor) -> Tensor:
    """Router, shared experts, the routed experts (fused MoE) and the collectives that move their tokens."""
    t, s, lay, moe = c.tape, c.spec, layout_of(c), c.spec.moe
    B, T, tokens = _shape(c)
    H, E = s.hidden_size, moe.experts
    slots = lay.expert_slots(E)  # redundant expert slots (wide EP) route over more, fewer-loaded experts
    logits = _linear(c, "mlp.router", x, T, H, E, bias=moe.expert_bias)
    if c.training:  # the router's probabilities and its auxiliary load-balancing loss
        probs = t.vec("mlp.router.probs", "sigmoid" if moe.scoring == "sigmoid" else "softmax", [logits], T, E)
        counts = t.mem("mlp.router.aux_loss.tokens_per_expert", [logits], E)
        t.mem("mlp.router.aux_loss.mean", [t.vec("mlp.router.aux_loss.mul", "mul", [probs, counts], 1, E)], 1)
    shared = None
    if moe.shared_inter:
        shared = dense_mlp(c, x, moe.shared_inter, "mlp.shared_expert")
        if moe.shared_gate:
            gate = _linear(c, "mlp.shared_expert_gate", x, T, H, 1)
            shared = t.vec("mlp.shared_expert.gate", "mul", [shared, gate], T, H)
    a2a = lay.dp > 1 and lay.ep > 1 and lay.moe_tp == 1
    mode = "ll" if c.seq == 1 else "normal"
    routing = dict(topk=moe.topk, experts=slots, ep=lay.ep)
    if a2a:
        x = t.special("mlp.dispatch", "a2a", "a2a_dispatch", (1, T, H, 0, 0, 0), [x, logits], T * moe.topk * H,
                      make_attrs(mode=mode, **routing), grad="a2a_combine")
    local, inter = slots // lay.ep, moe.inter // lay.moe_tp
    bias = local * (2 * inter + H) if moe.expert_bias else 0
    attrs = make_attrs(topk=moe.topk, experts=slots, moe_tp=lay.moe_tp, moe_ep=lay.ep, gated=moe.gated,
                       ckpt=s.quantization, distribution=DEFAULT_DISTRIBUTION)
    out = t.special("mlp.experts", "moe", "moe", (1, tokens, H, moe.inter, 0, 0), [x, logits],
                    (T if a2a else tokens) * H, attrs, params=(local * moe.projections * H * inter, bias))
    if a2a:
        out = t.special("mlp.combine", "a2a", "a2a_combine", (1, T, H, 0, 0, 0), [out], T * H,
                        make_attrs(mode=mode, **routing), grad="a2a_dispatch")
        if shared is not None:
            shared = _tp_allreduce(c, "mlp.shared_expert.allreduce", shared, T)
    elif lay.dp > 1:  # all-gather the tokens, reduce-scatter the outputs: one all-reduce of every token's output
        out = t.comm("mlp.experts.gather_scatter", "allreduce", out, tokens * H, lay.gpus, grad="allreduce")
        if shared is not None:
            shared = _tp_allreduce(c, "mlp.shared_expert.allreduce", shared, T)
    if shared is not None:
        out = t.vec("mlp.shared_expert.add", "add", [out, shared], T, H)
    if not a2a and lay.dp == 1:  # one all-reduce sums routed and shared partial outputs
        out = t.comm("mlp.allreduce", "allreduce", out, T * H, lay.gpus, grad="allreduce")
    return out


def layer(c: Ctx, i: int, x: Tensor, residual: Tensor | None) -> tuple[Tensor, Tensor]:
    """Decoder layer ``i``; returns (hidden, residual) for the next one."""
    t, s = c.tape, c.spec
    _, T, _ = _shape(c)
    H = s.hidden_size
    h = t.vec("input_layernorm", "rmsnorm", [x] if residual is None else [x, residual], T, H, params=(H,))
    kind = s.layer_kinds[i]
    if s.mla is not None:
        a = mla(c, h)
    elif kind == "linear":
        a = gated_deltanet(c, h)
    else:
        a = gqa(c, h, kind)
    a = _tp_allreduce(c, "attn.allreduce", a, T)
    h = t.vec("post_attention_layernorm", "rmsnorm", [a, x], T, H, params=(H,))
    if s.moe.layers[i]:
        out = moe_mlp(c, h)
    else:
        out = _tp_allreduce(c, "mlp.allreduce", dense_mlp(c, h, s.intermediate_size), T)
    return out, a


def build(c: Ctx) -> None:
    """Embedding, the decoder layers, the final norm and the LM head (serving: last tokens only)."""
    t, s, lay = c.tape, c.spec, layout_of(c)
    B, T, _ = _shape(c)
    H, V = s.hidden_size, s.vocab_size
    vocab = -(-V // lay.tp)
    t.at("prologue")
    x = t.embedding("embed_tokens", t.ext(T), vocab, H)
    x = _tp_allreduce(c, "embed_tokens.allreduce", x, T)
    residual = None
    for i in range(s.num_layers):
        t.at("layer", i)
        x, residual = layer(c, i, x, residual)
    t.at("epilogue")
    x = t.vec("norm", "rmsnorm", [x, residual], T, H, params=(H,))
    rows = B if c.engine else T
    if c.engine:
        x = t.mem("last_token", [x], B * H, alias=True)
    t.hold(_linear(c, "lm_head", x, rows, H, vocab))
    if s.tie_word_embeddings:
        t.tied_params(vocab * H)
