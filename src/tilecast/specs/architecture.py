"""Mixture-of-experts decoders from their Hugging Face configs: one reader per ``architectures`` value.

A ``family: moe`` catalog file holds the model's ``config.json`` verbatim; its ``architectures[0]`` picks the
reader (:data:`ARCHITECTURES`, a registry), which returns the :class:`~tilecast.specs.ModelSpec` fields beyond
the attention shape: the routed experts (:class:`MoeSpec`), latent attention (:class:`MlaSpec`), DeepSeek's
sparse attention indexer (:class:`SparseAttnSpec`), Gated DeltaNet linear attention (:class:`LinearAttnSpec`),
the per-layer attention kinds (``full`` | ``sliding`` | ``chunked`` | ``linear``), sinks, biases and the
checkpoint's quantisation. Multimodal wrappers (Kimi-K2.5, Llama-4, Qwen3.5) are read from their
``text_config``: the text decoder is what serving runs per token; the vision tower is not modelled.

An ``architectures`` value no reader knows, a layer kind or a quantisation method tilecast does not model is a
named error (:class:`~tilecast.specs.hf_config.BadConfig`), never a silent dense fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tilecast.specs.hf_config import (
    BadConfig,
    get,
    get_bool,
    get_count,
    get_int,
    get_list,
    get_number,
    get_str,
)

#: attention kinds of a decoder layer: full causal, a sliding window, chunked local (Llama-4), linear (Gated
#: DeltaNet: a fixed-size recurrent state instead of a KV cache)
LAYER_KINDS = ("full", "sliding", "chunked", "linear")
#: router scoring functions
SCORINGS = ("softmax", "sigmoid")
#: a checkpoint's weight quantisation as its ``quantization_config`` says ("": unquantised, bf16):
#: fp8 per tensor, fp8 with 128 x 128 block scales (DeepSeek), mxfp4 experts (gpt-oss), int4 experts (Kimi-K2.5),
#: NVFP4 (NVIDIA ModelOpt checkpoints)
QUANTIZATIONS = ("", "fp8", "fp8_block", "mxfp4", "int4", "nvfp4")
#: quantisations that touch only the routed experts (attention, shared experts and dense layers stay bf16)
EXPERT_ONLY_QUANTIZATIONS = frozenset({"mxfp4", "int4"})


@dataclass(frozen=True)
class MoeSpec:
    """Routed experts: ``experts`` of which ``topk`` per token, each an MLP of ``inter`` features (gated: up and
    gate projections then down), plus ``shared_inter`` features of always-on shared experts (0: none).
    ``layers[i]``: whether decoder layer ``i`` routes (else it runs a dense MLP of the model's
    ``intermediate_size``)."""

    experts: int
    topk: int
    inter: int
    layers: tuple[bool, ...]
    shared_inter: int = 0
    gated: bool = True
    scoring: str = "softmax"
    aux_loss_coef: float = 0.001
    expert_bias: bool = False  # gpt-oss: biases on every expert projection and on the router
    shared_gate: bool = False  # Qwen3.5: a sigmoid gate (one output per token) scales the shared expert

    @property
    def num_moe_layers(self) -> int:
        return sum(self.layers)

    @property
    def projections(self) -> int:
        """Weight matrices per expert of ``hidden x inter`` (gated: up, gate, down; plain: up, down)."""
        return 3 if self.gated else 2


@dataclass(frozen=True)
class MlaSpec:
    """Multi-head latent attention (DeepSeek-V2/V3): queries through a rank-``q_lora_rank`` bottleneck (0: a
    direct projection), keys and values from one ``kv_lora_rank`` latent per token plus a shared
    ``qk_rope_head_dim`` rotary key; per head ``qk_nope_head_dim + qk_rope_head_dim`` query/key features and
    ``v_head_dim`` value features. The cache holds ``kv_lora_rank + qk_rope_head_dim`` values per token and layer."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def latent_dim(self) -> int:
        """Cached values per token and layer: the compressed KV latent and the rotary key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class SparseAttnSpec:
    """DeepSeek sparse attention (V3.2, GLM-5): a lightning indexer (``index_heads`` heads of ``index_head_dim``
    over an fp8 key cache of one ``index_head_dim`` vector per token) picks ``index_topk`` cached tokens per
    query; attention then reads only those."""

    index_heads: int
    index_head_dim: int
    index_topk: int


@dataclass(frozen=True)
class LinearAttnSpec:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5 ``linear_attention`` layers): ``key_heads`` query/key heads of
    ``key_head_dim``, ``value_heads`` value heads of ``value_head_dim``, a causal depthwise convolution of
    ``conv_kernel`` taps over q, k, v; each value head keeps a ``key_head_dim x value_head_dim`` state in
    ``state_dtype`` instead of a KV cache."""

    key_heads: int
    key_head_dim: int
    value_heads: int
    value_head_dim: int
    conv_kernel: int
    state_dtype: str = "fp32"

    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the convolution: q, k and v."""
        return 2 * self.key_dim + self.value_dim


def text_config(c: Mapping[str, Any]) -> Mapping[str, Any]:
    """The text decoder's config of a multimodal wrapper (``text_config``), else the config itself."""
    inner = c.get("text_config")
    return inner if isinstance(inner, Mapping) else c


