"""GPU catalog: shipped files validate, data GPUs carry NeuSight's values, lookups, errors for people."""

from __future__ import annotations

import dataclasses
import math
import pickle
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.paths import CONF_DIR
from tilecast.specs import (
    GpuSpec,
    SpecError,
    UnknownSpecError,
    UnsupportedDtypeError,
    all_gpus,
    get_gpu,
    load_gpu_file,
)
from tilecast.specs.gpu import DTYPES

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

# NeuSight AMD device configs (neusight_amd/train/device_configs, neusight/devices for the MI250), copied:
# key: (Device, Dev_Mem, Mem_Bw, Num_Sm, Freq, SingleFLOPsMM, SingleFLOPsVEC, L2Cache)
NEUSIGHT_AMD = {
    "mi100": ("AMD Instinct MI100", 32, 1230, 120, 1502, 46100, 23100, 8),
    "mi210": ("AMD Instinct MI210", 64, 1640, 104, 1700, 45300, 22600, 16),
    "mi250": ("AMD Instinct MI250", 64, 1640, 104, 1700, 45300, 22600, 16),
}

# Datasheet GPUs: key: (device_name, vendor, num_sm, mem_gb, mem_bw_gbs, dense bf16 TFLOPS or None)
DATASHEET = {
    "h200_sxm": ("NVIDIA H200", "nvidia", 132, 141.0, 4800.0, 989.4),
    "h100_pcie": ("NVIDIA H100 PCIe", "nvidia", 114, 80.0, 2000.0, 756.5),
    "a100_sxm4_80gb": ("NVIDIA A100-SXM4-80GB", "nvidia", 108, 80.0, 2039.0, 312.0),
    "a30": ("NVIDIA A30", "nvidia", 56, 24.0, 933.0, 165.0),
    "a40": ("NVIDIA A40", "nvidia", 84, 48.0, 696.0, 149.7),
    "b200": ("NVIDIA B200", "nvidia", 148, 180.0, 8000.0, 2250.0),
    "b300": ("NVIDIA B300 SXM6 AC", "nvidia", 160, 288.0, 7750.0, 2250.0),
    "gb200": ("NVIDIA GB200", "nvidia", 148, 186.0, 8000.0, 2500.0),
    "gb300": ("NVIDIA GB300", "nvidia", 160, 288.0, 8000.0, 2500.0),
    "rtx_pro_6000_server": ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "nvidia", 188, 96.0, 1792.0, 467.8),
    "l40s": ("NVIDIA L40S", "nvidia", 142, 48.0, 864.0, 362.05),
    "l40": ("NVIDIA L40", "nvidia", 142, 48.0, 864.0, 181.05),
    "a10": ("NVIDIA A10", "nvidia", 72, 24.0, 600.0, 125.0),
    "a10g": ("NVIDIA A10G", "nvidia", 80, 24.0, 600.0, 140.1),
    "rtx_4090": ("NVIDIA GeForce RTX 4090", "nvidia", 128, 24.0, 1008.0, 165.2),
    "rtx_6000_ada": ("NVIDIA RTX 6000 Ada Generation", "nvidia", 142, 48.0, 960.0, 364.2),
    "mi250x": ("AMD Instinct MI250X", "amd", 110, 64.0, 1638.4, 191.5),  # one GCD: torch's device
    "mi300x": ("AMD Instinct MI300X", "amd", 304, 192.0, 5300.0, 1307.4),
    "b60": ("Intel(R) Arc(TM) Pro B60 Graphics", "intel", 20, 24.0, 456.0, 98.3),
}

