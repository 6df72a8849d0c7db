"""Memory footprint: parameters (published counts), gradients, AdamW state, activations, transient."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.graph import memory_footprint
from tilecast.graph.torch_models import build_torch_model
from tilecast.specs import get_model

#: parameter counts of the Hugging Face models (tied embeddings counted once)
PUBLISHED = {"gpt2_large": 774_030_080, "opt_13": 1_315_758_080, "llama2_7b": 6_738_415_616,
             "llama3_8b": 8_030_261_248, "mistral_7b": 7_241_732_096}


@pytest.mark.parametrize(("key", "n"), PUBLISHED.items())
def test_parameters_match_published_counts(key, n):
    assert memory_footprint(key, 1, 128).params_bytes == 4 * n
    assert memory_footprint(key, 1, 128, dtype="bf16").params_bytes == 2 * n


@pytest.mark.parametrize("key", ["gpt2_large", "opt_13", "bert_large"])
def test_parameters_match_the_plain_torch_model(key):
    spec = get_model(key)
    with torch.device("meta"):
        n = sum(p.numel() for p in build_torch_model(spec, "training").parameters())
    assert memory_footprint(key, 1, 128, "training").params_bytes == 4 * n


def test_inference_keeps_nothing_for_backward():
    fp = memory_footprint("gpt2_large", 4, 1024)
    assert fp.grads_bytes == fp.optimizer_bytes == fp.activations_bytes == 0
    # the largest kernel working set: the LM head's input and logits
    assert fp.transient_bytes == 4 * (4096 * 1280 + 4096 * 50257)
    assert fp.total_bytes == fp.params_bytes + fp.transient_bytes


def test_training_adds_gradients_adamw_state_and_activations():
    fp = memory_footprint("gpt2_large", 4, 1024, "training")
    n = PUBLISHED["gpt2_large"]
    assert fp.grads_bytes == 4 * n and fp.optimizer_bytes == 8 * n
    # attention dominates: softmax output, dropout mask (1 byte) and dropout output per layer at least
    assert fp.activations_bytes > 36 * 9 * 4 * 20 * 1024 * 1024
    no_opt = memory_footprint("gpt2_large", 4, 1024, "training", optimizer=None)
    assert no_opt.optimizer_bytes == 0 and no_opt.total_bytes == fp.total_bytes - 8 * n
    mixed = memory_footprint("gpt2_large", 4, 1024, "training", dtype="fp16")
    assert mixed.optimizer_bytes == 12 * n  # two fp32 moments and the fp32 master weights
    assert mixed.activations_bytes < fp.activations_bytes


def test_fit_flag():
    fp = memory_footprint("gpt2_large", 1, 1024, "training", optimizer=None)
    assert fp.fits(24 * 2 ** 30) and not fp.fits(16 * 2 ** 30)  # measured on L4 (24 GB); not on a 16 GB P100
    assert set(fp.as_dict()) >= {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes",
                                 "transient_bytes", "total_bytes"}


def test_bad_dtype_is_named():
    with pytest.raises(ValueError, match="got 'fp64'"):
        memory_footprint("gpt2_large", 1, 16, dtype="fp64")


@settings(max_examples=10, deadline=None)
@given(key=st.sampled_from(["gpt2_large", "opt_13", "bert_large", "llama3_8b", "switchxl4"]),
       batch=st.integers(2, 16))
def test_activations_grow_linearly_in_batch(key, batch):
    one = memory_footprint(key, 1, 128, "training")
    many = memory_footprint(key, batch, 128, "training")
    assert many.params_bytes == one.params_bytes and many.optimizer_bytes == one.optimizer_bytes
    assert many.activations_bytes == pytest.approx(batch * one.activations_bytes, rel=0.01)
