"""Graphs and memory from two short recordings scaled to every block equal recording every block."""

import pytest

from tilecast.graph import memory_footprint
from tilecast.graph.build import REPEATING_FAMILIES, scalable
from tilecast.graph.parallel import build_parallel_graph
from tilecast.specs import all_models, get_model

SCALABLE = sorted(k for k in all_models() if scalable(get_model(k)))


def _seq(key: str) -> int:
    return min(get_model(key).max_positions or 512, 128)


def _assert_same_graph(key, batch, seq, mode, parallel=None, fused=False):
    fast = build_parallel_graph(key, batch, seq, mode, parallel, fused)
    full = build_parallel_graph(key, batch, seq, mode, parallel, fused, scale_layers=False)
    assert fast.ops == full.ops  # every op: kind, dims, phase, section, count, bytes per output, name, order
    assert fast.total_flops() == full.total_flops() and fast.total_bytes() == full.total_bytes()
    assert fast.num_layers == full.num_layers and fast.meta == full.meta


def test_every_repeating_family_is_scaled():
    assert {get_model(k).family for k in SCALABLE} == REPEATING_FAMILIES
    assert not scalable(get_model("switchxl4"))  # alternating sparse blocks: recorded in full


@pytest.mark.parametrize("key", SCALABLE)
@pytest.mark.parametrize("mode,fused", [("inference", False), ("inference", True), ("training", False)])
def test_scaled_graph_equals_every_block_recorded(key, mode, fused):
    _assert_same_graph(key, 2, _seq(key), mode, fused=fused)


@pytest.mark.parametrize("key,parallel", [("gpt2_large", "dp4"), ("gpt2_large", "tp4"), ("gpt3_xl", "pp4_1"),
                                          ("llama2_7b", "tp4"), ("gpt3_27", "pp4_2"), ("opt_13", "tp4")])
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_scaled_parallel_graph_equals_every_block_recorded(key, parallel, mode):
    _assert_same_graph(key, 8, _seq(key), mode, parallel)


@pytest.mark.parametrize("key", SCALABLE)
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_scaled_memory_equals_every_block_recorded(key, mode):
    for batch, seq in ((1, 64), (4, _seq(key))):
        for optimizer in ("adamw", None):
            fast = memory_footprint(key, batch, seq, mode, optimizer=optimizer)
            assert fast == memory_footprint(key, batch, seq, mode, optimizer=optimizer, scale_layers=False)


def test_long_sequence_memory_peak_scales_too():
    """Attention-bound peaks (in the last block) and logits-bound ones (after it) both scale."""
    for key, batch, seq in (("gpt3_27", 8, 2048), ("opt_13", 8, 2048), ("llama2_7b", 2, 4096)):
        assert memory_footprint(key, batch, seq) == memory_footprint(key, batch, seq, scale_layers=False)
