"""Loaders of the AIConfigurator, Vidur and NeuSight-AMD tables over ingested miniature trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.data.measured_tree import write_aiconfigurator, write_amd, write_vidur
from tilecast.data import (
    aiconfigurator_systems,
    amd_kernel_names,
    data_hash,
    load_aiconfigurator,
    load_amd_devices,
    load_amd_kernels,
    load_vidur,
    run_ingest,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<tmp>/data/{aiconfigurator,vidur,neusight_amd}`` made by the ingest."""
    base = tmp_path_factory.mktemp("measured")
    sources = {"aiconfigurator": write_aiconfigurator(base / "external"), "vidur": write_vidur(base / "external"),
               "neusight_amd": write_amd(base / "amd")}
    for name, source in sources.items():
        assert run_ingest(source, base / "data" / name, dataset=name).ok
    return base / "data"


def test_load_aiconfigurator_tables_and_systems(data: Path) -> None:
    root = data / "aiconfigurator"
    gemm = load_aiconfigurator("gemm", root)
    assert list(gemm.columns[:3]) == ["system", "version", "device"] and gemm["m"].dtype == "int64"
    assert set(gemm["gemm_dtype"]) == {"bfloat16", "fp8"} and (gemm["latency_ms"] > 0).all()
    for table in ("context_attention", "generation_attention", "nccl"):
        assert len(load_aiconfigurator(table, root)) > 0
    serving = load_aiconfigurator("serving", root)
    assert str(serving["tp_size"].dtype) == "Int64" and serving["tp_size"].isna().tolist() == [False, True]
    assert serving["decode_tp_size"].tolist()[1] == 8 and serving["isl"].dtype == "int64"
    systems = aiconfigurator_systems(root)
    assert list(systems) == ["a100_sxm", "h200_sxm"] and systems["a100_sxm"]["gpu"]["mem_bw"] == 2039000000000


def test_unknown_tables_are_value_errors_listing_the_known(data: Path) -> None:
    with pytest.raises(ValueError, match="unknown AIConfigurator table 'gemmm'; known: gemm, context_attention, "
                                         "generation_attention, nccl, serving"):
        load_aiconfigurator("gemmm", data / "aiconfigurator")
    with pytest.raises(ValueError, match="unknown Vidur table 'attention'; known: mlp, network"):
        load_vidur("attention", data / "vidur")
    with pytest.raises(ValueError, match="unknown AMD kernel table 'bmm'; known: add, linear"):
        load_amd_kernels("bmm", data / "neusight_amd")
    with pytest.raises(FileNotFoundError, match="dataset=vidur"):
        load_vidur("mlp", data / "nowhere")


def test_load_vidur(data: Path) -> None:
    mlp = load_vidur(root=data / "vidur")
    assert str(mlp["M"].dtype) == "Int64" and str(mlp["H"].dtype) == "Int64"
    linear = mlp[mlp["OPName"] == "linear"]
    assert linear["H"].isna().all() and linear["M"].notna().all() and (linear["B"] == 1).all()
    vector = mlp[mlp["OPName"] != "linear"]
    assert vector[["M", "N", "K"]].isna().all().all() and (vector["B"] == vector["num_tokens"]).all()
    net = load_vidur("network", data / "vidur")
    assert set(net["collective"]) == {"all_reduce", "send_recv"} and net["size"].dtype == "int64"


def test_load_amd(data: Path) -> None:
    root = data / "neusight_amd"
    assert amd_kernel_names(root) == ["add", "linear"]
    linear = load_amd_kernels("linear", root)
    assert linear.columns[-5:].tolist() == ["B", "M", "N", "K", "Source"]
    assert str(linear["CUDNN Version"].dtype) == "Int64" and linear["Latency"].dtype == "float64"
    devices = load_amd_devices(root)
    assert devices["Device"].tolist() == ["AMD Instinct MI100", "AMD Instinct MI210"]
    assert devices.set_index("Device").loc["AMD Instinct MI210", "SingleFLOPsMM"] == 45300


def test_data_hash_covers_every_dataset_and_the_spec_sheets(data: Path, tmp_path: Path) -> None:
    whole = data_hash(data)
    assert whole != data_hash(data / "vidur") and len(whole) == 64
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    assert data_hash(copy) == whole  # independent of where the tree lives
    with open(copy / "aiconfigurator" / "systems" / "h200_sxm.yaml", "a", encoding="utf-8") as fh:
        fh.write("# edited\n")  # a spec sheet shipped verbatim counts
    assert data_hash(copy) != whole
    shutil.rmtree(copy)
    shutil.copytree(data, copy)
    (copy / "vidur" / "PROVENANCE.md").write_text("edited\n")  # prose does not
    assert data_hash(copy) == whole
