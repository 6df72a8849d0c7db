"""Plain-torch model zoo: a :class:`ModelSpec` -> an ``nn.Module`` shaped like the Hugging Face model.

No ``transformers`` dependency. Attention is eager (``matmul``, ``softmax``, ``matmul``) and the
layers are written the way the Hugging Face classes the reference graphs were traced from write
them (GPT-2 ``Conv1D`` = ``addmm``, ``gelu_new`` as its tanh formula, OPT's scaled ``q_proj`` and
``bmm``, BERT's post-LN encoder, Llama's RMSNorm / rotary / GQA / SwiGLU), so a torch.fx trace of
these modules yields the same kernel-level ops as the reference graphs.

Built under ``with torch.device("meta"):`` nothing is materialised (no weight storage); masks and
rotary tables are computed in ``forward``, never stored as buffers. Models take ``input_ids``
(batch, seq) and return logits (``mode="inference"``, module in eval mode) or a scalar loss
(``mode="training"``, module in train mode with the config's dropouts): the causal LM loss for
decoders, MLM + NSP for BERT. Families: gpt2 (also GPT-3 shapes), opt, bert, llama. The switch
(mixture-of-experts encoder-decoder) family is not built here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tilecast.errors import UserError
from tilecast.specs import ModelSpec

MODES = ("inference", "training")
#: additive / fill value for masked attention scores; finite in fp16, bf16 and fp32
MASK_VALUE = -65504.0


class UntraceableModelError(UserError):
    """The zoo has no builder for this model family, or the mode is unknown."""


# ---------------------------------------------------------------- building blocks


class NewGELU(nn.Module):
    """GPT-2 ``gelu_new``: the tanh approximation written out (mulu, powu, mulu, add, mulu, tanh, addu, mul)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


#: activation name (HF config value) -> module factory
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "gelu_new": NewGELU,
    "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
    "gelu": nn.GELU,
    "relu": nn.ReLU,
    "silu": nn.SiLU,
    "swish": nn.SiLU,
}


def activation(name: str) -> nn.Module:
    """Activation module for a Hugging Face activation name."""
    if name not in ACTIVATIONS:
        raise UntraceableModelError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


class Conv1D(nn.Module):
    """GPT-2's linear layer: weight (in, out), ``addmm(bias, x2d, weight)``."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.size()[:-1] + (self.out_features,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class RMSNorm(nn.Module):
    """Llama RMSNorm: statistics in fp32, scale in the input dtype."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.eps)
        return self.weight * h.to(dtype)


def causal_mask(scores: torch.Tensor) -> torch.Tensor:
    """Boolean (q, k) mask, True where a query may attend (key position <= query position)."""
    q, k = scores.size(-2), scores.size(-1)
    return torch.ones((q, k), dtype=torch.bool, device=scores.device).tril(k - q)


