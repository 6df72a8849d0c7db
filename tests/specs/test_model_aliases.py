"""Serving models: Llama-3.1 and Qwen3 configs, Hugging Face ids as aliases, unsupported model ids."""

from __future__ import annotations

import copy
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tilecast.cli import catalog_argv
from tilecast.paths import AICONFIGURATOR_DIR, CONF_DIR
from tilecast.specs import (
    SpecError,
    UnknownSpecError,
    UnsupportedModelError,
    all_models,
    get_model,
    load_model_file,
    unsupported_models,
)
from tilecast.specs.model import UNSUPPORTED_FILE

#: alias -> catalog key
ALIASES = {
    "meta-llama/Llama-3.1-8B": "llama31_8b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama31_8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama31_8b",
    "meta-llama/Llama-3.1-70B": "llama31_70b",
    "meta-llama/Llama-3.1-70B-Instruct": "llama31_70b",
    "Qwen/Qwen3-32B": "qwen3_32b",
    "nvidia/Qwen3-32B-NVFP4": "qwen3_32b",
}
#: the mixture-of-experts ids of the serving data (data/aiconfigurator/serving.parquet, model_path) -> key
MOE_IDS = {"deepseek-ai/DeepSeek-R1": "deepseek_r1", "deepseek-ai/DeepSeek-V3": "deepseek_v3",
           "MiniMaxAI/MiniMax-M2.5": "minimax_m25", "Qwen/Qwen3.5-397B-A17B": "qwen35_397b_a17b",
           "openai/gpt-oss-120b": "gpt_oss_120b", "moonshotai/Kimi-K2.5": "kimi_k25", "zhipuai/GLM-5": "glm5",
           "nvidia/DeepSeek-R1-NVFP4": "deepseek_r1", "nvidia/DeepSeek-V3.1-NVFP4": "deepseek_v31"}
#: ids known but refused (conf/unsupported_models.yaml), with a word of their reason
UNSUPPORTED_IDS = {"deepseek-ai/DeepSeek-V4-Flash": "compressed attention",
                   "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8": "Mamba-2",
                   "MiniMaxAI/MiniMax-M3": "sparse attention"}
SERVING = AICONFIGURATOR_DIR / "serving.parquet"


@pytest.mark.parametrize(("alias", "key"), ALIASES.items())
def test_hugging_face_ids_resolve(alias, key):
    spec = get_model(alias)
    assert spec is get_model(key) and spec.key == key
    assert alias in spec.aliases and spec.names[0] == key


def test_models_without_aliases_keep_only_their_key():
    assert get_model("gpt2_large").aliases == () and get_model("gpt2_large").names == ("gpt2_large",)


def test_llama31_configs_are_llama3_with_long_rope():
    for key in ("llama31_8b", "llama31_70b"):
        m = get_model(key)
        assert m.config["rope_scaling"] == {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 8192, "rope_type": "llama3"}
        assert m.config["rope_theta"] == 500000.0 and m.max_positions == 131072 and not m.qk_norm
    eight, three = get_model("llama31_8b"), get_model("llama3_8b")
    same = ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size")
    assert all(getattr(eight, f) == getattr(three, f) for f in same)


def test_qwen3_has_an_explicit_head_dim_and_qk_norm():
    q = get_model("qwen3_32b")
    assert (q.hidden_size, q.num_heads, q.head_dim) == (5120, 64, 128)
    assert q.num_heads * q.head_dim == 8192 != q.hidden_size
    assert q.qk_norm and not q.tie_word_embeddings and q.config["rms_norm_eps"] == 1e-06
    assert q.config["architectures"] == ["Qwen3ForCausalLM"] and q.config["rope_theta"] == 1000000


def test_qk_norm_follows_model_type(tmp_path):
    data = _base("llama3_8b")
    data["config"]["model_type"] = "qwen3"
    assert load_model_file(_write(tmp_path, data)).qk_norm
    del data["config"]["model_type"]
    assert not load_model_file(_write(tmp_path, data)).qk_norm


