"""Model configs: ``conf/model/<key>.yaml`` -> frozen, validated :class:`ModelSpec`.

A catalog file holds ``key``, ``family``, ``source`` and ``config``: the model's published
Hugging Face config with its exact keys and values. :class:`ModelSpec` normalises the fields the
graph builders need, one :class:`Family` per family (a registry, not a chain of ifs). Every error
names the file, the field (``config.<key>`` for a config key) and the value.

An optional ``aliases`` list holds other names :func:`get_model` accepts (the Hugging Face ids the
serving data spells, ``meta-llama/Llama-3.1-70B``), an optional ``variants`` mapping the ids of quantised
checkpoints (``nvidia/DeepSeek-R1-NVFP4: fp4``): found by one, the spec carries the dtype its checkpoint runs
in (:func:`check_checkpoint_dtype`); a name two files claim is an error. Family ``moe`` covers the
mixture-of-experts decoders, read per ``architectures`` value (:mod:`tilecast.specs.architecture`). Models
known but not forecastable are listed with a reason in ``conf/unsupported_models.yaml``: :func:`get_model`
raises :class:`UnsupportedModelError` for them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tilecast.paths import CONF_DIR
from tilecast.specs.architecture import (
    EXPERT_ONLY_QUANTIZATIONS,
    LinearAttnSpec,
    MlaSpec,
    MoeSpec,
    SparseAttnSpec,
    decoder_config,
    read_moe,
)
from tilecast.specs.catalog import invalid, nonempty_str, positive_int, read_yaml, unknown_error
from tilecast.specs.errors import SpecError
from tilecast.specs.gpu import alias_list
from tilecast.specs.hf_config import MISSING, BadConfig, get, get_bool, get_int, get_str


@dataclass(frozen=True)
class ModelSpec:
    """The architecture facts a graph builder needs, normalised across families."""

    key: str
    family: str  # gpt2 | opt | bert | switch | llama | mpt | moe
    hidden_size: int
    num_layers: int  # decoder (or encoder-only) layers; for switch: encoder layers
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_positions: int  # learned or rotary context length; 0: none (switch: relative attention)
    activation: str  # gelu_new | gelu | relu | silu
    norm: str  # layernorm | rmsnorm
    tie_word_embeddings: bool
    source: str
    num_decoder_layers: int = 0  # encoder-decoder models (switch)
    num_experts: int = 0  # switch: experts per sparse layer
    expert_capacity: int = 0  # switch: tokens per expert
    sparse_step: int = 0  # switch: every sparse_step-th layer is sparse
    type_vocab_size: int = 0  # bert
    word_embed_proj_dim: int = 0  # opt (== hidden_size for opt-1.3b)
    qk_norm: bool = False  # llama: per-head RMSNorm of q and k over head_dim (Qwen3's q_norm / k_norm)
    aliases: tuple[str, ...] = ()  # other names get_model accepts (Hugging Face ids: "Qwen/Qwen3-32B")
    # mixture-of-experts decoders (family moe; tilecast.specs.architecture reads them from the HF config)
    moe: MoeSpec | None = None  # routed (and shared) experts
    mla: MlaSpec | None = None  # multi-head latent attention (head_dim is then the q/k head size)
    sparse_attn: SparseAttnSpec | None = None  # DeepSeek sparse attention's indexer
    linear_attn: LinearAttnSpec | None = None  # Gated DeltaNet layers (layer_types "linear")
    layer_types: tuple[str, ...] = ()  # attention kind per layer (full | sliding | chunked | linear); (): all full
    sliding_window: int = 0  # tokens a sliding (or chunked) layer attends to
    attention_sinks: bool = False  # gpt-oss: one learned sink logit per head joins every softmax
    attention_bias: bool = False  # biases on the q / k / v / o projections
    attn_output_gate: bool = False  # Qwen3.5: q_proj also yields a sigmoid gate over the attention output
    rotary_dim: int = 0  # rotated features per head (0: all of head_dim)
    quantization: str = ""  # the released checkpoint's weight quantisation ("": bf16; fp8, fp8_block, mxfp4, int4)
    variants: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)  # quantised id -> dtype
    variant_dtype: str | None = field(default=None, compare=False, hash=False)  # set when found by a variant id
    config: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def gated_mlp(self) -> bool:
        """SwiGLU-style MLP with a gate projection (llama family)."""
        return self.family == "llama"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name :func:`get_model` finds this model by: key, aliases, then quantised variants."""
        return (self.key, *self.aliases, *self.variants)

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """The attention kind of every decoder layer (``full`` where the config names none)."""
        return self.layer_types or ("full",) * self.num_layers

    @property
    def expert_only_quantization(self) -> bool:
        """Whether the checkpoint quantises only its routed experts (gpt-oss mxfp4, Kimi-K2.5 int4)."""
        return self.quantization in EXPERT_ONLY_QUANTIZATIONS

    @property
    def default_dtype(self) -> str:
        """The dtype a forecast of this model runs in when none is asked for: a quantised variant's, else bf16."""
        return self.variant_dtype or "bf16"


