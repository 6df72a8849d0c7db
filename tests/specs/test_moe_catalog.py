"""Mixture-of-experts catalog: configs read per architecture, quantised variants set the dtype, named errors."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml

from tilecast.paths import CONF_DIR
from tilecast.specs import SpecError, get_model, load_model_file
from tilecast.specs.model import CheckpointDtypeError, check_checkpoint_dtype, workload_dtype_of
from tilecast.specs.model_file import family_of_config, model_file_text

# key: (experts, topk, expert inter, shared inter, MoE layers, layers, dense inter, attention)
EXPECTED = {
    "deepseek_v3": (256, 8, 2048, 2048, 58, 61, 18432, "mla"),
    "deepseek_r1": (256, 8, 2048, 2048, 58, 61, 18432, "mla"),
    "deepseek_v32": (256, 8, 2048, 2048, 58, 61, 18432, "mla"),
    "kimi_k25": (384, 8, 2048, 2048, 60, 61, 18432, "mla"),
    "glm5": (256, 8, 2048, 2048, 75, 78, 12288, "mla"),
    "qwen3_235b_a22b": (128, 8, 1536, 0, 94, 94, 12288, "gqa"),
    "qwen3_30b_a3b": (128, 8, 768, 0, 48, 48, 6144, "gqa"),
    "qwen35_397b_a17b": (512, 10, 1024, 1024, 60, 60, 1024, "gqa"),
    "gpt_oss_120b": (128, 4, 2880, 0, 36, 36, 2880, "gqa"),
    "minimax_m25": (256, 8, 1536, 0, 62, 62, 1536, "gqa"),
    "llama4_scout": (16, 1, 8192, 8192, 48, 48, 16384, "gqa"),
    "llama4_maverick": (128, 1, 8192, 8192, 24, 48, 16384, "gqa"),
    "mixtral_8x22b": (8, 2, 16384, 0, 56, 56, 16384, "gqa"),
}


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_moe_fields_from_the_config(key):
    m = get_model(key)
    moe = m.moe
    got = (moe.experts, moe.topk, moe.inter, moe.shared_inter, moe.num_moe_layers, m.num_layers,
           m.intermediate_size, "mla" if m.mla else "gqa")
    assert got == EXPECTED[key]
    assert len(moe.layers) == m.num_layers and len(m.layer_kinds) == m.num_layers


def test_deepseek_first_three_layers_are_dense_and_mla_dims():
    m = get_model("deepseek_v3")
    assert m.moe.layers[:4] == (False, False, False, True)
    assert (m.mla.q_lora_rank, m.mla.kv_lora_rank, m.mla.qk_nope_head_dim, m.mla.qk_rope_head_dim,
            m.mla.v_head_dim) == (1536, 512, 128, 64, 128)
    assert m.head_dim == 192 and m.mla.latent_dim == 576 and m.quantization == "fp8_block"
    assert m.sparse_attn is None and get_model("deepseek_v32").sparse_attn.index_topk == 2048


def test_gpt_oss_alternates_sliding_and_full_with_sinks():
    m = get_model("gpt_oss_120b")
    assert m.layer_kinds[:4] == ("sliding", "full", "sliding", "full") and m.sliding_window == 128
    assert m.attention_sinks and m.attention_bias and m.moe.expert_bias and m.quantization == "mxfp4"
    assert m.expert_only_quantization


def test_llama4_interleaves_moe_and_chunked_attention():
    m = get_model("llama4_maverick")
    assert m.moe.layers[:4] == (False, True, False, True)
    assert m.layer_kinds[:4] == ("chunked", "chunked", "chunked", "full") and m.sliding_window == 8192
    assert get_model("llama4_scout").moe.layers == (True,) * 48


def test_qwen35_hybrid_linear_attention():
    m = get_model("qwen35_397b_a17b")
    assert m.layer_kinds.count("linear") == 45 and m.layer_kinds.count("full") == 15
    la = m.linear_attn
    assert (la.key_heads, la.key_head_dim, la.value_heads, la.value_head_dim, la.conv_kernel, la.state_dtype) == (
        16, 128, 64, 128, 4, "fp32")
    assert m.attn_output_gate and m.moe.shared_gate and m.rotary_dim == 64


def test_multimodal_wrappers_read_the_text_decoder():
    for key in ("kimi_k25", "llama4_scout", "qwen35_397b_a17b"):
        m = get_model(key)
        assert "text_config" in m.config and m.hidden_size == m.config["text_config"]["hidden_size"]


# ---- variants: quantised checkpoints set the dtype ---------------------------------------------------

def test_a_variant_id_sets_the_dtype_and_keeps_the_architecture():
    base, fp4 = get_model("deepseek-ai/DeepSeek-R1"), get_model("nvidia/DeepSeek-R1-NVFP4")
    assert fp4.key == base.key == "deepseek_r1" and fp4 == base  # the same graph
    assert (base.variant_dtype, fp4.variant_dtype) == (None, "fp4")
    assert (base.default_dtype, fp4.default_dtype) == ("bf16", "fp4")
    assert get_model("Qwen/Qwen3-235B-A22B-FP8").variant_dtype == "fp8"


@pytest.mark.parametrize("dtype", ["fp4", "fp8", "bf16"])
def test_the_release_runs_in_any_dtype(dtype):
    assert check_checkpoint_dtype(get_model("deepseek-ai/DeepSeek-R1"), dtype) == dtype


@pytest.mark.parametrize(("name", "asked"), [("nvidia/DeepSeek-R1-NVFP4", "fp8"), ("nvidia/DeepSeek-R1-NVFP4", "bf16"),
                                             ("Qwen/Qwen3-235B-A22B-FP8", "fp4")])
def test_a_variant_cannot_run_in_another_dtype(name, asked):
    with pytest.raises(CheckpointDtypeError) as info:
        check_checkpoint_dtype(get_model(name), asked)
    msg = str(info.value)
    assert repr(name) in msg and asked in msg and get_model(name).variant_dtype in msg
    back = pickle.loads(pickle.dumps(info.value))
    assert str(back) == msg


# ---- bad configs: named errors ------------------------------------------------------------------------

def _base(key: str = "deepseek_v3") -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((CONF_DIR / "model" / f"{key}.yaml").read_text()))


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / f"{data['key']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_unknown_architecture_is_named(tmp_path):
    data = _base()
    data["config"]["architectures"] = ["DeepseekV9ForCausalLM"]
    with pytest.raises(SpecError) as info:
        load_model_file(_write(tmp_path, data))
    msg = str(info.value)
    assert "config.architectures" in msg and "DeepseekV9ForCausalLM" in msg and "DeepseekV3ForCausalLM" in msg


@pytest.mark.parametrize(("key", "path", "value", "field"), [
    ("deepseek_v3", ("quantization_config", "quant_method"), "awq", "config.quantization_config.quant_method"),
    ("gpt_oss_120b", ("layer_types",), ["sliding_attention"] * 35 + ["mamba"], "config.layer_types"),
    ("gpt_oss_120b", ("layer_types",), ["full_attention"] * 3, "config.layer_types"),
    ("deepseek_v3", ("n_routed_experts",), 0, "config.n_routed_experts"),
    ("deepseek_v3", ("scoring_func",), "tanh", "config.scoring_func"),
    ("qwen35_397b_a17b", ("text_config", "linear_num_value_heads"), None, "config.linear_num_value_heads"),
])
def test_bad_moe_config_fields_are_named(tmp_path, key, path, value, field):
    data = _base(key)
    target = data["config"]
    for step in path[:-1]:
        target = target[step]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    with pytest.raises(SpecError) as info:
        load_model_file(_write(tmp_path, data))
    assert field in str(info.value)


@pytest.mark.parametrize("variants", [{"nvidia/X": "int3"}, ["nvidia/X"], {"deepseek-ai/DeepSeek-V3": "fp4"}])
def test_bad_variants(tmp_path, variants):
    with pytest.raises(SpecError, match="variants"):
        load_model_file(_write(tmp_path, _base() | {"variants": variants}))


def test_a_config_json_is_enough_to_add_a_model(tmp_path):
    config = dict(_base("qwen3_30b_a3b")["config"], num_experts=64, num_hidden_layers=24)
    assert family_of_config(config) == "moe"
    text = model_file_text(config, "my_moe", "test", aliases=["me/My-MoE"], variants={"me/My-MoE-FP8": "fp8"})
    spec = load_model_file(_write(tmp_path, yaml.safe_load(text)))
    assert (spec.moe.experts, spec.num_layers, spec.variants["me/My-MoE-FP8"]) == (64, 24, "fp8")
    assert spec.config == config
    with pytest.raises(SpecError, match="architectures"):
        model_file_text(dict(config, architectures=["NotAModel"]), "bad", "test")


def test_int4_precision_is_kimis_own_release():
    assert workload_dtype_of(get_model("moonshotai/Kimi-K2.5"), "int4") == "bf16"  # int4 experts, bf16 elsewhere
    assert workload_dtype_of(get_model("openai/gpt-oss-120b"), "mxfp4") == "bf16"
    assert workload_dtype_of(get_model("deepseek_r1"), "fp8") == "fp8"
    with pytest.raises(SpecError, match="'int4'.*deepseek_r1.*fp8_block"):
        workload_dtype_of(get_model("deepseek_r1"), "int4")