@pytest.mark.parametrize(("name", "key"), MOE_IDS.items())
def test_moe_serving_models_resolve(name, key):
    spec = get_model(name)
    assert spec.key == key and spec.family == "moe" and spec.moe is not None
    assert name not in unsupported_models()


@pytest.mark.parametrize(("name", "why"), UNSUPPORTED_IDS.items())
def test_newer_architectures_are_unsupported_not_unknown(name, why):
    with pytest.raises(UnsupportedModelError) as info:
        get_model(name)
    assert not isinstance(info.value, UnknownSpecError) and isinstance(info.value, SpecError)
    msg = str(info.value)
    assert repr(name) in msg and why in msg and "unknown model" not in msg
    assert name in unsupported_models()


def test_unsupported_error_pickles():
    err = UnsupportedModelError("deepseek-ai/DeepSeek-R1", "why")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back), back.name, back.reason) == (UnsupportedModelError, str(err), err.name, "why")


def test_unknown_model_suggests_by_alias():
    with pytest.raises(UnknownSpecError) as info:
        get_model("Qwen/Qwen3-14B")
    closest = str(info.value).split("closest known: ")[1].split(";")[0]
    assert closest.startswith("qwen3_32b (Qwen/Qwen3-32B)")
    assert "v4" not in str(info.value).lower()  # unsupported ids are not suggested


def test_lookup_is_exact():
    with pytest.raises(UnknownSpecError):
        get_model("meta-llama/llama-3.1-70b")


def test_command_line_takes_hugging_face_ids():
    assert catalog_argv(["model=meta-llama/Llama-3.1-70B"]) == ["model=llama31_70b"]
    assert catalog_argv(["model=Qwen/Qwen3-32B,llama31_8b"]) == ["model=qwen3_32b,llama31_8b"]
    assert catalog_argv(["model=deepseek-ai/DeepSeek-V3"]) == ["model=deepseek_v3"]
    with pytest.raises(UnsupportedModelError):
        catalog_argv(["model=deepseek-ai/DeepSeek-V4-Flash"])


@pytest.mark.skipif(not SERVING.exists(), reason="the serving data is not in this checkout")
def test_every_serving_model_is_known_or_unsupported():
    import pandas as pd

    for name in sorted(set(pd.read_parquet(SERVING, columns=["model_path"])["model_path"])):
        try:
            get_model(name)
        except UnsupportedModelError:
            pass


# ---- broken catalogs -------------------------------------------------------------------------------

def _base(key: str = "llama31_8b") -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((CONF_DIR / "model" / f"{key}.yaml").read_text()))


def _write(conf: Path, data: dict[str, Any], stem: str | None = None) -> Path:
    (conf / "model").mkdir(parents=True, exist_ok=True)
    path = conf / "model" / f"{stem or data['key']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _catalog_dir(tmp_path: Path, *keys: str) -> Path:
    """A conf dir with the shipped files of ``keys`` and the shipped unsupported list."""
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    for key in keys:
        shutil.copy(CONF_DIR / "model" / f"{key}.yaml", conf / "model")
    shutil.copy(CONF_DIR / UNSUPPORTED_FILE, conf / UNSUPPORTED_FILE)
    return conf


def test_a_small_catalog_resolves_its_own_aliases(tmp_path):
    conf = _catalog_dir(tmp_path, "llama31_8b", "qwen3_32b")
    assert set(all_models(conf_dir=conf)) == {"llama31_8b", "qwen3_32b"}
    assert get_model("Qwen/Qwen3-32B", conf_dir=conf).key == "qwen3_32b"
    with pytest.raises(UnknownSpecError, match="'meta-llama/Llama-3.1-70B'"):
        get_model("meta-llama/Llama-3.1-70B", conf_dir=conf)


