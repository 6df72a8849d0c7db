"""GPU catalog: shipped files validate, data GPUs carry NeuSight's values, lookups, errors for people."""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.paths import CONF_DIR
from tilecast.specs import GpuSpec, SpecError, UnknownSpecError, all_gpus, get_gpu, load_gpu_file

# NeuSight devices/*.json, copied here (tests must not read ../shared):
# key: (Device, Dev_Mem, Mem_Bw, Num_Sm, Core_Per_SM, Freq, SingleFLOPs, L2Cache)
NEUSIGHT_DEVICES = {
    "tesla_p4": ("Tesla P4", 8, 192, 40, 64, 1113, 5699, 2),
    "tesla_t4": ("Tesla T4", 15, 320, 40, 64, 1590, 8141, 4),
    "tesla_p100_pcie_16gb": ("Tesla P100-PCIE-16GB", 16, 732, 56, 64, 1380, 9519, 4),
    "tesla_v100_pcie_32gb": ("Tesla V100-PCIE-32GB", 32, 900, 80, 64, 1370, 14029, 6),
    "a100_pcie_40gb": ("NVIDIA A100-PCIE-40GB", 40, 1555, 108, 64, 1410, 19492, 40),
    "a100_sxm4_40gb": ("NVIDIA A100-SXM4-40GB", 40, 1555, 108, 64, 1410, 19492, 40),
    "a100_pcie_80gb": ("NVIDIA A100 80GB PCIe", 80, 1935, 108, 64, 1410, 19492, 40),
    "h100_sxm_80gb": ("NVIDIA H100 80GB HBM3", 80, 3430, 132, 128, 1980, 66908, 50),
    "l4": ("NVIDIA L4", 24, 300, 60, 128, 2040, 31334, 48),
}

# Datasheet GPUs: key: (device_name, vendor, num_sm, mem_gb, mem_bw_gbs, dense bf16 TFLOPS or None)
DATASHEET = {
    "h200_sxm": ("NVIDIA H200", "nvidia", 132, 141.0, 4800.0, 989.4),
    "h100_pcie": ("NVIDIA H100 PCIe", "nvidia", 114, 80.0, 2000.0, 756.5),
    "a100_sxm4_80gb": ("NVIDIA A100-SXM4-80GB", "nvidia", 108, 80.0, 2039.0, 312.0),
    "b200": ("NVIDIA B200", "nvidia", 148, 180.0, 8000.0, 2250.0),
    "l40s": ("NVIDIA L40S", "nvidia", 142, 48.0, 864.0, 362.05),
    "l40": ("NVIDIA L40", "nvidia", 142, 48.0, 864.0, 181.05),
    "a10": ("NVIDIA A10", "nvidia", 72, 24.0, 600.0, 125.0),
    "a10g": ("NVIDIA A10G", "nvidia", 80, 24.0, 600.0, None),
    "rtx_4090": ("NVIDIA GeForce RTX 4090", "nvidia", 128, 24.0, 1008.0, 165.2),
    "rtx_6000_ada": ("NVIDIA RTX 6000 Ada Generation", "nvidia", 142, 48.0, 960.0, 364.2),
    "mi210": ("AMD Instinct MI210", "amd", 104, 64.0, 1638.4, 181.0),
    "mi250x": ("AMD Instinct MI250X", "amd", 110, 64.0, 1638.4, 191.5),  # one GCD: torch's device
    "mi300x": ("AMD Instinct MI300X", "amd", 304, 192.0, 5300.0, 1307.4),
}

PCIE_ONLY = ("tesla_p4", "tesla_t4", "tesla_p100_pcie_16gb", "tesla_v100_pcie_32gb", "l4", "l40s", "l40", "a10",
             "a10g", "rtx_4090", "rtx_6000_ada")

SHIPPED = sorted((CONF_DIR / "gpu").glob("*.yaml"))


def test_catalog_holds_exactly_the_data_and_datasheet_gpus():
    assert set(all_gpus()) == set(NEUSIGHT_DEVICES) | set(DATASHEET)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_file_validates(path):
    spec = load_gpu_file(path)
    assert spec.key == path.stem
    assert isinstance(spec.fp32_gflops, float) and spec.fp32_gflops > 0
    assert spec.source.strip()


@pytest.mark.parametrize("key", sorted(NEUSIGHT_DEVICES))
def test_data_gpus_carry_exactly_the_neusight_values(key):
    name, mem, bw, sms, cores, freq, flops, l2 = NEUSIGHT_DEVICES[key]
    g = get_gpu(key)
    assert (g.device_name, g.mem_gb, g.mem_bw_gbs, g.num_sm, g.cores_per_sm, g.boost_clock_mhz,
            g.fp32_gflops, g.l2_mb) == (name, mem, bw, sms, cores, freq, flops, l2)
    assert g.label_dir == name.replace(" ", "_")