def architecture(c: Mapping[str, Any]) -> str:
    """``architectures[0]`` of a config (:class:`BadConfig` when absent or not a list of names)."""
    value = get(c, "architectures")
    if not isinstance(value, (list, tuple)) or not value or not isinstance(value[0], str):
        raise BadConfig("architectures", value, "a list of architecture names")
    return value[0]


def quantization(c: Mapping[str, Any], outer: Mapping[str, Any]) -> str:
    """The checkpoint's weight quantisation (:data:`QUANTIZATIONS`) from ``quantization_config``."""
    q = c.get("quantization_config", outer.get("quantization_config"))
    if q is None:
        return ""
    if not isinstance(q, Mapping):
        raise BadConfig("quantization_config", q, "a mapping")
    method = q.get("quant_method")
    if method == "fp8":
        return "fp8_block" if q.get("weight_block_size") else "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method == "modelopt" and q.get("quant_algo") == "NVFP4":
        return "nvfp4"
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        bits = {(g.get("weights") or {}).get("num_bits") for g in groups.values() if isinstance(g, Mapping)}
        if bits == {4}:
            return "int4"
    raise BadConfig("quantization_config.quant_method", method,
                    "a quantisation tilecast models: fp8 (per tensor or 128 x 128 blocks), mxfp4, "
                    "compressed-tensors int4 weights, modelopt NVFP4")


def _layer_kinds(c: Mapping[str, Any], n: int, spelled: Mapping[str, str]) -> tuple[str, ...]:
    """``layer_types`` mapped through ``spelled`` (one per layer), or () when the config has none."""
    if c.get("layer_types") is None:
        return ()
    kinds = get_list(c, "layer_types")
    if len(kinds) != n:
        raise BadConfig("layer_types", kinds, f"one entry per layer ({n})")
    out = []
    for kind in kinds:
        if kind not in spelled:
            raise BadConfig("layer_types", kind, "one of " + ", ".join(spelled))
        out.append(spelled[kind])
    return tuple(out)