def test_catalog_without_an_unsupported_list_has_none(tmp_path):
    conf = _catalog_dir(tmp_path, "llama31_8b")
    (conf / UNSUPPORTED_FILE).unlink()
    assert unsupported_models(conf_dir=conf) == {}
    with pytest.raises(UnknownSpecError):
        get_model("deepseek-ai/DeepSeek-R1", conf_dir=conf)


def test_alias_claimed_by_two_files_is_an_error(tmp_path):
    conf = _catalog_dir(tmp_path, "llama31_8b")
    other = _base("llama31_70b") | {"aliases": ["meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-8B"]}
    _write(conf, other)
    with pytest.raises(SpecError) as info:
        all_models(conf_dir=conf)
    msg = str(info.value)
    assert "'aliases'" in msg and "'meta-llama/Llama-3.1-8B'" in msg
    assert "llama31_8b.yaml" in msg and "llama31_70b.yaml" in msg


def test_alias_naming_another_key_is_an_error(tmp_path):
    conf = _catalog_dir(tmp_path, "llama31_8b", "llama3_8b")
    _write(conf, _base("llama31_8b") | {"aliases": ["llama3_8b"]})
    with pytest.raises(SpecError, match=r"'llama3_8b', which .*llama3_8b\.yaml already names"):
        get_model("llama31_8b", conf_dir=conf)


def test_alias_listed_as_unsupported_is_an_error(tmp_path):
    conf = _catalog_dir(tmp_path, "llama31_8b")
    _write(conf, _base() | {"aliases": ["deepseek-ai/DeepSeek-V4-Pro"]})
    with pytest.raises(SpecError, match=r"unsupported_models\.yaml: lists 'deepseek-ai/DeepSeek-V4-Pro'"):
        all_models(conf_dir=conf)


@pytest.mark.parametrize("aliases", ["meta-llama/Llama-3.1-8B", ["a", "a"], ["ok", ""], [3], {"a": 1}])
def test_bad_aliases(tmp_path, aliases):
    path = _write(tmp_path, _base() | {"aliases": aliases})
    with pytest.raises(SpecError) as info:
        load_model_file(path)
    msg = str(info.value)
    assert str(path) in msg and "'aliases'" in msg and repr(aliases) in msg


@pytest.mark.parametrize("aliases", [None, []])
def test_no_aliases(tmp_path, aliases):
    assert load_model_file(_write(tmp_path, _base() | {"aliases": aliases})).aliases == ()


@pytest.mark.parametrize(("text", "match"), [
    ("groups: {reason: x, models: [a]}\n", "'groups'"),
    ("groups: [{reason: '', models: [a]}]\n", r"'groups\[0\]\.reason'"),
    ("groups: [{reason: x, models: []}]\n", r"'groups\[0\]\.models'"),
    ("groups: [{reason: x, models: [a, a]}]\n", r"'groups\[0\]\.models'"),
    ("groups: [{reason: x}]\n", r"'groups\[0\]'"),
    ("groups: [{reason: x, models: [a]}, {reason: y, models: [b, a]}]\n", "'a', which an earlier group lists"),
    ("groups: []\nmoe: [a]\n", "unknown field 'moe'"),
    ("groups: [{reason: x, models: [llama31_8b]}]\n", "lists 'llama31_8b' as unsupported"),
])
def test_bad_unsupported_list(tmp_path, text, match):
    conf = _catalog_dir(tmp_path, "llama31_8b")
    (conf / UNSUPPORTED_FILE).write_text(text)
    with pytest.raises(SpecError, match=match) as info:
        all_models(conf_dir=conf)
    assert UNSUPPORTED_FILE in str(info.value)


def test_unsupported_reason_is_one_line(tmp_path):
    conf = _catalog_dir(tmp_path)
    (conf / UNSUPPORTED_FILE).write_text("groups:\n- reason: >\n    no\n    experts\n  models: [m/x]\n")
    with pytest.raises(UnsupportedModelError, match=r"^model 'm/x' cannot be forecast: no experts$"):
        get_model("m/x", conf_dir=conf)
