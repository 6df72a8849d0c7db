"""What-if specs (specs/whatif.py): field overrides validated like the catalog, named so nobody mistakes them."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.forecast import forecast
from tilecast.specs import GpuSpec, SpecError, UnknownSpecError, all_gpus, get_gpu, get_model
from tilecast.specs.whatif import (
    GPU_IDENTITY,
    changed_fields,
    is_what_if,
    model_with_config,
    same_value,
    what_if_gpu,
    with_overrides,
)

L4 = get_gpu("l4")
FIELDS = {f.name: f for f in dataclasses.fields(GpuSpec)}
#: positive-number fields (required or optional), read from the dataclass so new fields are covered
NUMBER_FIELDS = sorted(n for n, f in FIELDS.items() if f.type in ("float", "float | None"))


def test_catalog_values_give_the_catalog_spec_back():
    for spec in all_gpus().values():
        same = {f: getattr(spec, f) for f in FIELDS if f not in GPU_IDENTITY}
        assert with_overrides(spec, same) is spec
        assert with_overrides(spec, {}) is spec
    assert with_overrides(L4, {"mem_bw_gbs": int(L4.mem_bw_gbs)}) is L4  # 300 == 300.0


@pytest.mark.parametrize("overrides, key, checks", [
    ({"mem_bw_gbs": 600}, "l4+mem_bw_gbs=600", {"mem_bw_gbs": 600.0}),
    ({"num_sm": 80, "fp32_gflops": 1.5e4}, "l4+fp32_gflops=15000+num_sm=80", {"num_sm": 80, "fp32_gflops": 15000.0}),
    ({"nvlink_gbs": 300.0}, "l4+nvlink_gbs=300", {"nvlink_gbs": 300.0, "link_gbs": 150.0}),
    ({"architecture": "hopper"}, "l4+architecture=hopper", {"architecture": "hopper"}),
])
def test_overrides_make_a_named_hypothetical_gpu(overrides, key, checks):
    got = with_overrides(L4, overrides)
    assert got.key == key and is_what_if(got.key) and not is_what_if(L4.key)
    assert "what-if" in got.device_name and got.device_name != L4.device_name  # joins with no measured data
    for name, value in checks.items():
        assert getattr(got, name) == value and type(getattr(got, name)) is type(value)
    untouched = [f for f in FIELDS if f not in overrides and f not in GPU_IDENTITY]
    assert all(getattr(got, f) == getattr(L4, f) for f in untouched)
    with pytest.raises(UnknownSpecError, match="unknown GPU"):  # no catalog lookup finds it by any of its names
        get_gpu(got.device_name)


@pytest.mark.parametrize("overrides, fragment", [
    ({"mem_bw_gbs": -5}, "field 'mem_bw_gbs' has invalid value -5 (expected a positive finite number)"),
    ({"fp32_gflops": "fast"}, "field 'fp32_gflops' has invalid value 'fast'"),
    ({"num_sm": 57.5}, "field 'num_sm' has invalid value 57.5 (expected a positive integer)"),
    ({"mem_gb": None}, "field 'mem_gb' has invalid value None"),
    ({"mem_bw_gbs": True}, "field 'mem_bw_gbs' has invalid value True"),
    ({"vendor": "acme"}, "field 'vendor' has invalid value 'acme'"),
    ({"mem_bw_gbs": math.inf}, "field 'mem_bw_gbs' has invalid value inf"),
    ({"bandwidth": 1}, "unknown field 'bandwidth' (value 1)"),
    ({"key": "l5"}, "field 'key' names the GPU"),
    ({"device_name": "NVIDIA L5"}, "field 'device_name' names the GPU"),
])
def test_bad_overrides_are_refused_naming_field_and_value(overrides, fragment):
    with pytest.raises(SpecError) as exc:
        with_overrides(L4, overrides)
    assert fragment in str(exc.value) and str(exc.value).startswith("gpu=l4: ")


def test_an_unknown_field_lists_the_known_ones():
    with pytest.raises(SpecError) as exc:
        with_overrides(L4, {"bandwidth": 1})
    known = str(exc.value).split("known fields: ")[1].split(", ")
    assert set(known) == set(FIELDS) - set(GPU_IDENTITY)


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(NUMBER_FIELDS),
       value=st.floats(min_value=1e-3, max_value=1e7, allow_nan=False, allow_infinity=False))
def test_any_positive_number_is_applied_and_named(field, value):
    got = with_overrides(L4, {field: value})
    if same_value(getattr(L4, field), value):
        assert got is L4
        return
    assert getattr(got, field) == value and f"+{field}={format(value, 'g')}" in got.key
    assert changed_fields(L4, {field: value}) == {field: value}
    assert changed_fields(got, {field: value}) == {}


@settings(max_examples=40, deadline=None)
@given(field=st.sampled_from(NUMBER_FIELDS),
       value=st.one_of(st.floats(max_value=0.0), st.just(math.nan), st.just(-math.inf), st.text(max_size=4)))
def test_no_non_positive_or_non_number_gets_through(field, value):
    with pytest.raises(SpecError, match=f"field '{field}' has invalid value"):
        with_overrides(L4, {field: value})


def test_a_what_if_gpu_changes_the_forecast_where_the_field_matters():
    base = forecast("gpt2_large", L4, 4, 1024, "inference")
    fast_mem = forecast("gpt2_large", with_overrides(L4, {"mem_bw_gbs": 2 * L4.mem_bw_gbs}), 4, 1024, "inference")
    assert fast_mem.gpu == "l4+mem_bw_gbs=600" and base.gpu == "l4"
    assert fast_mem.e2e_ms < base.e2e_ms
    assert fast_mem.by_group_ms["mem"] == pytest.approx(base.by_group_ms["mem"] / 2, rel=1e-9)


def test_a_learned_predictor_reads_the_what_if_spec_not_the_catalog(small_linear_predictor):
    """The learned predictors read the GpuSpec they are given: a what-if L4 with 4x the SMs and fp32 peak
    forecasts its own, faster time (and nothing looks the GPU up again by its marked device name)."""
    from tilecast.forecast.kernels import forecast_kernels

    rows = get_rows()
    bigger = with_overrides(L4, {"num_sm": 4 * L4.num_sm, "fp32_gflops": 4 * L4.fp32_gflops})
    base = forecast_kernels(rows, small_linear_predictor, L4).table["pred_ms"].to_numpy()
    what_if = forecast_kernels(rows, small_linear_predictor, bigger).table["pred_ms"].to_numpy()
    assert (what_if < base).all()


def get_rows():
    import pandas as pd

    return pd.DataFrame({"OPName": ["linear"] * 3, "B": [1] * 3, "M": [4096, 8192, 16384], "N": [4096] * 3,
                         "K": [4096] * 3, "H": [0] * 3})


@pytest.fixture(scope="module")
def small_linear_predictor():
    from tilecast.predictors import fit_predictor, training_rows

    rows = training_rows("linear")
    rows = rows.sample(n=min(len(rows), 3000), random_state=0)
    pred = fit_predictor("xgboost", "linear", rows, rounds=15)
    return lambda family, part, gpu: pred.predict_ms(part, gpu)


GPT2 = get_model("gpt2_large")


@pytest.mark.parametrize("config, key, checks", [
    ({"n_layer": 12}, "gpt2_large+n_layer=12", {"num_layers": 12}),
    ({"n_inner": 4000}, "gpt2_large+n_inner=4000", {"intermediate_size": 4000}),  # read with a default: may be added
    ({"n_embd": 1600, "n_head": 25}, "gpt2_large+n_embd=1600+n_head=25", {"hidden_size": 1600, "head_dim": 64}),
])
def test_model_config_what_ifs(config, key, checks):
    got = model_with_config(GPT2, config)
    assert got.key == key and all(getattr(got, k) == v for k, v in checks.items())
    assert all(got.config[k] == v for k, v in config.items()) and GPT2.config["n_layer"] == 36
    assert model_with_config(GPT2, {"n_layer": 36}) is GPT2


@pytest.mark.parametrize("config, fragment", [
    ({"n_layer": -1}, "field 'config.n_layer' has invalid value -1 (expected a positive integer)"),
    ({"n_head": 7}, "field 'config.n_head' has value 7, which does not divide"),
    ({"n_layers": 12}, "config key 'n_layers' (value 12) is not in the model's config and changes nothing"),
])
def test_bad_model_config_what_ifs_are_refused(config, fragment):
    with pytest.raises(SpecError) as exc:
        model_with_config(GPT2, config)
    assert fragment in str(exc.value) and str(exc.value).startswith("model=gpt2_large: ")


@pytest.mark.parametrize("overrides", [{"mem_bw_gbs": 600}, {"num_sm": 80, "fp32_gflops": 15000.5},
                                       {"architecture": "hopper", "nvlink_gbs": 300}])
def test_a_what_if_key_names_its_gpu(overrides):
    spec = with_overrides(L4, overrides)
    assert what_if_gpu(spec.key) == spec and what_if_gpu("l4") is L4 and what_if_gpu("NVIDIA_L4") is L4
    with pytest.raises(SpecError, match="is not <field>=<value>"):
        what_if_gpu("l4+600")
    with pytest.raises(SpecError, match="field 'mem_bw_gbs' has invalid value -5"):
        what_if_gpu("l4+mem_bw_gbs=-5")
