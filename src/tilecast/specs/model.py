"""Model configs: ``conf/model/<key>.yaml`` -> frozen, validated :class:`ModelSpec`.

A catalog file holds ``key``, ``family``, ``source`` and ``config``: the model's published
Hugging Face config with its exact keys and values. :class:`ModelSpec` normalises the fields the
graph builders need, one reader per family (a registry, not a chain of ifs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tilecast.paths import CONF_DIR
from tilecast.specs.catalog import nonempty_str, read_yaml, unknown_error
from tilecast.specs.errors import SpecError


@dataclass(frozen=True)
class ModelSpec:
    """The architecture facts a graph builder needs, normalised across families."""

    key: str
    family: str  # gpt2 | opt | bert | switch | llama
    hidden_size: int
    num_layers: int  # decoder (or encoder-only) layers; for switch: encoder layers
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_positions: int  # 0: no learned positions limit (relative / rotary up to max_positions)
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
    config: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def gated_mlp(self) -> bool:
        """SwiGLU-style MLP with a gate projection (llama family)."""
        return self.family == "llama"


def _gpt2(c: Mapping[str, Any]) -> dict[str, Any]:
    h, nh = c["n_embd"], c["n_head"]
    return dict(hidden_size=h, num_layers=c["n_layer"], num_heads=nh, num_kv_heads=nh, head_dim=h // nh,
                intermediate_size=c.get("n_inner") or 4 * h, vocab_size=c["vocab_size"],
                max_positions=c["n_positions"], activation=c.get("activation_function", "gelu_new"),
                norm="layernorm", tie_word_embeddings=True)


def _opt(c: Mapping[str, Any]) -> dict[str, Any]:
    h, nh = c["hidden_size"], c["num_attention_heads"]
    return dict(hidden_size=h, num_layers=c["num_hidden_layers"], num_heads=nh, num_kv_heads=nh,
                head_dim=h // nh, intermediate_size=c["ffn_dim"], vocab_size=c["vocab_size"],
                max_positions=c["max_position_embeddings"], activation=c.get("activation_function", "relu"),
                norm="layernorm", tie_word_embeddings=True,
                word_embed_proj_dim=c.get("word_embed_proj_dim", h))


def _bert(c: Mapping[str, Any]) -> dict[str, Any]:
    h, nh = c["hidden_size"], c["num_attention_heads"]
    return dict(hidden_size=h, num_layers=c["num_hidden_layers"], num_heads=nh, num_kv_heads=nh,
                head_dim=h // nh, intermediate_size=c["intermediate_size"], vocab_size=c["vocab_size"],
                max_positions=c["max_position_embeddings"], activation=c.get("hidden_act", "gelu"),
                norm="layernorm", tie_word_embeddings=True, type_vocab_size=c.get("type_vocab_size", 2))


def _switch(c: Mapping[str, Any]) -> dict[str, Any]:
    h, nh = c["d_model"], c["num_heads"]
    return dict(hidden_size=h, num_layers=c["num_layers"], num_heads=nh, num_kv_heads=nh,
                head_dim=c.get("d_kv", h // nh), intermediate_size=c["d_ff"], vocab_size=c["vocab_size"],
                max_positions=0, activation=c.get("dense_act_fn", "relu"), norm="rmsnorm",
                tie_word_embeddings=True, num_decoder_layers=c.get("num_decoder_layers", c["num_layers"]),
                num_experts=c["num_experts"], expert_capacity=c["expert_capacity"],
                sparse_step=c.get("encoder_sparse_step", 2))


def _llama(c: Mapping[str, Any]) -> dict[str, Any]:
    h, nh = c["hidden_size"], c["num_attention_heads"]
    return dict(hidden_size=h, num_layers=c["num_hidden_layers"], num_heads=nh,
                num_kv_heads=c.get("num_key_value_heads", nh), head_dim=c.get("head_dim", h // nh),
                intermediate_size=c["intermediate_size"], vocab_size=c["vocab_size"],
                max_positions=c["max_position_embeddings"], activation=c.get("hidden_act", "silu"),
                norm="rmsnorm", tie_word_embeddings=bool(c.get("tie_word_embeddings", False)))


#: family name -> reader of the Hugging Face config
FAMILIES: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "gpt2": _gpt2, "opt": _opt, "bert": _bert, "switch": _switch, "llama": _llama,
}


def load_model_file(path: Path) -> ModelSpec:
    """Validate one model YAML file; errors name the file, the field and the value."""
    data = read_yaml(path)
    for name in ("key", "family", "source", "config"):
        if name not in data:
            raise SpecError(f"{path}: missing field {name!r}")
    extra = sorted(set(data) - {"key", "family", "source", "config"})
    if extra:
        raise SpecError(f"{path}: unknown field {extra[0]!r} (value {data[extra[0]]!r})")
    if data["key"] != path.stem:
        raise SpecError(f"{path}: field 'key' has value {data['key']!r} but the file is named {path.stem!r}")
    if data["family"] not in FAMILIES:
        raise SpecError(f"{path}: field 'family' has invalid value {data['family']!r}; "
                        f"known families: {', '.join(FAMILIES)}")
    if not nonempty_str(data["source"]):
        raise SpecError(f"{path}: field 'source' has invalid value {data['source']!r}")
    cfg = data["config"]
    if not isinstance(cfg, dict):
        raise SpecError(f"{path}: field 'config' must be a mapping, got {cfg!r}")
    try:
        fields = FAMILIES[data["family"]](cfg)
    except KeyError as exc:
        raise SpecError(f"{path}: missing field 'config.{exc.args[0]}' for family {data['family']!r}") from exc
    for name in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "intermediate_size",
                 "vocab_size"):
        v = fields[name]
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise SpecError(f"{path}: field {name!r} has invalid value {v!r}")
    if fields["num_heads"] % fields["num_kv_heads"]:
        raise SpecError(f"{path}: field 'num_kv_heads' has value {fields['num_kv_heads']!r}, "
                        f"which does not divide num_heads={fields['num_heads']}")
    if data["family"] != "switch" and fields["head_dim"] * fields["num_heads"] != fields["hidden_size"] \
            and data["family"] != "llama":
        raise SpecError(f"{path}: heads ({fields['num_heads']}) do not divide hidden size "
                        f"({fields['hidden_size']})")
    return ModelSpec(key=data["key"], family=data["family"], source=data["source"],
                     config=MappingProxyType(dict(cfg)), **fields)


@functools.cache
def _catalog(conf_dir: Path) -> dict[str, ModelSpec]:
    return {p.stem: load_model_file(p) for p in sorted((conf_dir / "model").glob("*.yaml"))}


def all_models(conf_dir: Path = CONF_DIR) -> dict[str, ModelSpec]:
    """Every model of the catalog by key."""
    return dict(_catalog(Path(conf_dir)))


def get_model(key: str, conf_dir: Path = CONF_DIR) -> ModelSpec:
    """Look a model up by catalog key; unknown -> error listing the closest known keys."""
    cat = _catalog(Path(conf_dir))
    if key in cat:
        return cat[key]
    raise unknown_error("model", key, cat)