class UnsupportedModelError(SpecError):
    """A model the catalog knows of but cannot forecast (``conf/unsupported_models.yaml``); says why."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"model {name!r} cannot be forecast: {reason}")
        self.name, self.reason = name, reason

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (worker processes) despite the custom __init__
        return type(self), (self.name, self.reason)


@dataclass(frozen=True)
class Family:
    """How one family's Hugging Face config maps onto :class:`ModelSpec`.

    ``decoder`` picks the part of the config the attention keys are read from (a multimodal wrapper's
    ``text_config``); by default the config itself.

    ``hidden``, ``heads`` and ``kv_heads`` are the config keys of the hidden size and the query and
    key/value head counts (``kv_heads`` None: one kv head per head). ``head_dim`` is the config key of
    an explicit per-head size, if the family has one, and ``default_head_dim`` its value when the key
    is absent (T5's ``d_kv`` defaults to 64); with neither, head size = hidden size / heads.
    ``read(config, hidden_size)`` returns the remaining :class:`ModelSpec` fields.
    """

    hidden: str
    heads: str
    read: Callable[[Mapping[str, Any], int], dict[str, Any]]
    kv_heads: str | None = None  # GQA: config key of the key/value head count
    head_dim: str | None = None
    default_head_dim: int | None = None
    builder_keys: tuple[str, ...] = ()  # config keys the graph builder reads itself (a what-if may add them)
    decoder: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None


def _read_gpt2(c: Mapping[str, Any], h: int) -> dict[str, Any]:
    return dict(num_layers=get_int(c, "n_layer"), intermediate_size=get_int(c, "n_inner", 4 * h),
                vocab_size=get_int(c, "vocab_size"), max_positions=get_int(c, "n_positions"),
                activation=get_str(c, "activation_function", "gelu_new"), norm="layernorm",
                tie_word_embeddings=get_bool(c, "tie_word_embeddings", True))


def _read_opt(c: Mapping[str, Any], h: int) -> dict[str, Any]:
    return dict(num_layers=get_int(c, "num_hidden_layers"), intermediate_size=get_int(c, "ffn_dim"),
                vocab_size=get_int(c, "vocab_size"), max_positions=get_int(c, "max_position_embeddings"),
                activation=get_str(c, "activation_function", "relu"), norm="layernorm",
                tie_word_embeddings=get_bool(c, "tie_word_embeddings", True),
                word_embed_proj_dim=get_int(c, "word_embed_proj_dim", h))


def _read_bert(c: Mapping[str, Any], h: int) -> dict[str, Any]:
    return dict(num_layers=get_int(c, "num_hidden_layers"), intermediate_size=get_int(c, "intermediate_size"),
                vocab_size=get_int(c, "vocab_size"), max_positions=get_int(c, "max_position_embeddings"),
                activation=get_str(c, "hidden_act", "gelu"), norm="layernorm",
                tie_word_embeddings=get_bool(c, "tie_word_embeddings", True),
                type_vocab_size=get_int(c, "type_vocab_size", 2))


def _read_switch(c: Mapping[str, Any], h: int) -> dict[str, Any]:
    layers = get_int(c, "num_layers")
    if "encoder_sparse_step" in c:
        sparse_step = get_int(c, "encoder_sparse_step")
    else:  # as SwitchTransformersConfig derives it
        n_sparse = get(c, "num_sparse_encoder_layers", 3)
        sparse_step = layers // n_sparse if positive_int(n_sparse) else layers
    return dict(num_layers=layers, intermediate_size=get_int(c, "d_ff"), vocab_size=get_int(c, "vocab_size"),
                max_positions=0, activation=get_str(c, "dense_act_fn", "relu"), norm="rmsnorm",
                tie_word_embeddings=get_bool(c, "tie_word_embeddings", True),
                num_decoder_layers=get_int(c, "num_decoder_layers", layers),
                num_experts=get_int(c, "num_experts"), expert_capacity=get_int(c, "expert_capacity"),
                sparse_step=sparse_step)


#: llama-family ``model_type`` values whose attention normalises q and k per head (``Qwen3Attention``)
QK_NORM_MODEL_TYPES = frozenset({"qwen3"})


def _read_llama(c: Mapping[str, Any], h: int) -> dict[str, Any]:
    return dict(num_layers=get_int(c, "num_hidden_layers"), intermediate_size=get_int(c, "intermediate_size"),
                vocab_size=get_int(c, "vocab_size"), max_positions=get_int(c, "max_position_embeddings"),
                activation=get_str(c, "hidden_act", "silu"), norm="rmsnorm",
                tie_word_embeddings=get_bool(c, "tie_word_embeddings", False),
                qk_norm=isinstance(c.get("model_type"), str) and c["model_type"] in QK_NORM_MODEL_TYPES)


def _read_mpt(c: Mapping[str, Any], h: int) -> dict[str, Any]:
    """MosaicML MPT (``MPTConfig``; llm-foundry's yamls): the MLP is ``expansion_ratio x d_model`` wide with an
    exact GELU, LayerNorm, tied embeddings. ``attn_config.alibi``, ``learned_pos_emb`` and ``no_bias`` stay in
    ``config`` (the builder reads them; MPTConfig's defaults: no ALiBi, learned positions, biases on)."""
    ratio = get(c, "expansion_ratio", 4)
    if not positive_int(ratio):
        raise BadConfig("expansion_ratio", ratio, "a positive integer")
    for key in ("no_bias", "learned_pos_emb"):
        get_bool(c, key, key == "learned_pos_emb")
    attn = get(c, "attn_config", {})
    if not isinstance(attn, Mapping):
        raise BadConfig("attn_config", attn, "a mapping")
    get_bool(attn, "alibi", False)
    return dict(num_layers=get_int(c, "n_layers"), intermediate_size=ratio * h, vocab_size=get_int(c, "vocab_size"),
                max_positions=get_int(c, "max_seq_len", 2048), activation="gelu", norm="layernorm",
                tie_word_embeddings=True)


#: family name -> how to read its Hugging Face config (defaults are the transformers config defaults)
FAMILIES: dict[str, Family] = {
    "gpt2": Family(hidden="n_embd", heads="n_head", read=_read_gpt2),
    "opt": Family(hidden="hidden_size", heads="num_attention_heads", read=_read_opt),
    "bert": Family(hidden="hidden_size", heads="num_attention_heads", read=_read_bert),
    "switch": Family(hidden="d_model", heads="num_heads", head_dim="d_kv", default_head_dim=64,
                     read=_read_switch),
    "llama": Family(hidden="hidden_size", heads="num_attention_heads", kv_heads="num_key_value_heads",
                    head_dim="head_dim", read=_read_llama),
    "mpt": Family(hidden="d_model", heads="n_heads", read=_read_mpt,
                  builder_keys=("no_bias", "learned_pos_emb", "attn_config")),
    "moe": Family(hidden="hidden_size", heads="num_attention_heads", kv_heads="num_key_value_heads",
                  head_dim="head_dim", read=lambda c, h: read_moe(c), decoder=decoder_config),
}


def _attention(fam: Family, c: Mapping[str, Any], path: Path) -> dict[str, int]:
    """Hidden size, heads, kv heads and head size, with the shape rules of multi-head attention.

    Without an explicit head size, the heads split the hidden size evenly: heads must divide it.
    With grouped-query attention, every key/value head serves the same number of query heads:
    kv heads must divide heads.
    """
    h, nh = get_int(c, fam.hidden), get_int(c, fam.heads)
    nkv = get_int(c, fam.kv_heads, nh) if fam.kv_heads else nh
    explicit = fam.head_dim is not None and (c.get(fam.head_dim) is not None or fam.default_head_dim is not None)
    head_dim = get_int(c, fam.head_dim, fam.default_head_dim) if explicit else 0
    if not explicit:
        if h % nh:
            raise SpecError(f"{path}: field 'config.{fam.heads}' has value {nh!r}, which does not divide "
                            f"the hidden size config.{fam.hidden} = {h}")
        head_dim = h // nh
    if nh % nkv:
        raise SpecError(f"{path}: field 'config.{fam.kv_heads}' has value {nkv!r}, which does not divide "
                        f"the number of heads config.{fam.heads} = {nh}")
    return dict(hidden_size=h, num_heads=nh, num_kv_heads=nkv, head_dim=head_dim)


_TOP_FIELDS = ("key", "family", "source", "config")
_OPTIONAL_FIELDS = ("aliases", "variants")
#: dtypes a quantised variant's checkpoint holds (``variants: {<Hugging Face id>: <dtype>}``)
VARIANT_DTYPES = ("fp8", "fp4")


class CheckpointDtypeError(SpecError):
    """A dtype the model's checkpoint cannot run in (a quantised variant asked for another dtype); names both."""

    def __init__(self, name: str, held: str, asked: str) -> None:
        super().__init__(f"model {name!r} is a {held} checkpoint and cannot run in {asked}; "
                         f"ask for dtype={held}, or name the unquantised release for another dtype")
        self.name, self.held, self.asked = name, held, asked

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (worker processes) despite the custom __init__
        return type(self), (self.name, self.held, self.asked)


def check_checkpoint_dtype(spec: ModelSpec, dtype: str) -> str:
    """``dtype``, unless ``spec`` was found by a quantised variant's id whose checkpoint holds another dtype:
    a ``-NVFP4`` checkpoint runs in fp4 only, a ``-FP8`` one in fp8 (:class:`CheckpointDtypeError`). The
    publisher's release (found by key or alias) runs in any dtype: engines quantise it on load."""
    if spec.variant_dtype is not None and dtype != spec.variant_dtype:
        name = next((n for n, d in spec.variants.items() if d == spec.variant_dtype), spec.key)
        raise CheckpointDtypeError(name, spec.variant_dtype, dtype)
    return dtype


#: precisions a serving row may spell that name a release's own expert quantisation rather than a dtype:
#: precision -> the checkpoint quantisation it means (its other layers run bf16)
RELEASE_PRECISIONS = {"int4": "int4", "mxfp4": "mxfp4"}


def workload_dtype_of(spec: ModelSpec, precision: str) -> str:
    """A serving row's ``precision`` as the workload dtype: ``int4`` (``mxfp4``) names the release of a model whose
    routed experts ship in int4 (mxfp4), Kimi-K2.5 (gpt-oss): its experts keep that format and everything else
    runs bf16 (workload ``bf16``, :func:`tilecast.graph.work.expert_format`); for a model without such experts it
    is a :class:`SpecError` naming both. Any other precision is the dtype itself."""
    held = RELEASE_PRECISIONS.get(precision)
    if held is None:
        return precision
    if spec.quantization != held:
        raise SpecError(f"precision {precision!r} names a release with {held} expert weights; {spec.key}'s "
                        f"checkpoint holds {spec.quantization or 'bf16'} weights")
    return "bf16"


def _variants(path: Path, value: Any) -> dict[str, str]:
    """The ``variants`` field: quantised checkpoint ids -> the dtype each holds."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(nonempty_str(k) for k in value):
        raise invalid(path, "variants", value, "a mapping of Hugging Face ids to dtypes")
    for name, dtype in value.items():
        if dtype not in VARIANT_DTYPES:
            raise invalid(path, f"variants.{name}", dtype, "one of " + ", ".join(VARIANT_DTYPES))
    return dict(value)


def config_fields(family: str, cfg: Mapping[str, Any], where: object) -> dict[str, Any]:
    """The ModelSpec fields a family reads from a Hugging Face config; a missing or bad field is a SpecError
    naming ``where`` (a file, or a what-if) and ``config.<key>``."""
    fam = FAMILIES[family]
    try:
        fields = _attention(fam, fam.decoder(cfg) if fam.decoder else cfg, where)
        fields.update(fam.read(cfg, fields["hidden_size"]))
    except BadConfig as exc:
        if exc.value is MISSING:
            raise SpecError(f"{where}: missing field 'config.{exc.key}' for family {family!r}") from None
        raise invalid(where, f"config.{exc.key}", exc.value, exc.expected) from None
    return fields


def load_model_file(path: Path) -> ModelSpec:
    """Validate one model YAML file; errors name the file, the field and the value."""
    data = read_yaml(path)
    extra = sorted(set(data) - set(_TOP_FIELDS) - set(_OPTIONAL_FIELDS))
    if extra:
        raise SpecError(f"{path}: unknown field {extra[0]!r} (value {data[extra[0]]!r}); "
                        f"known fields: {', '.join(_TOP_FIELDS + _OPTIONAL_FIELDS)}")
    for name in _TOP_FIELDS:
        if name not in data:
            raise SpecError(f"{path}: missing field {name!r}")
    for name in ("key", "source"):
        if not nonempty_str(data[name]):
            raise invalid(path, name, data[name], nonempty_str)
    if data["key"] != path.stem:
        raise SpecError(f"{path}: field 'key' has value {data['key']!r} but the file is named {path.stem!r}")
    family = data["family"]
    if not isinstance(family, str) or family not in FAMILIES:
        raise invalid(path, "family", family, "one of " + ", ".join(FAMILIES))
    aliases = () if data.get("aliases") is None else data["aliases"]  # absent or null: none
    if not alias_list(aliases):
        raise invalid(path, "aliases", data["aliases"], alias_list)
    cfg = data["config"]
    if not isinstance(cfg, dict):
        raise invalid(path, "config", cfg, "a mapping (the Hugging Face config)")
    variants = _variants(path, data.get("variants"))
    clash = sorted(set(variants) & {data["key"], *aliases})
    if clash:
        raise invalid(path, "variants", clash[0], "ids other than the key and the aliases")
    fields = config_fields(family, cfg, path)
    return ModelSpec(key=data["key"], family=family, source=data["source"], aliases=tuple(aliases),
                     variants=MappingProxyType(variants), config=MappingProxyType(dict(cfg)), **fields)


#: beside ``model/``, not in it: the models known but not forecastable, by group with a reason
UNSUPPORTED_FILE = "unsupported_models.yaml"


def load_unsupported_file(path: Path) -> dict[str, str]:
    """``conf/unsupported_models.yaml`` -> model id -> reason; a missing file lists none.

    The file holds ``groups``: a list of ``{reason: <text>, models: [<id>, ...]}``; an id listed twice is
    an error naming it.
    """
    if not Path(path).exists():
        return {}
    data = read_yaml(path)
    extra = sorted(set(data) - {"groups"})
    if extra:
        raise SpecError(f"{path}: unknown field {extra[0]!r} (value {data[extra[0]]!r}); known fields: groups")
    groups = data.get("groups")
    if not isinstance(groups, list):
        raise invalid(path, "groups", groups, "a list of {reason, models} mappings")
    reasons: dict[str, str] = {}
    for i, group in enumerate(groups):
        where = f"groups[{i}]"
        if not isinstance(group, dict) or set(group) != {"reason", "models"}:
            raise invalid(path, where, group, "a mapping with exactly the fields reason and models")
        if not nonempty_str(group["reason"]):
            raise invalid(path, f"{where}.reason", group["reason"], nonempty_str)
        if not alias_list(group["models"]) or not group["models"]:
            raise invalid(path, f"{where}.models", group["models"], "a non-empty " + alias_list.__doc__)
        for name in group["models"]:
            if name in reasons:
                raise SpecError(f"{path}: field '{where}.models' lists {name!r}, which an earlier group lists")
            reasons[name] = " ".join(group["reason"].split())
    return reasons


@dataclass(frozen=True)
class _Catalog:
    by_key: dict[str, ModelSpec]
    index: dict[str, ModelSpec]  # every name: keys, aliases and variants (a variant's spec sets variant_dtype)
    unsupported: dict[str, str]  # model id -> why it cannot be forecast


@functools.cache
def _catalog(conf_dir: Path) -> _Catalog:
    """Load every ``model/*.yaml`` and the unsupported list. A name two files claim (key or alias), or a
    catalog name the unsupported list also lists, would make lookups ambiguous: :class:`SpecError` naming
    both files."""
    specs = {p: load_model_file(p) for p in sorted((conf_dir / "model").glob("*.yaml"))}
    unsupported_path = conf_dir / UNSUPPORTED_FILE
    unsupported = load_unsupported_file(unsupported_path)
    owner: dict[str, Path] = {p.stem: p for p in specs}  # keys first: another file's alias must not shadow one
    index: dict[str, ModelSpec] = {}
    for p, spec in specs.items():
        for field_name, names in (("aliases", spec.aliases), ("variants", tuple(spec.variants))):
            for name in names:
                if owner.setdefault(name, p) != p:
                    raise SpecError(f"{p}: field {field_name!r} has value {name!r}, which {owner[name]} already names")
        index.update((name, spec) for name in (spec.key, *spec.aliases))
        index.update((name, dataclasses.replace(spec, variant_dtype=dtype)) for name, dtype in spec.variants.items())
    for name in unsupported:
        if name in owner:
            raise SpecError(f"{unsupported_path}: lists {name!r} as unsupported, which {owner[name]} names")
    return _Catalog({s.key: s for s in specs.values()}, index, unsupported)


def all_models(conf_dir: Path = CONF_DIR) -> dict[str, ModelSpec]:
    """Every model of the catalog by key."""
    return dict(_catalog(Path(conf_dir)).by_key)


def unsupported_models(conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """The model ids known but not forecastable -> the reason (``conf/unsupported_models.yaml``)."""
    return dict(_catalog(Path(conf_dir)).unsupported)


def get_model(name: str, conf_dir: Path = CONF_DIR) -> ModelSpec:
    """Look a model up by catalog key, alias (a Hugging Face id such as ``meta-llama/Llama-3.1-70B``) or
    quantised variant (``nvidia/DeepSeek-R1-NVFP4``: the spec then carries ``variant_dtype``, the dtype its
    checkpoint runs in, :func:`check_checkpoint_dtype`).

    A model of ``conf/unsupported_models.yaml`` raises :class:`UnsupportedModelError` with its reason;
    an unknown name raises :class:`~tilecast.specs.UnknownSpecError` listing the closest known names.
    """
    cat = _catalog(Path(conf_dir))
    if name in cat.index:
        return cat.index[name]
    if name in cat.unsupported:
        raise UnsupportedModelError(name, cat.unsupported[name])
    raise unknown_error("model", name, {k: list(s.aliases) for k, s in cat.by_key.items()})