# Every device string the data spells (NeuSight kernels and labels, NeuSight AMD, AIConfigurator parquet
# `device`, Vidur's GPUs as the data loaders name them) -> catalog key
DATA_DEVICES = {
    "Tesla P4": "tesla_p4", "Tesla T4": "tesla_t4", "Tesla P100-PCIE-16GB": "tesla_p100_pcie_16gb",
    "Tesla V100-PCIE-32GB": "tesla_v100_pcie_32gb", "NVIDIA A100-PCIE-40GB": "a100_pcie_40gb",
    "NVIDIA A100-SXM4-40GB": "a100_sxm4_40gb", "NVIDIA A100 80GB PCIe": "a100_pcie_80gb",
    "NVIDIA H100 80GB HBM3": "h100_sxm_80gb", "NVIDIA L4": "l4",
    "AMD Instinct MI100": "mi100", "AMD Instinct MI210": "mi210", "AMD Instinct MI250": "mi250",
    "NVIDIA A100-SXM4-80GB": "a100_sxm4_80gb", "NVIDIA L40S": "l40s", "NVIDIA B200": "b200",
    "NVIDIA B300 SXM6 AC": "b300", "NVIDIA GB200": "gb200",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx_pro_6000_server", "NVIDIA A40": "a40",
}

# Label directories of the data (neusight/labels, NeuSight AMD's held-back labels, the paper tables)
LABEL_DIRS = {
    "NVIDIA_A100-PCIE-40GB": "a100_pcie_40gb", "NVIDIA_A100-SXM4-40GB": "a100_sxm4_40gb",
    "NVIDIA_A100_80GB_PCIe": "a100_pcie_80gb", "NVIDIA_L4": "l4", "Tesla_P100-PCIE-16GB": "tesla_p100_pcie_16gb",
    "Tesla_P4": "tesla_p4", "Tesla_T4": "tesla_t4", "Tesla_V100-PCIE-32GB": "tesla_v100_pcie_32gb",
    "NVIDIA_H100_80GB_HBM3": "h100_sxm_80gb", "AMD_Instinct_MI100": "mi100", "AMD_Instinct_MI210": "mi210",
    "AMD_Instinct_MI250": "mi250",
}

# external/aiconfigurator/systems/<name>.yaml -> catalog key (held-back GPUs included)
SYSTEMS = {
    "a100_sxm": "a100_sxm4_80gb", "a100_pcie": "a100_pcie_80gb", "a30": "a30", "b200_sxm": "b200",
    "b300_sxm": "b300", "b60": "b60", "gb200": "gb200", "gb300": "gb300", "h100_pcie": "h100_pcie",
    "h100_sxm": "h100_sxm_80gb", "h200_sxm": "h200_sxm", "l4": "l4", "l40s": "l40s",
    "rtx_pro_6000_server": "rtx_pro_6000_server",
}

# Dense peaks the datasheets publish, per dtype (None: no peak): key -> (tf32, bf16, fp16, fp8, int8, fp4)
PEAKS = {
    "tesla_p4": (None, None, None, None, 22.0, None),
    "tesla_p100_pcie_16gb": (None, None, 18.7, None, None, None),
    "tesla_v100_pcie_32gb": (None, None, 112.0, None, None, None),
    "tesla_t4": (None, None, 65.0, None, 130.0, None),
    "a100_pcie_40gb": (156.0, 312.0, 312.0, None, 624.0, None),
    "a100_sxm4_80gb": (156.0, 312.0, 312.0, None, 624.0, None),
    "a30": (82.0, 165.0, 165.0, None, 330.0, None),
    "a40": (74.8, 149.7, 149.7, None, 299.3, None),
    "a10g": (70.05, 140.1, 140.1, None, 280.2, None),  # derived from the A10's per-SM rates (same GA102 die)
    "h100_sxm_80gb": (494.7, 989.4, 989.4, 1978.9, 1978.9, None),
    "h100_pcie": (378.0, 756.5, 756.5, 1513.0, 1513.0, None),
    "l4": (60.0, 121.0, 121.0, 242.5, 242.5, None),
    "l40s": (183.0, 362.05, 362.05, 733.0, 733.0, None),
    "b200": (1125.0, 2250.0, 2250.0, 4500.0, 4500.0, 9000.0),
    "b300": (1125.0, 2250.0, 2250.0, 4500.0, 153.5, 13500.0),
    "gb200": (1250.0, 2500.0, 2500.0, 5000.0, 5000.0, 10000.0),
    "gb300": (1250.0, 2500.0, 2500.0, 5000.0, 165.0, 15000.0),
    "rtx_pro_6000_server": (233.9, 467.8, 467.8, 935.6, 935.6, 1871.2),
    "mi100": (None, 92.3, 184.6, None, 184.6, None),
    "mi210": (None, 181.0, 181.0, None, 181.0, None),
    "mi300x": (653.7, 1307.4, 1307.4, 2614.9, 2614.9, None),
    "b60": (None, 98.3, 98.3, None, 197.0, None),
}

