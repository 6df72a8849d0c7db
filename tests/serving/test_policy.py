"""Engine policies: the documented defaults load, overrides apply, unknown fields and bad values are named."""

import pytest

from tilecast.errors import UserError
from tilecast.serving.engines import ENGINES, UnknownEngineError
from tilecast.serving.policy import POLICY_FIELDS, PolicyValueError, UnknownPolicyFieldError, engine_policy


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_has_a_complete_policy(engine):
    policy = engine_policy(engine)
    assert policy.engine == engine and all(getattr(policy, f) is not None for f in POLICY_FIELDS)


def test_the_engines_differ_where_their_documentation_says():
    vllm, sglang, trtllm = (engine_policy(e) for e in ("vllm", "sglang", "trtllm"))
    assert vllm.mixed_batches and not sglang.mixed_batches and trtllm.mixed_batches
    assert vllm.chunked_prefill and not trtllm.chunked_prefill
    assert sglang.overlap_scheduling and not vllm.overlap_scheduling


def test_overrides_apply_and_unknown_fields_are_named():
    assert engine_policy("vllm", {"max_num_batched_tokens": 2048}).max_num_batched_tokens == 2048
    with pytest.raises(UnknownPolicyFieldError, match="unknown vllm policy field 'max_tokens'; known: max_num_b"):
        engine_policy("vllm", {"max_tokens": 4})
    assert issubclass(UnknownPolicyFieldError, UserError) and issubclass(PolicyValueError, UserError)


@pytest.mark.parametrize("field, value", [("max_num_seqs", 0), ("mixed_batches", "yes"), ("host_step_ms", -1.0),
                                          ("kv_memory_fraction", 1.5), ("max_num_batched_tokens", True)])
def test_bad_values_are_named(field, value):
    with pytest.raises(PolicyValueError, match=field):
        engine_policy("sglang", {field: value})


def test_an_unknown_engine_is_named():
    with pytest.raises(UnknownEngineError, match="known: vllm, sglang, trtllm"):
        engine_policy("tgi")