def _common(c: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """Fields every MoE decoder config spells the same way."""
    return dict(num_layers=get_int(c, "num_hidden_layers"), vocab_size=get_int(c, "vocab_size"),
                max_positions=get_int(c, "max_position_embeddings"), activation=get_str(c, "hidden_act", "silu"),
                norm="rmsnorm",
                tie_word_embeddings=get_bool(c, "tie_word_embeddings", get_bool(outer, "tie_word_embeddings", False)),
                attention_bias=get_bool(c, "attention_bias", False), quantization=quantization(c, outer))


def _scoring(c: Mapping[str, Any], default: str) -> str:
    value = get(c, "scoring_func", default)
    if value not in SCORINGS:
        raise BadConfig("scoring_func", value, "one of " + ", ".join(SCORINGS))
    return value


def _aux(c: Mapping[str, Any]) -> float:
    return get_number(c, "router_aux_loss_coef", get_number(c, "aux_loss_alpha", 0.001))


def _deepseek(c: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """DeepSeek-V3 / R1 / V3.1 / V3.2, Kimi-K2 / K2.5, GLM-5: MLA, ``first_k_dense_replace`` dense layers, routed
    plus shared experts (the multi-token-prediction head, ``num_nextn_predict_layers``, off as served)."""
    fields = _common(c, outer)
    n = fields["num_layers"]
    first, freq = get_count(c, "first_k_dense_replace", 0), get_int(c, "moe_layer_freq", 1)
    inter = get_int(c, "moe_intermediate_size")
    mla = MlaSpec(q_lora_rank=get_count(c, "q_lora_rank", 0), kv_lora_rank=get_int(c, "kv_lora_rank"),
                  qk_nope_head_dim=get_int(c, "qk_nope_head_dim"), qk_rope_head_dim=get_int(c, "qk_rope_head_dim"),
                  v_head_dim=get_int(c, "v_head_dim"))
    moe = MoeSpec(experts=get_int(c, "n_routed_experts"), topk=get_int(c, "num_experts_per_tok"), inter=inter,
                  layers=tuple(i >= first and i % freq == 0 for i in range(n)),
                  shared_inter=get_count(c, "n_shared_experts", 0) * inter, scoring=_scoring(c, "softmax"),
                  aux_loss_coef=_aux(c))
    sparse = None
    if c.get("index_topk") is not None:
        sparse = SparseAttnSpec(index_heads=get_int(c, "index_n_heads"), index_head_dim=get_int(c, "index_head_dim"),
                                index_topk=get_int(c, "index_topk"))
    return dict(fields, intermediate_size=get_int(c, "intermediate_size"), moe=moe, mla=mla, sparse_attn=sparse,
                head_dim=mla.qk_head_dim)


def _qwen3_moe(c: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3-MoE (235B-A22B, 30B-A3B, Coder-480B): GQA with per-head q / k RMSNorm, routed experts only."""
    fields = _common(c, outer)
    n, step = fields["num_layers"], get_int(c, "decoder_sparse_step", 1)
    dense = set(get_list(c, "mlp_only_layers", []))
    moe = MoeSpec(experts=get_int(c, "num_experts"), topk=get_int(c, "num_experts_per_tok"),
                  inter=get_int(c, "moe_intermediate_size"),
                  layers=tuple(i not in dense and (i + 1) % step == 0 for i in range(n)), aux_loss_coef=_aux(c))
    sliding = get_bool(c, "use_sliding_window", False) and c.get("sliding_window") is not None
    return dict(fields, intermediate_size=get_int(c, "intermediate_size"), moe=moe, qk_norm=True,
                layer_types=("sliding",) * n if sliding else (),
                sliding_window=get_int(c, "sliding_window") if sliding else 0)


def _mixtral(c: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """Mixtral: GQA, every layer's MLP split into ``num_local_experts`` of ``intermediate_size``, top-2 softmax."""
    fields = _common(c, outer)
    n, inter = fields["num_layers"], get_int(c, "intermediate_size")
    window = c.get("sliding_window")
    moe = MoeSpec(experts=get_int(c, "num_local_experts"), topk=get_int(c, "num_experts_per_tok"), inter=inter,
                  layers=(True,) * n, aux_loss_coef=_aux(c))
    return dict(fields, intermediate_size=inter, moe=moe, layer_types=("sliding",) * n if window else (),
                sliding_window=get_int(c, "sliding_window") if window else 0)


def _gpt_oss(c: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """gpt-oss: GQA with biases and per-head attention sinks, alternating sliding-window and full layers,
    routed experts with biases (mxfp4 in the release)."""
    fields = _common(c, outer)
    n, inter = fields["num_layers"], get_int(c, "intermediate_size")
    moe = MoeSpec(experts=get_int(c, "num_local_experts"), topk=get_int(c, "num_experts_per_tok"), inter=inter,
                  layers=(True,) * n, aux_loss_coef=_aux(c), expert_bias=True)
    kinds = _layer_kinds(c, n, {"sliding_attention": "sliding", "full_attention": "full"})
    return dict(fields, intermediate_size=inter, moe=moe, layer_types=kinds, attention_sinks=True,
                sliding_window=get_int(c, "sliding_window") if "sliding" in kinds else 0)


def _minimax_m2(c: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """MiniMax-M2 / M2.5: GQA with q / k RMSNorm and partial rotary, routed experts (sigmoid router); the
    multi-token-prediction modules off as served."""
    fields = _common(c, outer)
    n, inter = fields["num_layers"], get_int(c, "intermediate_size")
    moe = MoeSpec(experts=get_int(c, "num_local_experts"), topk=get_int(c, "num_experts_per_tok"), inter=inter,
                  layers=(True,) * n, shared_inter=get_count(c, "shared_intermediate_size", 0),
                  scoring=_scoring(c, "softmax"), aux_loss_coef=_aux(c))
    return dict(fields, intermediate_size=inter, moe=moe, qk_norm=get_bool(c, "use_qk_norm", False),
                rotary_dim=get_count(c, "rotary_dim", 0))


def _llama4(c: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """Llama-4 Scout / Maverick (text decoder): GQA, chunked local attention on the rotary layers (every
    ``no_rope_layer_interval``-th layer attends globally without rotary), one shared expert beside top-1 routed
    experts (sigmoid router) on every ``interleave_moe_layer_step``-th layer, dense MLPs of
    ``intermediate_size_mlp`` between."""
    fields = _common(c, outer)
    n, inter, step = fields["num_layers"], get_int(c, "intermediate_size"), get_int(c, "interleave_moe_layer_step", 1)
    moe = MoeSpec(experts=get_int(c, "num_local_experts"), topk=get_int(c, "num_experts_per_tok"), inter=inter,
                  layers=tuple((i + 1) % step == 0 for i in range(n)), shared_inter=inter, scoring="sigmoid",
                  aux_loss_coef=_aux(c))
    chunk = c.get("attention_chunk_size")
    interval = get_int(c, "no_rope_layer_interval", 4)
    kinds = tuple("full" if (i + 1) % interval == 0 else "chunked" for i in range(n)) if chunk else ()
    return dict(fields, intermediate_size=get_int(c, "intermediate_size_mlp"), moe=moe, layer_types=kinds,
                sliding_window=get_int(c, "attention_chunk_size") if chunk else 0,
                qk_norm=get_bool(c, "use_qk_norm", False))


def _qwen35_moe(c: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3.5-MoE (text decoder): three Gated DeltaNet linear-attention layers to one gated full-attention
    layer (q and an output gate from one projection, per-head q / k RMSNorm, partial rotary), routed experts
    plus a gated shared expert on every layer; the multi-token-prediction layer off as served."""
    fields = _common(c, outer)
    n = fields["num_layers"]
    kinds = _layer_kinds(c, n, {"linear_attention": "linear", "full_attention": "full"})
    dense = set(get_list(c, "mlp_only_layers", []))
    moe = MoeSpec(experts=get_int(c, "num_experts"), topk=get_int(c, "num_experts_per_tok"),
                  inter=get_int(c, "moe_intermediate_size"), layers=tuple(i not in dense for i in range(n)),
                  shared_inter=get_count(c, "shared_expert_intermediate_size", 0), shared_gate=True,
                  aux_loss_coef=_aux(c))
    state = get(c, "mamba_ssm_dtype", "float32")
    if state not in ("float32", "bfloat16"):
        raise BadConfig("mamba_ssm_dtype", state, "float32 or bfloat16")
    linear = LinearAttnSpec(key_heads=get_int(c, "linear_num_key_heads"),
                            key_head_dim=get_int(c, "linear_key_head_dim"),
                            value_heads=get_int(c, "linear_num_value_heads"),
                            value_head_dim=get_int(c, "linear_value_head_dim"),
                            conv_kernel=get_int(c, "linear_conv_kernel_dim"),
                            state_dtype="fp32" if state == "float32" else "bf16")
    rope = c.get("rope_parameters") if isinstance(c.get("rope_parameters"), Mapping) else {}
    partial = get_number(rope, "partial_rotary_factor", 1.0)
    head_dim = get_int(c, "head_dim")
    return dict(fields, intermediate_size=get_int(c, "moe_intermediate_size"), moe=moe, layer_types=kinds,
                linear_attn=linear, qk_norm=True, attn_output_gate=get_bool(c, "attn_output_gate", False),
                rotary_dim=int(head_dim * partial))


@dataclass(frozen=True)
class Architecture:
    """How one ``architectures`` value is read: its reader, and whether the decoder sits in ``text_config``."""

    read: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
    nested: bool = False


#: ``architectures[0]`` -> its reader (the one list of mixture-of-experts architectures tilecast models)
ARCHITECTURES: dict[str, Architecture] = {
    "DeepseekV3ForCausalLM": Architecture(_deepseek),
    "DeepseekV32ForCausalLM": Architecture(_deepseek),
    "GlmMoeDsaForCausalLM": Architecture(_deepseek),
    "KimiK25ForConditionalGeneration": Architecture(_deepseek, nested=True),
    "Qwen3MoeForCausalLM": Architecture(_qwen3_moe),
    "MixtralForCausalLM": Architecture(_mixtral),
    "GptOssForCausalLM": Architecture(_gpt_oss),
    "MiniMaxM2ForCausalLM": Architecture(_minimax_m2),
    "Llama4ForConditionalGeneration": Architecture(_llama4, nested=True),
    "Qwen3_5MoeForConditionalGeneration": Architecture(_qwen35_moe, nested=True),
}


def moe_architecture(c: Mapping[str, Any]) -> Architecture:
    """The reader of a config's ``architectures[0]`` (:class:`BadConfig` naming the known ones otherwise)."""
    name = architecture(c)
    if name not in ARCHITECTURES:
        raise BadConfig("architectures", name, "a mixture-of-experts architecture tilecast models: "
                        + ", ".join(ARCHITECTURES))
    return ARCHITECTURES[name]


def decoder_config(c: Mapping[str, Any]) -> Mapping[str, Any]:
    """The config the attention shape and the reader read: ``text_config`` for a multimodal wrapper."""
    return text_config(c) if moe_architecture(c).nested else c


def read_moe(c: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~tilecast.specs.ModelSpec` fields of a mixture-of-experts config (outer config given)."""
    arch = moe_architecture(c)
    inner = text_config(c) if arch.nested else c
    fields = arch.read(inner, c)
    kinds = fields.get("layer_types", ())
    if kinds and len(kinds) != fields["num_layers"]:
        raise BadConfig("layer_types", kinds, f"one entry per layer ({fields['num_layers']})")
    return fields