PCIE_ONLY = ("tesla_p4", "tesla_t4", "tesla_p100_pcie_16gb", "tesla_v100_pcie_32gb", "l4", "l40s", "l40", "a10",
             "a10g", "rtx_4090", "rtx_6000_ada", "rtx_pro_6000_server", "b60")

SHIPPED = sorted((CONF_DIR / "gpu").glob("*.yaml"))


def test_catalog_holds_exactly_the_data_and_datasheet_gpus():
    assert set(all_gpus()) == set(NEUSIGHT_DEVICES) | set(NEUSIGHT_AMD) | set(DATASHEET)


@pytest.mark.parametrize("device", sorted(DATA_DEVICES))
def test_every_device_string_of_the_data_resolves(device):
    g = get_gpu(device)
    assert (g.key, g.device_name) == (DATA_DEVICES[device], device)


@pytest.mark.parametrize("label_dir", sorted(LABEL_DIRS))
def test_every_label_directory_of_the_data_resolves(label_dir):
    assert get_gpu(label_dir).key == LABEL_DIRS[label_dir]
    assert get_gpu(label_dir).label_dir == label_dir


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_every_systems_name_resolves(system):
    g = get_gpu(system)
    assert g.key == SYSTEMS[system]
    assert system == g.key or system in g.aliases


#: llm-foundry's benchmark tables' GPU names (data/llm_foundry; h100_80gb names its held-back H100 tables)
LLM_FOUNDRY_GPUS = {"a100_80gb": "a100_sxm4_80gb", "a100_40gb": "a100_sxm4_40gb", "h100_80gb": "h100_sxm_80gb"}


def test_aliases_name_only_systems_and_are_unique():
    claimed = [a for g in all_gpus().values() for a in g.aliases]
    assert len(claimed) == len(set(claimed))
    assert set(claimed) <= set(SYSTEMS) | set(LLM_FOUNDRY_GPUS)
    for name, key in LLM_FOUNDRY_GPUS.items():
        assert get_gpu(name).key == key


def test_names_lists_every_lookup_name():
    g = get_gpu("h100_sxm_80gb")
    assert g.names == ("h100_sxm_80gb", "NVIDIA H100 80GB HBM3", "NVIDIA_H100_80GB_HBM3", "h100_sxm", "h100_80gb")
    for name in g.names:
        assert get_gpu(name) is g
    assert get_gpu("l4").names == ("l4", "NVIDIA L4", "NVIDIA_L4")  # its alias is its key: listed once


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


@pytest.mark.parametrize("key", sorted(NEUSIGHT_AMD))
def test_amd_data_gpus_carry_exactly_the_neusight_values(key):
    name, mem, bw, cus, freq, flops_mm, flops_vec, l2 = NEUSIGHT_AMD[key]
    g = get_gpu(key)
    assert (g.device_name, g.vendor, g.mem_gb, g.mem_bw_gbs, g.num_sm, g.boost_clock_mhz, g.fp32_matrix_gflops,
            g.fp32_gflops, g.l2_mb) == (name, "amd", mem, bw, cus, freq, flops_mm, flops_vec, l2)
    assert g.peak_gflops("fp32") == flops_vec  # the vector rate; the matrix rate is its own field