@pytest.mark.parametrize("key", sorted(DATASHEET))
def test_datasheet_gpus_key_numbers(key):
    name, vendor, sms, mem, bw, bf16 = DATASHEET[key]
    g = get_gpu(key)
    assert (g.device_name, g.vendor, g.num_sm, g.mem_gb, g.mem_bw_gbs, g.bf16_tflops) == (
        name, vendor, sms, mem, bw, bf16)
    assert "https://" in g.source


@pytest.mark.parametrize("key", sorted(set(NEUSIGHT_DEVICES) | set(DATASHEET)))
def test_spec_sheets_are_self_consistent(key):
    """fp32 = 2 x SMs x cores/SM x clock within 1%; dense tensor peaks in their order; links."""
    g = get_gpu(key)
    clock_mhz = 1328 if key == "tesla_p100_pcie_16gb" else g.boost_clock_mhz  # NeuSight's P100 fp32 uses 1328
    assert g.fp32_gflops == pytest.approx(2 * g.num_sm * g.cores_per_sm * clock_mhz / 1000, rel=0.01)
    if g.bf16_tflops and g.fp16_tflops:
        assert g.bf16_tflops == g.fp16_tflops
    if g.fp16_tflops:
        assert g.fp16_tflops * 1000 > g.fp32_gflops
    if g.tf32_tflops:
        assert g.tf32_tflops * 1000 >= 0.99 * g.fp32_gflops and g.tf32_tflops < g.fp16_tflops
    if g.fp8_tflops:
        assert g.fp8_tflops == pytest.approx(2 * g.fp16_tflops, rel=0.02)
    if key in PCIE_ONLY:
        assert g.nvlink_gbs is None and g.link_gbs == g.pcie_gbs
    else:
        assert g.nvlink_gbs > g.pcie_gbs and g.link_gbs == g.nvlink_gbs / 2


@pytest.mark.parametrize("key", ["h100_sxm_80gb", "a100_pcie_80gb", "h200_sxm", "mi300x", "rtx_6000_ada"])
def test_lookup_by_key_device_name_and_label_dir(key):
    g = get_gpu(key)
    assert get_gpu(g.device_name) is g
    assert get_gpu(g.label_dir) is g


def test_label_dir_examples():
    assert get_gpu("NVIDIA_H100_80GB_HBM3").key == "h100_sxm_80gb"
    assert get_gpu("NVIDIA_A100_80GB_PCIe").key == "a100_pcie_80gb"
    assert get_gpu("Tesla_P100-PCIE-16GB").key == "tesla_p100_pcie_16gb"


@pytest.mark.parametrize(("wanted", "close"), [
    ("NVIDIA H100", "h100_sxm_80gb"), ("mi300", "mi300x"), ("NVIDIA_L40S_48GB", "l40s"),
    ("rtx4090", "rtx_4090"), ("H200", "h200_sxm"), ("Tesla V100-SXM2-16GB", "tesla_v100_pcie_32gb"),
])
def test_unknown_gpu_lists_the_closest_known(wanted, close):
    with pytest.raises(UnknownSpecError) as info:
        get_gpu(wanted)
    msg = str(info.value)
    assert repr(wanted) in msg
    closest = msg.split("closest known: ")[1].split(";")[0]
    assert close in closest
    assert "all known: " in msg and "tesla_p4" in msg
    assert isinstance(info.value, KeyError)


def test_peak_gflops_per_dtype():
    h100 = get_gpu("h100_sxm_80gb")
    assert h100.peak_gflops() == h100.fp32_gflops
    assert h100.peak_gflops("bf16") == pytest.approx(989_400.0)
    assert h100.peak_gflops("fp8") == pytest.approx(1_978_900.0)
    assert get_gpu("tesla_p4").peak_gflops("bf16") == get_gpu("tesla_p4").fp32_gflops  # unpublished: fp32
    with pytest.raises(ValueError, match="'int4'"):
        h100.peak_gflops("int4")


def test_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_gpu("l4").mem_gb = 1.0  # type: ignore[misc]


# ---- broken files ------------------------------------------------------------------------------

def _base() -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(get_gpu("a100_pcie_40gb")).items() if v is not None}


def _write(conf: Path, data: dict[str, Any] | str, stem: str = "a100_pcie_40gb") -> Path:
    (conf / "gpu").mkdir(parents=True, exist_ok=True)
    path = conf / "gpu" / f"{stem}.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def _error(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_gpu_file(path)
    msg = str(info.value)
    assert str(path) in msg
    return msg


def test_valid_base_loads(tmp_path):
    assert load_gpu_file(_write(tmp_path, _base())) == get_gpu("a100_pcie_40gb")


@pytest.mark.parametrize("field", ["device_name", "mem_bw_gbs", "num_sm", "source"])
def test_missing_field(tmp_path, field):
    data = _base()
    del data[field]
    msg = _error(_write(tmp_path, data))
    assert f"missing field {field!r}" in msg