def causal_lm_loss(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy with the inputs as labels (the HF ``labels=input_ids`` loss)."""
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = input_ids[..., 1:].contiguous()
    return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))


def _cfg(spec: ModelSpec, *names: str, default: Any) -> Any:
    for n in names:
        if n in spec.config and spec.config[n] is not None:
            return spec.config[n]
    return default


# ---------------------------------------------------------------- GPT-2 / GPT-3


class GPT2Attention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h = spec.hidden_size
        self.num_heads, self.head_dim = spec.num_heads, spec.head_dim
        self.c_attn = Conv1D(h, 3 * h)
        self.c_proj = Conv1D(h, h)
        self.attn_dropout = nn.Dropout(_cfg(spec, "attn_pdrop", default=0.1))
        self.resid_dropout = nn.Dropout(_cfg(spec, "resid_pdrop", default=0.1))

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.size()[:-1] + (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(x).split(x.size(-1), dim=2)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        w = torch.where(causal_mask(w), w, torch.full([], MASK_VALUE, dtype=w.dtype, device=w.device))
        w = self.attn_dropout(nn.functional.softmax(w, dim=-1))
        out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        out = out.view(out.size()[:-2] + (self.num_heads * self.head_dim,))
        return self.resid_dropout(self.c_proj(out))


class GPT2MLP(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.c_fc = Conv1D(spec.hidden_size, spec.intermediate_size)
        self.c_proj = Conv1D(spec.intermediate_size, spec.hidden_size)
        self.act = activation(spec.activation)
        self.dropout = nn.Dropout(_cfg(spec, "resid_pdrop", default=0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPT2Block(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        eps = _cfg(spec, "layer_norm_epsilon", default=1e-5)
        self.ln_1 = nn.LayerNorm(spec.hidden_size, eps=eps)
        self.attn = GPT2Attention(spec)
        self.ln_2 = nn.LayerNorm(spec.hidden_size, eps=eps)
        self.mlp = GPT2MLP(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2LMHeadModel(nn.Module):
    """GPT-2 style decoder: learned positions, pre-LN, fused qkv, tied LM head."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h = spec.hidden_size
        self.wte = nn.Embedding(spec.vocab_size, h)
        self.wpe = nn.Embedding(spec.max_positions, h)
        self.drop = nn.Dropout(_cfg(spec, "embd_pdrop", default=0.1))
        self.h = nn.ModuleList(GPT2Block(spec) for _ in range(spec.num_layers))
        self.ln_f = nn.LayerNorm(h, eps=_cfg(spec, "layer_norm_epsilon", default=1e-5))
        self.lm_head = nn.Linear(h, spec.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(0, input_ids.size(-1), dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return causal_lm_loss(logits, input_ids) if self.training else logits


# ---------------------------------------------------------------- OPT


class OPTAttention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h = spec.hidden_size
        self.num_heads, self.head_dim = spec.num_heads, spec.head_dim
        self.scaling = self.head_dim ** -0.5
        self.q_proj, self.k_proj = nn.Linear(h, h), nn.Linear(h, h)
        self.v_proj, self.out_proj = nn.Linear(h, h), nn.Linear(h, h)
        self.dropout = nn.Dropout(_cfg(spec, "attention_dropout", default=0.0))

    def _heads(self, x: torch.Tensor, bsz: int, seq: int) -> torch.Tensor:
        return x.view(bsz, seq, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        bsz, seq, _ = x.size()
        shape = (bsz * self.num_heads, -1, self.head_dim)
        q = self._heads(self.q_proj(x) * self.scaling, bsz, seq).view(shape)
        k = self._heads(self.k_proj(x), bsz, seq).view(shape)
        v = self._heads(self.v_proj(x), bsz, seq).view(shape)
        w = torch.bmm(q, k.transpose(1, 2))
        w = w.view(bsz, self.num_heads, seq, -1) + mask
        w = self.dropout(nn.functional.softmax(w.view(bsz * self.num_heads, seq, -1), dim=-1))
        out = torch.bmm(w, v).view(bsz, self.num_heads, seq, self.head_dim).transpose(1, 2)
        return self.out_proj(out.reshape(bsz, seq, self.num_heads * self.head_dim))


class OPTDecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h = spec.hidden_size
        self.pre_ln = bool(_cfg(spec, "do_layer_norm_before", default=True))
        self.self_attn = OPTAttention(spec)
        self.self_attn_layer_norm = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, spec.intermediate_size)
        self.fc2 = nn.Linear(spec.intermediate_size, h)
        self.activation_fn = activation(spec.activation)
        self.final_layer_norm = nn.LayerNorm(h)
        self.dropout = nn.Dropout(_cfg(spec, "dropout", default=0.1))
        self.activation_dropout = nn.Dropout(_cfg(spec, "activation_dropout", default=0.0))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        r = x
        if self.pre_ln:
            x = self.self_attn_layer_norm(x)
        x = r + self.dropout(self.self_attn(x, mask))
        if not self.pre_ln:
            x = self.self_attn_layer_norm(x)
        r = x
        if self.pre_ln:
            x = self.final_layer_norm(x)
        x = self.fc2(self.activation_dropout(self.activation_fn(self.fc1(x))))
        x = r + self.dropout(x)
        if not self.pre_ln:
            x = self.final_layer_norm(x)
        return x


class OPTForCausalLM(nn.Module):
    """OPT decoder: learned positions (offset 2), separate q/k/v/out, relu MLP, tied LM head."""

    POSITION_OFFSET = 2

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, proj = spec.hidden_size, spec.word_embed_proj_dim or spec.hidden_size
        self.embed_tokens = nn.Embedding(spec.vocab_size, proj)
        self.embed_positions = nn.Embedding(spec.max_positions + self.POSITION_OFFSET, h)
        self.project_in = nn.Linear(proj, h, bias=False) if proj != h else None
        self.project_out = nn.Linear(h, proj, bias=False) if proj != h else None
        pre_ln = bool(_cfg(spec, "do_layer_norm_before", default=True))
        self.final_layer_norm = nn.LayerNorm(h) if pre_ln else None
        self.dropout = nn.Dropout(_cfg(spec, "dropout", default=0.1))
        self.layers = nn.ModuleList(OPTDecoderLayer(spec) for _ in range(spec.num_layers))
        self.lm_head = nn.Linear(proj, spec.vocab_size, bias=False)
        self.lm_head.weight = self.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        attention_mask = torch.ones_like(input_ids)
        positions = (torch.cumsum(attention_mask, dim=1) * attention_mask).long() - 1
        x = self.embed_tokens(input_ids)
        if self.project_in is not None:
            x = self.project_in(x)
        x = self.dropout(x + self.embed_positions(positions + self.POSITION_OFFSET))
        scores = x.new_zeros(1, 1, input_ids.size(1), input_ids.size(1))
        mask = torch.where(causal_mask(scores), 0.0, MASK_VALUE).to(x.dtype)
        for layer in self.layers:
            x = layer(x, mask)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        if self.project_out is not None:
            x = self.project_out(x)
        logits = self.lm_head(x).contiguous()
        return causal_lm_loss(logits, input_ids) if self.training else logits


# ---------------------------------------------------------------- BERT


class BertEmbeddings(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h = spec.hidden_size
        self.word_embeddings = nn.Embedding(spec.vocab_size, h)
        self.position_embeddings = nn.Embedding(spec.max_positions, h)
        self.token_type_embeddings = nn.Embedding(spec.type_vocab_size or 2, h)
        self.LayerNorm = nn.LayerNorm(h, eps=_cfg(spec, "layer_norm_eps", default=1e-12))
        self.dropout = nn.Dropout(_cfg(spec, "hidden_dropout_prob", default=0.1))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        token_type_ids = torch.zeros_like(input_ids)
        pos = torch.arange(0, input_ids.size(1), dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h = spec.hidden_size
        self.num_heads, self.head_dim = spec.num_heads, spec.head_dim
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.dropout = nn.Dropout(_cfg(spec, "attention_probs_dropout_prob", default=0.1))

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.size()[:-1] + (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        w = self.dropout(nn.functional.softmax(w + ext_mask, dim=-1))
        out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        return out.view(out.size()[:-2] + (self.num_heads * self.head_dim,))


class BertLayer(nn.Module):
    """Post-LN encoder layer (attention + output dense/add/LN, intermediate gelu, output dense/add/LN)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, eps = spec.hidden_size, _cfg(spec, "layer_norm_eps", default=1e-12)
        p = _cfg(spec, "hidden_dropout_prob", default=0.1)
        self.attention = BertSelfAttention(spec)
        self.attention_dense, self.attention_dropout = nn.Linear(h, h), nn.Dropout(p)
        self.attention_layer_norm = nn.LayerNorm(h, eps=eps)
        self.intermediate_dense = nn.Linear(h, spec.intermediate_size)
        self.act = activation(spec.activation)
        self.output_dense, self.output_dropout = nn.Linear(spec.intermediate_size, h), nn.Dropout(p)
        self.output_layer_norm = nn.LayerNorm(h, eps=eps)

    def forward(self, x: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        a = self.attention_dropout(self.attention_dense(self.attention(x, ext_mask)))
        x = self.attention_layer_norm(a + x)
        y = self.output_dropout(self.output_dense(self.act(self.intermediate_dense(x))))
        return self.output_layer_norm(y + x)


class BertModel(nn.Module):
    """BERT encoder; inference: sequence classification (pooler + classifier), training: MLM + NSP heads."""

    NUM_LABELS = 2

    def __init__(self, spec: ModelSpec, mode: str) -> None:
        super().__init__()
        h = spec.hidden_size
        self.embeddings = BertEmbeddings(spec)
        self.layer = nn.ModuleList(BertLayer(spec) for _ in range(spec.num_layers))
        self.pooler_dense, self.pooler_activation = nn.Linear(h, h), nn.Tanh()
        self.pretraining = mode == "training"
        if self.pretraining:
            self.transform_dense = nn.Linear(h, h)
            self.transform_act = activation(spec.activation)
            self.transform_layer_norm = nn.LayerNorm(h, eps=_cfg(spec, "layer_norm_eps", default=1e-12))
            self.decoder = nn.Linear(h, spec.vocab_size)
            self.decoder.weight = self.embeddings.word_embeddings.weight
            self.seq_relationship = nn.Linear(h, 2)
        else:
            self.dropout = nn.Dropout(_cfg(spec, "hidden_dropout_prob", default=0.1))
            self.classifier = nn.Linear(h, self.NUM_LABELS)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(input_ids)
        attention_mask = torch.ones_like(input_ids)[:, None, None, :].to(x.dtype)
        ext_mask = (1.0 - attention_mask) * MASK_VALUE
        for layer in self.layer:
            x = layer(x, ext_mask)
        pooled = self.pooler_activation(self.pooler_dense(x[:, 0]))
        if not self.pretraining:
            return self.classifier(self.dropout(pooled))
        y = self.transform_layer_norm(self.transform_act(self.transform_dense(x)))
        mlm_logits = self.decoder(y)
        nsp_logits = self.seq_relationship(pooled)
        mlm = F.cross_entropy(mlm_logits.view(-1, mlm_logits.size(-1)), input_ids.view(-1))
        nsp = F.cross_entropy(nsp_logits, torch.zeros_like(input_ids[:, 0]))
        return mlm + nsp


# ---------------------------------------------------------------- Llama


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.size(-1) // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, hd = spec.hidden_size, spec.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = spec.num_heads, spec.num_kv_heads, hd
        bias = bool(_cfg(spec, "attention_bias", default=False))
        self.q_proj = nn.Linear(h, spec.num_heads * hd, bias=bias)
        self.k_proj = nn.Linear(h, spec.num_kv_heads * hd, bias=bias)
        self.v_proj = nn.Linear(h, spec.num_kv_heads * hd, bias=bias)
        self.o_proj = nn.Linear(spec.num_heads * hd, h, bias=bias)
        self.dropout = nn.Dropout(_cfg(spec, "attention_dropout", default=0.0))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        bsz, seq, _ = x.size()
        q = self.q_proj(x).view(bsz, seq, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, seq, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, seq, -1, self.head_dim).transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        groups = self.num_heads // self.num_kv_heads
        k = k[:, :, None].expand(bsz, self.num_kv_heads, groups, seq, self.head_dim).reshape(bsz, -1, seq,
                                                                                              self.head_dim)
        v = v[:, :, None].expand(bsz, self.num_kv_heads, groups, seq, self.head_dim).reshape(bsz, -1, seq,
                                                                                              self.head_dim)
        w = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5
        w = w + torch.where(causal_mask(w), 0.0, MASK_VALUE).to(w.dtype)
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(self.dropout(w), v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(bsz, seq, -1))


class LlamaMLP(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        bias = bool(_cfg(spec, "mlp_bias", default=False))
        self.gate_proj = nn.Linear(spec.hidden_size, spec.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(spec.hidden_size, spec.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(spec.intermediate_size, spec.hidden_size, bias=bias)
        self.act_fn = activation(spec.activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec, eps: float) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden_size, eps)
        self.self_attn = LlamaAttention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, eps)
        self.mlp = LlamaMLP(spec)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaForCausalLM(nn.Module):
    """Llama decoder: RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP, untied LM head."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        eps = _cfg(spec, "rms_norm_eps", default=1e-6)
        self.head_dim = spec.head_dim
        self.rope_theta = float(_cfg(spec, "rope_theta", default=10000.0))
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(spec, eps) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, eps)
        self.lm_head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        if spec.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def _rotary(self, x: torch.Tensor, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
        dims = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=x.device) / self.head_dim
        inv_freq = 1.0 / (self.rope_theta ** dims)
        pos = torch.arange(0, seq, dtype=torch.float32, device=x.device)
        freqs = torch.outer(pos, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        cos, sin = self._rotary(x, input_ids.size(1))
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return causal_lm_loss(logits, input_ids) if self.training else logits


# ---------------------------------------------------------------- registry

#: family -> builder(spec, mode)
BUILDERS: dict[str, Callable[[ModelSpec, str], nn.Module]] = {
    "gpt2": lambda spec, mode: GPT2LMHeadModel(spec),
    "opt": lambda spec, mode: OPTForCausalLM(spec),
    "bert": BertModel,
    "llama": lambda spec, mode: LlamaForCausalLM(spec),
}


def build_torch_model(spec: ModelSpec, mode: str = "inference") -> nn.Module:
    """Build ``spec`` as a plain-torch module: "inference" (eval, returns logits) or "training" (scalar loss).

    Weights are created on the current default device (``with torch.device("meta"):`` creates none)
    in the default dtype; cast with ``.to(dtype)`` afterwards.
    """
    if mode not in MODES:
        raise UntraceableModelError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    if spec.family not in BUILDERS:
        raise UntraceableModelError(f"model {spec.key!r}: family {spec.family!r} has no plain-torch builder; "
                                    f"supported: {', '.join(BUILDERS)}")
    model = BUILDERS[spec.family](spec, mode)
    return model.train(mode == "training")


def tiny_spec(family: str, **overrides: Any) -> ModelSpec:
    """A small :class:`ModelSpec` of ``family`` for tests and smoke runs (2 layers, hidden 32)."""
    base: dict[str, Any] = dict(
        key=f"tiny_{family}", family=family, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=4,
        head_dim=8, intermediate_size=64, vocab_size=101, max_positions=64, norm="layernorm",
        tie_word_embeddings=True, source="tilecast tiny test config", type_vocab_size=0,
        word_embed_proj_dim=0,
        activation={"gpt2": "gelu_new", "opt": "relu", "bert": "gelu", "llama": "silu"}.get(family, "relu"),
    )
    if family == "bert":
        base["type_vocab_size"] = 2
    if family == "opt":
        base["word_embed_proj_dim"] = 32
    if family == "llama":
        base.update(norm="rmsnorm", num_kv_heads=2, tie_word_embeddings=False)
    base.update(overrides)
    config: Mapping[str, Any] = base.pop("config", {})
    return ModelSpec(config=config, **base)