@pytest.mark.parametrize("key", sorted(PEAKS))
def test_dense_peaks_per_dtype(key):
    g = get_gpu(key)
    want = dict(zip(("tf32", "bf16", "fp16", "fp8", "int8", "fp4"), PEAKS[key], strict=True))
    got = {"tf32": g.tf32_tflops, "bf16": g.bf16_tflops, "fp16": g.fp16_tflops, "fp8": g.fp8_tflops,
           "int8": g.int8_tops, "fp4": g.fp4_tflops}
    assert got == want
    assert g.dtypes == ("fp32", *(d for d in DTYPES if d in want and want[d] is not None))


@pytest.mark.parametrize("key", sorted(set(NEUSIGHT_DEVICES) | set(NEUSIGHT_AMD) | set(DATASHEET)))
def test_spec_sheets_are_self_consistent(key):
    """fp32 = 2 x SMs x cores/SM x clock within 1%; dense tensor peaks in their order; links."""
    g = get_gpu(key)
    clock_mhz = 1328 if key == "tesla_p100_pcie_16gb" else g.boost_clock_mhz  # NeuSight's P100 fp32 uses 1328
    assert g.fp32_gflops == pytest.approx(2 * g.num_sm * g.cores_per_sm * clock_mhz / 1000, rel=0.01)
    if g.bf16_tflops and g.fp16_tflops:  # CDNA1 (MI100) runs bf16 at half its fp16 rate
        assert g.bf16_tflops == (g.fp16_tflops / 2 if g.architecture == "cdna1" else g.fp16_tflops)
    if g.fp4_tflops:
        assert g.fp4_tflops > g.fp8_tflops
    if g.int8_tops and g.fp16_tflops and g.architecture != "blackwell":  # Blackwell Ultra cuts int8
        assert g.int8_tops >= g.fp16_tflops
    if g.vendor == "amd":  # matrix-core fp32 runs at twice the vector rate on CDNA
        assert g.fp32_matrix_gflops == pytest.approx(2 * g.fp32_gflops, rel=0.01)
    else:
        assert g.fp32_matrix_gflops is None
    if g.network_gbs:
        assert g.network_gbs <= g.link_gbs or g.nvlink_gbs is None
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
    assert h100.peak_gflops("int8") == pytest.approx(1_978_900.0)
    assert get_gpu("b200").peak_gflops("fp4") == pytest.approx(9_000_000.0)
    assert get_gpu("tesla_t4").peak_gflops("fp16") == pytest.approx(65_000.0)


@pytest.mark.parametrize("dtype", ["int4", "bfloat16", "FP16", "", "fp64", None, 16, ["fp16"]])
def test_unknown_dtype_lists_the_known_ones(dtype):
    g = get_gpu("h100_sxm_80gb")
    for call in (g.peak_gflops, g.supports):
        with pytest.raises(ValueError) as info:
            call(dtype)
        assert not isinstance(info.value, UnsupportedDtypeError)
        msg = str(info.value)
        assert repr(dtype) in msg and "known: " + ", ".join(DTYPES) in msg


@pytest.mark.parametrize(("key", "dtype"), [
    ("a100_sxm4_80gb", "fp8"), ("a100_pcie_40gb", "fp4"), ("tesla_v100_pcie_32gb", "bf16"),
    ("tesla_v100_pcie_32gb", "tf32"), ("tesla_p100_pcie_16gb", "bf16"), ("tesla_t4", "bf16"),
    ("tesla_p4", "fp16"), ("a10g", "fp8"), ("mi210", "tf32"), ("mi250x", "fp8"), ("b60", "fp8"),
    ("h100_sxm_80gb", "fp4"),
])
def test_a_dtype_without_a_published_peak_is_refused_by_name(key, dtype):
    g = get_gpu(key)
    assert not g.supports(dtype) and dtype not in g.dtypes
    with pytest.raises(UnsupportedDtypeError) as info:
        g.peak_gflops(dtype)
    err = info.value
    msg = str(err)
    assert repr(key) in msg and f" {dtype} " in msg and "its dtypes: " + ", ".join(g.dtypes) in msg
    assert (err.key, err.dtype, err.supported) == (key, dtype, g.dtypes)
    assert isinstance(err, SpecError) and isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.supported) == (UnsupportedDtypeError, msg, g.dtypes)


