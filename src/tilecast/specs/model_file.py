"""A catalog file from a Hugging Face ``config.json``: what adding a model takes (``scripts/add_model.py``).

:func:`model_file_text` writes ``conf/model/<key>.yaml`` text: a comment, ``key``, ``family``, ``source``, the
aliases and quantised variants, and the config verbatim (keys in their published order). The text is validated
as the catalog validates it before it is returned, so a config tilecast cannot read (an unknown architecture,
a missing key) fails here with the same named error.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tilecast.specs.architecture import ARCHITECTURES, architecture
from tilecast.specs.errors import SpecError
from tilecast.specs.hf_config import BadConfig
from tilecast.specs.model import ModelSpec, load_model_file

#: ``architectures[0]`` of the dense families (the rest are :data:`~tilecast.specs.architecture.ARCHITECTURES`)
DENSE_ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen3ForCausalLM": "llama", "MistralForCausalLM": "llama",
                       "GPT2LMHeadModel": "gpt2", "OPTForCausalLM": "opt", "BertForMaskedLM": "bert"}


def family_of_config(config: Mapping[str, Any]) -> str:
    """The catalog family of a config by its ``architectures[0]`` (``moe`` for every MoE architecture); an
    architecture tilecast does not model is a :class:`SpecError` naming it and the known ones."""
    try:
        name = architecture(config)
    except BadConfig as exc:
        raise SpecError(f"config.architectures has invalid value {exc.value!r} (expected {exc.expected})") from None
    if name in ARCHITECTURES:
        return "moe"
    if name in DENSE_ARCHITECTURES:
        return DENSE_ARCHITECTURES[name]
    raise SpecError(f"config.architectures[0] = {name!r} is not an architecture tilecast models; known: "
                    + ", ".join([*DENSE_ARCHITECTURES, *ARCHITECTURES]))


def model_file_text(config: Mapping[str, Any], key: str, source: str, aliases: Sequence[str] = (),
                    variants: Mapping[str, str] | None = None, note: str = "") -> str:
    """The catalog file of ``config`` (validated: a config tilecast cannot read raises its named SpecError)."""
    data: dict[str, Any] = {"key": key, "family": family_of_config(config), "source": source}
    if aliases:
        data["aliases"] = list(aliases)
    if variants:
        data["variants"] = dict(variants)
    data["config"] = dict(config)
    head = "".join(f"# {line}\n".replace("# \n", "#\n") for line in note.strip().splitlines()) if note else ""
    text = head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)
    check_model_file_text(text, key)
    return text


def check_model_file_text(text: str, key: str) -> ModelSpec:
    """Load ``text`` as ``<key>.yaml`` exactly as the catalog would (its errors name the field)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{key}.yaml"
        path.write_text(text)
        return load_model_file(path)
