"""Model catalog: shipped files validate with the data's exact configs; attention shape rules; errors."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.paths import CONF_DIR
from tilecast.specs import SpecError, UnknownSpecError, all_models, get_model, load_model_file

DATA_MODELS = ("bert_large", "bert", "gpt2_med", "gpt2_large", "gpt2_xl", "gpt3_xl", "gpt3_27", "gpt3_67",
               "gpt3_13", "opt", "opt_13", "switchxl4")
PUBLISHED = ("llama2_7b", "llama3_8b", "mistral_7b", "llama31_8b", "llama31_70b", "llama31_405b", "qwen3_32b")
#: llm-foundry's MPT sizes (the architectures of data/llm_foundry's training runs)
MPT = tuple(f"mpt_{s}" for s in ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b"))
#: mixture-of-experts decoders (family moe, tests/specs/test_moe_catalog.py)
MOE = ("deepseek_v3", "deepseek_r1", "deepseek_v31", "deepseek_v32", "kimi_k2", "kimi_k25", "glm5", "qwen3_235b_a22b",
       "qwen3_30b_a3b", "qwen35_397b_a17b", "gpt_oss_120b", "gpt_oss_20b", "minimax_m25", "llama4_scout",
       "llama4_maverick", "mixtral_8x22b", "mixtral_8x7b")

# key: (family, hidden, layers, heads, kv heads, head dim, intermediate, vocab, max positions, activation)
EXPECTED = {
    "bert": ("bert", 768, 12, 12, 12, 64, 3072, 30522, 512, "gelu"),
    "bert_large": ("bert", 1024, 24, 16, 16, 64, 4096, 30522, 512, "gelu"),
    "gpt2_xl": ("gpt2", 1600, 48, 25, 25, 64, 6400, 50257, 1024, "gelu_new"),
    "gpt3_27": ("gpt2", 2560, 32, 32, 32, 80, 10240, 50257, 2048, "gelu_new"),
    "gpt3_13": ("gpt2", 5120, 40, 40, 40, 128, 20480, 50257, 2048, "gelu_new"),
    "opt": ("opt", 512, 1, 8, 8, 64, 2048, 50272, 2048, "relu"),
    "opt_13": ("opt", 2048, 24, 32, 32, 64, 8192, 50272, 2048, "relu"),
    "switchxl4": ("switch", 1024, 24, 32, 32, 128, 16384, 32128, 0, "relu"),
    "llama2_7b": ("llama", 4096, 32, 32, 32, 128, 11008, 32000, 4096, "silu"),
    "llama3_8b": ("llama", 4096, 32, 32, 8, 128, 14336, 128256, 8192, "silu"),
    "mistral_7b": ("llama", 4096, 32, 32, 8, 128, 14336, 32000, 32768, "silu"),
    "llama31_8b": ("llama", 4096, 32, 32, 8, 128, 14336, 128256, 131072, "silu"),
    "llama31_70b": ("llama", 8192, 80, 64, 8, 128, 28672, 128256, 131072, "silu"),
    "qwen3_32b": ("llama", 5120, 64, 64, 8, 128, 25600, 151936, 40960, "silu"),  # explicit head_dim: 64 x 128 > 5120
    "llama31_405b": ("llama", 16384, 126, 128, 8, 128, 53248, 128256, 131072, "silu"),
    "mpt_7b": ("mpt", 4096, 32, 32, 32, 128, 16384, 50368, 2048, "gelu"),
    "mpt_30b": ("mpt", 7168, 48, 56, 56, 128, 28672, 50368, 2048, "gelu"),
    "mpt_125m": ("mpt", 768, 12, 12, 12, 64, 3072, 50368, 2048, "gelu"),
}

SHIPPED = sorted((CONF_DIR / "model").glob("*.yaml"))


def test_catalog_holds_the_data_and_published_models():
    assert set(all_models()) == set(DATA_MODELS) | set(PUBLISHED) | set(MPT) | set(MOE)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_file_validates(path):
    spec = load_model_file(path)
    assert spec.key == path.stem
    assert spec.num_heads % spec.num_kv_heads == 0
    explicit_head_dim = (spec.family == "switch" or spec.mla is not None
                         or (spec.config.get("text_config") or spec.config).get("head_dim") is not None)
    assert explicit_head_dim or spec.num_heads * spec.head_dim == spec.hidden_size
    assert spec.config == yaml.safe_load(path.read_text())["config"]  # kept verbatim


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_normalised_fields(key):
    m = get_model(key)
    got = (m.family, m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads, m.head_dim, m.intermediate_size,
           m.vocab_size, m.max_positions, m.activation)
    assert got == EXPECTED[key]


def test_family_specific_fields():
    sw = get_model("switchxl4")
    assert (sw.num_decoder_layers, sw.num_experts, sw.expert_capacity, sw.sparse_step, sw.norm) == (
        24, 4, 64, 2, "rmsnorm")
    assert get_model("opt").word_embed_proj_dim == 2048 and get_model("opt_13").word_embed_proj_dim == 2048
    assert get_model("bert").type_vocab_size == 2
    for key in PUBLISHED:
        m = get_model(key)
        assert (m.norm, m.gated_mlp, m.tie_word_embeddings) == ("rmsnorm", True, False)
    for key in DATA_MODELS + MPT:
        assert get_model(key).tie_word_embeddings and not get_model(key).gated_mlp


def test_published_configs_hold_their_exact_values():
    assert get_model("llama3_8b").config["rope_theta"] == 500000.0
    assert get_model("mistral_7b").config["sliding_window"] == 4096
    assert get_model("llama2_7b").config["rms_norm_eps"] == 1e-05
    assert get_model("gpt2_med").config["n_ctx"] == 1024  # the data's config, verbatim


def test_config_is_read_only():
    with pytest.raises(TypeError):
        get_model("bert").config["hidden_size"] = 1  # type: ignore[index]


def test_unknown_model_lists_known():
    with pytest.raises(UnknownSpecError) as info:
        get_model("llama2")
    msg = str(info.value)
    assert "'llama2'" in msg and "llama2_7b" in msg.split("closest known: ")[1].split(";")[0]
    for key in (*DATA_MODELS, *PUBLISHED):
        assert key in msg.split("all known: ")[1]


# ---- broken files ------------------------------------------------------------------------------

def _base(key: str = "llama3_8b") -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((CONF_DIR / "model" / f"{key}.yaml").read_text()))


def _write(conf: Path, data: dict[str, Any] | str, stem: str | None = None) -> Path:
    (conf / "model").mkdir(parents=True, exist_ok=True)
    stem = stem or (data["key"] if isinstance(data, dict) else "broken")
    path = conf / "model" / f"{stem}.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def _error(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_model_file(path)
    msg = str(info.value)
    assert str(path) in msg
    return msg


@pytest.mark.parametrize(("key", "heads_key", "heads"), [
    ("llama3_8b", "num_attention_heads", 24), ("gpt2_xl", "n_head", 7), ("bert", "num_attention_heads", 5),
    ("opt_13", "num_attention_heads", 48),
])
def test_heads_not_dividing_hidden(tmp_path, key, heads_key, heads):
    data = _base(key)
    data["config"][heads_key] = heads
    if key == "llama3_8b":
        data["config"]["num_key_value_heads"] = 8
    msg = _error(_write(tmp_path, data))
    assert f"'config.{heads_key}'" in msg and str(heads) in msg and "does not divide" in msg


@pytest.mark.parametrize("kv", [5, 3, 64])
def test_kv_heads_not_dividing_heads(tmp_path, kv):
    data = _base()
    data["config"]["num_key_value_heads"] = kv
    msg = _error(_write(tmp_path, data))
    assert "'config.num_key_value_heads'" in msg and str(kv) in msg and "does not divide" in msg


def test_explicit_head_dim_lifts_the_divisibility_rule(tmp_path):
    data = _base()
    data["config"].update(num_attention_heads=24, num_key_value_heads=8, head_dim=256)
    spec = load_model_file(_write(tmp_path, data))
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.hidden_size) == (24, 8, 256, 4096)


def test_switch_without_d_kv_takes_the_transformers_default(tmp_path):
    data = _base("switchxl4")
    del data["config"]["d_kv"]
    del data["config"]["encoder_sparse_step"]
    spec = load_model_file(_write(tmp_path, data))
    assert spec.head_dim == 64 and spec.sparse_step == 24 // 12


@pytest.mark.parametrize(("key", "config_key"), [
    ("llama3_8b", "hidden_size"), ("gpt2_med", "n_embd"), ("gpt2_med", "n_layer"), ("opt", "ffn_dim"),
    ("switchxl4", "num_experts"), ("bert", "vocab_size"),
])
def test_missing_config_field(tmp_path, key, config_key):
    data = _base(key)
    del data["config"][config_key]
    msg = _error(_write(tmp_path, data))
    assert f"missing field 'config.{config_key}'" in msg


@pytest.mark.parametrize(("config_key", "value"), [
    ("hidden_size", "4096"), ("hidden_size", 0), ("num_hidden_layers", -32), ("vocab_size", True),
    ("intermediate_size", 14336.0), ("hidden_act", 3), ("tie_word_embeddings", "no"),
    ("num_key_value_heads", 0), ("head_dim", "128"),
])
def test_wrong_config_value(tmp_path, config_key, value):
    data = _base()
    data["config"][config_key] = value
    msg = _error(_write(tmp_path, data))
    assert f"'config.{config_key}'" in msg and repr(value) in msg and "expected" in msg


@pytest.mark.parametrize("field", ["key", "family", "source", "config"])
def test_missing_top_field(tmp_path, field):
    data = _base()
    del data[field]
    msg = _error(_write(tmp_path, data, stem="llama3_8b"))
    assert f"missing field {field!r}" in msg


@pytest.mark.parametrize(("field", "value"), [
    ("family", "mamba"), ("family", None), ("source", ""), ("config", [1, 2]), ("config", "hidden_size: 1"),
])
def test_invalid_top_field(tmp_path, field, value):
    data = _base()
    data[field] = value
    msg = _error(_write(tmp_path, data))
    assert repr(field) in msg and repr(value) in msg


def test_unknown_top_field(tmp_path):
    msg = _error(_write(tmp_path, _base() | {"params_b": 8}))
    assert "'params_b'" in msg and "8" in msg


def test_key_must_match_file_name(tmp_path):
    msg = _error(_write(tmp_path, _base(), stem="llama3"))
    assert "'llama3_8b'" in msg and "'llama3'" in msg


@pytest.mark.parametrize("text", ["config: {hidden_size: 1\n", "just a string\n", ""])
def test_bad_yaml(tmp_path, text):
    msg = _error(_write(tmp_path, text))
    assert "YAML" in msg or "expected a mapping" in msg


def test_all_models_reports_a_broken_file_in_its_conf_dir(tmp_path):
    data = _base()
    data["config"]["num_key_value_heads"] = 7
    bad = _write(tmp_path, data)
    with pytest.raises(SpecError, match="num_key_value_heads") as info:
        all_models(conf_dir=tmp_path)
    assert str(bad) in str(info.value)


# ---- attention shape rules -----------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(kv=st.integers(1, 64), group=st.integers(1, 16), head_dim=st.integers(1, 256),
       extra=st.integers(1, 255))
def test_attention_shapes(kv, group, head_dim, extra):
    """hidden = heads x head_dim loads; hidden off by a non-multiple of heads, or kv not dividing heads, fails."""
    heads = kv * group
    data = _base()
    data["config"].update(hidden_size=heads * head_dim, num_attention_heads=heads, num_key_value_heads=kv)
    with tempfile.TemporaryDirectory() as tmp:
        spec = load_model_file(_write(Path(tmp), data))
        assert (spec.num_heads, spec.num_kv_heads, spec.head_dim) == (heads, kv, head_dim)
        if extra % heads:
            data["config"]["hidden_size"] = heads * head_dim + extra
            with pytest.raises(SpecError, match="config.num_attention_heads"):
                load_model_file(_write(Path(tmp), data))
        if heads > 1:
            data["config"].update(hidden_size=heads * head_dim, num_key_value_heads=heads + 1)
            with pytest.raises(SpecError, match="config.num_key_value_heads"):
                load_model_file(_write(Path(tmp), data))