def test_gemm_peak_is_the_fp32_matrix_rate_where_published_else_the_dtype_peak():
    mi100, mi300x, l4 = get_gpu("mi100"), get_gpu("mi300x"), get_gpu("l4")
    assert mi100.gemm_peak_gflops("fp32") == mi100.fp32_matrix_gflops == 46100.0  # NeuSight SingleFLOPsMM
    assert mi100.peak_gflops("fp32") == 23100.0  # vector ops keep the vector rate
    assert mi300x.gemm_peak_gflops() == 163400.0 and mi300x.gemm_peak_gflops("bf16") == mi300x.peak_gflops("bf16")
    assert l4.gemm_peak_gflops() == l4.fp32_gflops  # NVIDIA: no fp32 matrix rate, unchanged
    for g in all_gpus().values():
        for d in g.dtypes:
            want = g.fp32_matrix_gflops if d == "fp32" and g.fp32_matrix_gflops else g.peak_gflops(d)
            assert g.gemm_peak_gflops(d) == want
    with pytest.raises(UnsupportedDtypeError):
        get_gpu("mi210").gemm_peak_gflops("tf32")
    with pytest.raises(ValueError, match="unknown dtype"):
        l4.gemm_peak_gflops("fp64")


def test_supports_and_dtypes_agree_with_peak_gflops():
    for g in all_gpus().values():
        assert g.dtypes[0] == "fp32" and set(g.dtypes) <= set(DTYPES)
        for d in DTYPES:
            assert g.supports(d) == (d in g.dtypes)
            if g.supports(d):
                assert g.peak_gflops(d) > 0


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
    ("vendor", "qualcomm"), ("vendor", 3), ("device_name", ""), ("device_name", ["NVIDIA A100"]),
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


@pytest.mark.parametrize("value", ["a100_pcie", ["ok", ""], ["ok", "  "], [3], ["dup", "dup"], {"a": 1}, True])
def test_bad_aliases_name_the_field_and_value(tmp_path, value):
    msg = _error(_write(tmp_path, _base() | {"aliases": value}))
    assert "'aliases'" in msg and repr(value) in msg and "list of distinct non-empty strings" in msg


def test_aliases_load_as_a_tuple_and_null_means_none(tmp_path):
    assert load_gpu_file(_write(tmp_path, _base() | {"aliases": ["a", "b"]})).aliases == ("a", "b")
    assert load_gpu_file(_write(tmp_path, _base() | {"aliases": None})).aliases == ()


def _two_gpus(conf: Path, second: dict[str, Any]) -> tuple[Path, Path]:
    first = _write(conf, _base() | {"aliases": ["shared_name"]})
    return first, _write(conf, _base() | {"key": "zz_other", "device_name": "Other GPU"} | second, stem="zz_other")


@pytest.mark.parametrize(("second", "name"), [
    ({"aliases": ["x", "shared_name"]}, "shared_name"),  # one alias, two GPUs
    ({"aliases": ["a100_pcie_40gb"]}, "a100_pcie_40gb"),  # an alias that is another GPU's key
    ({"aliases": ["NVIDIA A100-PCIE-40GB"]}, "NVIDIA A100-PCIE-40GB"),  # ... another GPU's device name
    ({"aliases": ["NVIDIA_A100-PCIE-40GB"]}, "NVIDIA_A100-PCIE-40GB"),  # ... another GPU's label directory
    ({"device_name": "shared_name"}, "shared_name"),  # a device name that is another GPU's alias
])
def test_two_gpus_claiming_one_name_are_refused(tmp_path, second, name):
    first, other = _two_gpus(tmp_path, second)
    with pytest.raises(SpecError) as info:
        all_gpus(conf_dir=tmp_path)
    msg = str(info.value)
    assert str(first) in msg and str(other) in msg and repr(name) in msg


