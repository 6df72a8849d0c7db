"""Memory footprint: parameters (published counts), gradients, AdamW state, activations, transient."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.graph import memory_footprint
from tilecast.graph.memory import live_peak
from tilecast.graph.tape import Tape
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


def test_inference_peak_holds_the_cache_and_the_logits():
    fp = memory_footprint("gpt2_large", 4, 1024)
    T, H, V, L = 4096, 1280, 50257, 36
    assert fp.grads_bytes == fp.optimizer_bytes == 0
    # use_cache: every block's fused QKV output stays (the returned key / value are views of it), and the logits
    assert fp.activations_bytes == 4 * (L * 3 * T * H + T * V)
    # the peak is the LM head writing the logits while it reads the final norm's output
    assert fp.transient_bytes == 4 * T * H
    assert fp.total_bytes == fp.params_bytes + fp.activations_bytes + fp.transient_bytes


def test_inference_peak_in_attention_holds_two_score_tensors():
    """Long sequences: the last block's scores and their masked / softmaxed copy are live at once."""
    fp = memory_footprint("gpt3_27", 8, 2048)
    spec = get_model("gpt3_27")
    scores = 4 * 8 * spec.num_heads * 2048 * 2048
    kv = 4 * spec.num_layers * 3 * 8 * 2048 * spec.hidden_size
    assert fp.activations_bytes == kv  # the logits are not allocated yet
    assert 2 * scores <= fp.transient_bytes < 2 * scores + 4 * 8 * 2048 * 4 * spec.hidden_size


def test_live_peak_frees_after_the_last_reader_and_keeps_held_outputs():
    t = Tape()
    x = t.vec("a", "relu", [t.ext(10)], 1, 10)
    y = t.vec("b", "relu", [x], 1, 100)
    view = t.mem("v", [y], 100, alias=True)  # a view: no memory of its own, keeps y alive while read
    z = t.vec("c", "relu", [view], 1, 5)  # peak: x 10 + y 100 + z 5
    out = t.vec("d", "add", [z, x], 1, 7)  # y is freed: 10 + 5 + 7
    t.hold(out)
    assert live_peak(t) == (115, 0, z.node)
    t.vec("e", "relu", [out], 1, 1000)  # x and z freed after d; out is held: 7 + 1000
    assert live_peak(t) == (1007, 7, 5)


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
    with pytest.raises(ValueError, match="unknown dtype 'fp64'"):
        memory_footprint("gpt2_large", 1, 16, dtype="fp64")


@settings(max_examples=10, deadline=None)
@given(key=st.sampled_from(["gpt2_large", "opt_13", "bert_large", "llama3_8b", "switchxl4"]),
       batch=st.integers(2, 16))
def test_activations_grow_linearly_in_batch(key, batch):
    one = memory_footprint(key, 1, 128, "training")
    many = memory_footprint(key, batch, 128, "training")
    assert many.params_bytes == one.params_bytes and many.optimizer_bytes == one.optimizer_bytes
    assert many.activations_bytes == pytest.approx(batch * one.activations_bytes, rel=0.01)