@pytest.mark.parametrize(("field", "value"), [
    ("mem_bw_gbs", 0), ("mem_bw_gbs", -1555.0), ("mem_bw_gbs", None), ("pcie_gbs", 0.0),
    ("nvlink_gbs", -600), ("fp32_gflops", math.inf), ("fp32_gflops", math.nan),
])
def test_non_positive_or_non_finite_number(tmp_path, field, value):
    data = _base()
    data[field] = value
    msg = _error(_write(tmp_path, data))
    assert repr(field) in msg and repr(value) in msg


@pytest.mark.parametrize(("field", "value"), [
    ("num_sm", "108"), ("num_sm", 108.5), ("num_sm", True), ("mem_gb", "40 GB"), ("fp32_gflops", "1e5"),
    ("vendor", "intel"), ("vendor", 3), ("device_name", ""), ("device_name", ["NVIDIA A100"]),
    ("cores_per_sm", 0),
])
def test_wrong_type(tmp_path, field, value):
    data = _base()
    data[field] = value
    msg = _error(_write(tmp_path, data))
    assert repr(field) in msg and repr(value) in msg and "expected" in msg


def test_unknown_field_names_it_and_its_value(tmp_path):
    data = _base() | {"memory_bandwidth": 1555}
    msg = _error(_write(tmp_path, data))
    assert "'memory_bandwidth'" in msg and "1555" in msg and "mem_bw_gbs" in msg  # known fields listed


def test_key_must_match_file_name(tmp_path):
    msg = _error(_write(tmp_path, _base(), stem="a100"))
    assert "'key'" in msg and "'a100_pcie_40gb'" in msg and "'a100'" in msg


@pytest.mark.parametrize("text", ["key: [unclosed\n", "key: a\n  bad: indent\n", "- a\n- b\n", ""])
def test_bad_yaml(tmp_path, text):
    msg = _error(_write(tmp_path, text))
    assert "YAML" in msg or "expected a mapping" in msg


def test_missing_file_is_a_spec_error(tmp_path):
    _error(tmp_path / "gpu" / "nope.yaml")


def test_all_gpus_reports_a_broken_file_in_its_conf_dir(tmp_path):
    good = _base() | {"key": "good"}
    _write(tmp_path, good | {"device_name": "Good GPU"}, stem="good")
    bad = _write(tmp_path, _base() | {"l2_mb": -40})
    with pytest.raises(SpecError, match="l2_mb") as info:
        all_gpus(conf_dir=tmp_path)
    assert str(bad) in str(info.value)


def test_two_files_with_one_device_name_are_refused(tmp_path):
    first = _write(tmp_path, _base())
    second = _write(tmp_path, _base() | {"key": "zz_copy"}, stem="zz_copy")
    with pytest.raises(SpecError) as info:
        all_gpus(conf_dir=tmp_path)
    msg = str(info.value)
    assert str(first) in msg and str(second) in msg and "'NVIDIA A100-PCIE-40GB'" in msg


def test_catalog_from_another_conf_dir(tmp_path):
    _write(tmp_path, _base() | {"key": "mine", "device_name": "My GPU"}, stem="mine")
    assert set(all_gpus(conf_dir=tmp_path)) == {"mine"}
    assert get_gpu("My_GPU", conf_dir=tmp_path).key == "mine"
    with pytest.raises(UnknownSpecError, match="mine"):
        get_gpu("l4", conf_dir=tmp_path)


# ---- round trip ----------------------------------------------------------------------------------

_pos = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False)
_pos_int = st.integers(min_value=1, max_value=100_000)
_optional = {"cores_per_sm": _pos_int, "tf32_tflops": _pos, "bf16_tflops": _pos, "fp16_tflops": _pos,
             "fp8_tflops": _pos, "nvlink_gbs": _pos, "tdp_w": _pos}


@settings(max_examples=60, deadline=None)
@given(num_sm=_pos_int, numbers=st.fixed_dictionaries(
           {f: st.one_of(_pos, _pos_int) for f in
            ("fp32_gflops", "mem_gb", "mem_bw_gbs", "l2_mb", "boost_clock_mhz", "pcie_gbs")}),
       optional=st.fixed_dictionaries({}, optional={f: st.one_of(s, st.none()) for f, s in _optional.items()}),
       name=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1).filter(str.strip))
def test_any_positive_numbers_round_trip_through_yaml(num_sm, numbers, optional, name):
    data = {"key": "rt", "device_name": name, "vendor": "amd", "architecture": "x", "num_sm": num_sm,
            "source": "hypothesis"} | numbers | optional
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), data, stem="rt")
        spec = load_gpu_file(path)
        assert spec == GpuSpec(**data)
        again = _write(Path(tmp), dataclasses.asdict(spec), stem="rt")
        assert load_gpu_file(again) == spec
    for f in ("fp32_gflops", "mem_bw_gbs", "tf32_tflops"):
        value = getattr(spec, f)
        assert value is None or isinstance(value, float)
