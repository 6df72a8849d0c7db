"""The AIConfigurator, Vidur and NeuSight-AMD tables committed under data/: loadable, complete, licensed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilecast.data import (
    aiconfigurator_systems,
    amd_kernel_names,
    load_aiconfigurator,
    load_amd_devices,
    load_amd_kernels,
    load_kernels,
    load_vidur,
)
from tilecast.data.aiconfigurator import SYSTEM_DEVICES
from tilecast.paths import AICONFIGURATOR_DIR, DATA_DIR, NEUSIGHT_AMD_DIR, VIDUR_DIR

HELD_BACK = ("H100", "H200", "GB300")


def test_data_folder_is_under_60_mb() -> None:
    size_bytes = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
    assert 0 < size_bytes < 60 * 2**20, f"data/ holds {size_bytes / 2**20:.1f} MiB"


@pytest.mark.parametrize(("folder", "licence"), [(AICONFIGURATOR_DIR, "Apache License"), (VIDUR_DIR, "MIT License"),
                                                 (NEUSIGHT_AMD_DIR, "MIT License")])
def test_licence_and_provenance_ship(folder: Path, licence: str) -> None:
    assert licence in (folder / "LICENSE").read_text()
    provenance = (folder / "PROVENANCE.md").read_text()
    assert f"Made by `python jobs/ingest.py dataset={folder.name} " in provenance
    assert "## Left out" in provenance and "sha256" in provenance


def test_aiconfigurator_tables() -> None:
    for table in ("gemm", "context_attention", "generation_attention", "nccl", "serving"):
        df = load_aiconfigurator(table)
        assert len(df) > 0 and set(df["system"]) <= set(SYSTEM_DEVICES)
        assert not any(h in d for d in df["device"].unique() for h in HELD_BACK)
    gemm = load_aiconfigurator("gemm")
    assert set(gemm["device"]) == set(SYSTEM_DEVICES.values()) and set(gemm["gemm_dtype"]) == {"bfloat16", "fp8"}
    assert (gemm[["m", "n", "k"]] > 0).all().all() and (gemm["latency_ms"] > 0).all()
    systems = aiconfigurator_systems()
    assert {"h100_sxm", "h200_sxm", "gb300", *SYSTEM_DEVICES} <= set(systems)  # spec sheets of every system
    assert all(spec["gpu"]["mem_bw"] > 0 for spec in systems.values())


def test_vidur_tables() -> None:
    mlp = load_vidur()
    assert set(mlp["device"]) == {"NVIDIA A100-SXM4-80GB", "NVIDIA A40"}
    assert set(mlp["OPName"]) == {"linear", "rmsnorm", "ln", "silu_mul", "gelu", "add", "rope", "embedding"}
    llama = mlp[(mlp["model"] == "meta-llama/Llama-2-7b-hf") & (mlp["gpu"] == "a100") & (mlp["op"] == "attn_pre_proj")]
    assert (llama["N"] == 4096).all() and (llama["K"] == 3 * 4096 // llama["tp"]).all()
    assert sorted(llama["tp"].unique()) == [1, 2, 4, 8] and (llama["M"] == llama["num_tokens"]).all()
    assert (mlp["latency_ms"] > 0).all() and mlp["latency_ms"].notna().all()
    net = load_vidur("network")
    assert set(net["node"]) == {"a100_dgx", "a100_pairwise_nvlink", "a40_pairwise_nvlink"} and len(net) > 0


def test_amd_tables_match_the_nvidia_schema() -> None:
    names = amd_kernel_names()
    assert {"bmm", "linear", "add", "ln", "softmax", "gelu"} <= set(names)
    nvidia = load_kernels("test", "linear").columns.tolist()
    for name in names:
        df = load_amd_kernels(name)
        assert len(df) > 0 and set(df["Device"]) == {"AMD Instinct MI100", "AMD Instinct MI210"}
        assert set(df["Source"]) == {"test" if name in ("bmm", "linear") else "train"}
        assert (df["Latency"] > 0).all()
    assert load_amd_kernels("linear").columns.tolist() == [*nvidia, "Source"]
    assert load_amd_devices()["Device"].tolist() == ["AMD Instinct MI100", "AMD Instinct MI210"]