def test_alias_lookup_and_suggestions(tmp_path):
    _two_gpus(tmp_path, {"aliases": ["other_system"]})
    assert get_gpu("shared_name", conf_dir=tmp_path).key == "a100_pcie_40gb"
    assert get_gpu("other_system", conf_dir=tmp_path).key == "zz_other"
    with pytest.raises(UnknownSpecError) as info:
        get_gpu("other_systm", conf_dir=tmp_path)
    assert str(info.value).split("closest known: ")[1].startswith("zz_other (Other GPU)")


@pytest.mark.parametrize(("wanted", "close"), [("b300_sxm6", "b300"), ("gb200_nvl72", "gb200"),
                                               ("rtx_pro_6000", "rtx_pro_6000_server"), ("a30_pcie", "a30")])
def test_unknown_name_suggestions_read_aliases(wanted, close):
    with pytest.raises(UnknownSpecError) as info:
        get_gpu(wanted)
    assert close in str(info.value).split("closest known: ")[1].split(";")[0]


def test_catalog_from_another_conf_dir(tmp_path):
    _write(tmp_path, _base() | {"key": "mine", "device_name": "My GPU"}, stem="mine")
    assert set(all_gpus(conf_dir=tmp_path)) == {"mine"}
    assert get_gpu("My_GPU", conf_dir=tmp_path).key == "mine"
    with pytest.raises(UnknownSpecError, match="mine"):
        get_gpu("l4", conf_dir=tmp_path)


# ---- round trip ----------------------------------------------------------------------------------

_pos = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False)
_pos_int = st.integers(min_value=1, max_value=100_000)
_name = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1).filter(str.strip)
_optional = {"cores_per_sm": _pos_int, "tf32_tflops": _pos, "bf16_tflops": _pos, "fp16_tflops": _pos,
             "fp8_tflops": _pos, "int8_tops": _pos, "fp4_tflops": _pos, "fp32_matrix_gflops": _pos,
             "nvlink_gbs": _pos, "network_gbs": _pos, "tdp_w": _pos}


@settings(max_examples=60, deadline=None)
@given(num_sm=_pos_int, numbers=st.fixed_dictionaries(
           {f: st.one_of(_pos, _pos_int) for f in
            ("fp32_gflops", "mem_gb", "mem_bw_gbs", "l2_mb", "boost_clock_mhz", "pcie_gbs")}),
       optional=st.fixed_dictionaries({}, optional={f: st.one_of(s, st.none()) for f, s in _optional.items()}),
       name=_name, aliases=st.lists(_name, max_size=3, unique=True))
def test_any_positive_numbers_round_trip_through_yaml(num_sm, numbers, optional, name, aliases):
    data = {"key": "rt", "device_name": name, "vendor": "amd", "architecture": "x", "num_sm": num_sm,
            "source": "hypothesis", "aliases": aliases} | numbers | optional
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), data, stem="rt")
        spec = load_gpu_file(path)
        assert spec == GpuSpec(**(data | {"aliases": tuple(aliases)}))
        assert spec.dtypes == tuple(d for d in DTYPES if d == "fp32" or optional.get(
            {"int8": "int8_tops"}.get(d, f"{d}_tflops")) is not None)
        again = _write(Path(tmp), dataclasses.asdict(spec), stem="rt")
        assert load_gpu_file(again) == spec
    for f in ("fp32_gflops", "mem_bw_gbs", "tf32_tflops"):
        value = getattr(spec, f)
        assert value is None or isinstance(value, float)
