"""Ingest of the AIConfigurator, Vidur and NeuSight-AMD trees: layout, re-runs, rejects with file and line."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.data.measured_tree import (
    AMD_FILES,
    AMD_LINEAR_MI210,
    ATTENTION_ROWS,
    GEMM_ROWS,
    LLAMA2_7B,
    LLAMA_ROWS,
    NCCL_ROWS,
    SERVING_HEAD,
    SERVING_ROWS,
    VIDUR_FILES,
    attention_table,
    gemm_table,
    mlp_csv,
    nccl_table,
    write_aiconfigurator,
    write_amd,
    write_vidur,
)
from tests.data.neusight_tree import write_tree
from tests.data.test_ingest import tree_digest
from tilecast.data import DATASETS, run_ingest
from tilecast.data.aiconfigurator import SYSTEM_DEVICES
from tilecast.paths import NEUSIGHT_DIR

LLAMA_CSV = "vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv"


@pytest.fixture
def ext(tmp_path: Path) -> Path:
    """An ``external/`` folder holding both trees and their licences."""
    write_aiconfigurator(tmp_path / "external")
    write_vidur(tmp_path / "external")
    return tmp_path / "external"


# ---- every dataset: layout, verbatim copies, byte-identical re-runs -----------------------------
@pytest.mark.parametrize(("dataset", "tables", "copies"), [
    ("aiconfigurator", ["gemm", "context_attention", "generation_attention", "nccl", "serving"],
     ["systems/a100_sxm.yaml", "systems/h200_sxm.yaml"]),
    ("vidur", ["mlp", "network"], []),
    ("neusight_amd", ["kernels/add", "kernels/linear"], ["devices/AMD_Instinct_MI100.json",
                                                         "devices/AMD_Instinct_MI210.json"]),
])
def test_layout_and_byte_identical_rerun(dataset: str, tables: list[str], copies: list[str], ext: Path,
                                         tmp_path: Path) -> None:
    source = write_amd(tmp_path / "amd") if dataset == "neusight_amd" else ext / dataset
    out = tmp_path / "out" / dataset
    first = run_ingest(source, out, source_label=f"../shared/{dataset}", command="python jobs/ingest.py",
                       dataset=dataset)
    assert first.ok, first.failures
    digest = tree_digest(out)
    assert sorted(digest) == sorted([f"{t}.parquet" for t in tables] + copies + ["LICENSE", "PROVENANCE.md"])
    assert run_ingest(source, out, source_label=f"../shared/{dataset}", command="python jobs/ingest.py",
                      dataset=dataset).ok
    assert tree_digest(out) == digest
    assert [p.name for p in out.parent.iterdir()] == [dataset]  # no staging leftovers
    for copy in copies:
        src = next(source.rglob(Path(copy).name))
        assert (out / copy).read_bytes() == src.read_bytes()
    meta = pq.ParquetFile(out / f"{tables[0]}.parquet").metadata
    assert meta.row_group(0).column(0).compression == "ZSTD" and b"pandas" not in (meta.metadata or {})
    provenance = (out / "PROVENANCE.md").read_text()
    assert "## Left out" in provenance and "`python jobs/ingest.py`" in provenance
    if dataset != "neusight_amd":  # the licence lies beside the source: copied, and hashed in the file list
        licence = (source / DATASETS[dataset].licence).resolve()
        assert (out / "LICENSE").read_bytes() == licence.read_bytes()
        assert f"| `../LICENSES/{licence.name}` | {licence.stat().st_size} |" in provenance


def test_unknown_dataset_and_missing_licence(ext: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown dataset 'vidurr'; known: neusight, neusight_amd, aiconfigurator"):
        run_ingest(ext / "vidur", tmp_path / "out", dataset="vidurr")
    (ext / "LICENSES" / "aiconfigurator-Apache-2.0.txt").unlink()
    report = run_ingest(ext / "aiconfigurator", tmp_path / "out", dataset="aiconfigurator")
    assert not report.ok and "the Apache-2.0 notice must ship with the data" in report.failures[0]
    assert not (tmp_path / "out").exists()


# ---- AIConfigurator -------------------------------------------------------------------------------
def test_aiconfigurator_keeps_source_columns_and_drops_only_constants(ext: Path, tmp_path: Path) -> None:
    report = run_ingest(ext / "aiconfigurator", tmp_path / "out", dataset="aiconfigurator")
    gemm = pq.read_table(tmp_path / "out" / "gemm.parquet")
    assert gemm.column_names == ["system", "version", "device", "kernel_source", "gemm_dtype", "m", "n", "k",
                                 "latency_ms"]
    assert gemm.schema.field("system").type == pa.string() and gemm.schema.field("m").type == pa.int64()
    assert gemm.column("latency_ms").to_pylist() == [r[8] for r in GEMM_ROWS]
    assert report.table("gemm").notes == ["dropped constant `framework` = 'VLLM'",
                                          "dropped constant `op_name` = 'gemm'"]
    context = pq.read_table(tmp_path / "out" / "context_attention.parquet")
    assert "beam_width" not in context.column_names and "attn_dtype" in context.column_names
    assert context.column("window_size").to_pylist() == [None, 0.0]
    nccl = pq.read_table(tmp_path / "out" / "nccl.parquet")
    assert nccl.column("op_name").to_pylist() == ["all_gather", "all_reduce"]
    serving = pq.read_table(tmp_path / "out" / "serving.parquet").to_pandas()
    assert list(serving.columns) == (SERVING_HEAD.replace("system,", "system,device,").split(","))
    assert serving["device"].tolist() == [SYSTEM_DEVICES["b200_sxm"], SYSTEM_DEVICES["gb200"]]
    assert serving["tp_size"].iloc[0] == 4 and pq.read_schema(tmp_path / "out" / "serving.parquet").field(
        "tp_size").type == pa.int64()
    provenance = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert "| `gemm.parquet` | 3 | 0 | 1 | dropped constant `framework` = 'VLLM'" in provenance
    assert "Licence: Apache License 2.0, Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES" in provenance
    assert "| `systems/h200_sxm.yaml` |" in provenance and "| copied |" in provenance


def test_aiconfigurator_bad_rows_are_rejected_with_file_and_row(ext: Path, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    source = ext / "aiconfigurator"
    bad_gemm = [*GEMM_ROWS,
                ("a100_sxm", "0.14.0", "NVIDIA A100-SXM4-80GB", "vllm_default", "bfloat16", 1, 4096, 4096, -0.5),
                ("a100_sxm", "0.14.0", "NVIDIA A100-SXM4-80GB", "vllm_default", "fp4", 1, 4096, 4096, 0.5),
                ("h200_sxm", "0.24.0", "NVIDIA H200", "vllm_default", "fp8", 1, 4096, 4096, 0.5),
                ("b200_sxm", "0.24.0", "NVIDIA A100-SXM4-80GB", "vllm_default", "fp8", 1, 4096, 4096, 0.5),
                ("b200_sxm", "0.24.0", "NVIDIA B200", "vllm_default", "fp8", 1, 4096, 4096, float("nan")),
                ("b200_sxm", "0.24.0", "NVIDIA B200", "vllm_default", "fp8", 0, 4096, 4096, float("inf"))]
    pq.write_table(gemm_table(bad_gemm), source / "gemm.parquet")
    pq.write_table(attention_table([*ATTENTION_ROWS, (*ATTENTION_ROWS[0][:6], 0, *ATTENTION_ROWS[0][7:])],
                                   "context_attention"), source / "context_attention.parquet")
    pq.write_table(nccl_table([*NCCL_ROWS, (*NCCL_ROWS[0][:3], "broadcast", *NCCL_ROWS[0][4:])]),
                   source / "nccl.parquet")
    write_tree(source, {"serving.csv": "\n".join([SERVING_HEAD, *SERVING_ROWS, SERVING_ROWS[0].replace(
        ",agg,", ",mixed,"), SERVING_ROWS[0].replace("205.55675526484265", "0")]) + "\n"})
    with caplog.at_level(logging.WARNING, logger="tilecast.data.ingest"):
        report = run_ingest(source, tmp_path / "out", dataset="aiconfigurator")
    assert report.ok, report.failures
    assert [str(r) for r in report.table("gemm").rejects] == [
        "gemm.parquet:4: latency_ms: must be positive, got -0.5",
        "gemm.parquet:5: gemm_dtype: unknown value 'fp4'; known: bfloat16, fp8",
        "gemm.parquet:6: system: unknown value 'h200_sxm'; known: a100_sxm, b200_sxm, b300_sxm, gb200, l40s, "
        "rtx_pro_6000_server",
        "gemm.parquet:7: device: 'NVIDIA A100-SXM4-80GB' is not system 'b200_sxm''s device 'NVIDIA B200'",
        "gemm.parquet:8: latency_ms: not a finite number nan",
        "gemm.parquet:9: m: must be positive, got 0",  # the first failing column names the reason
    ]
    assert report.table("gemm").kept == 3
    assert [str(r) for r in report.table("context_attention").rejects] == [
        "context_attention.parquet:3: num_heads: must be positive, got 0"]
    assert [str(r) for r in report.table("nccl").rejects] == [
        "nccl.parquet:3: op_name: unknown value 'broadcast'; known: all_gather, all_reduce, alltoall, reduce_scatter"]
    assert [str(r) for r in report.table("serving").rejects] == [
        "serving.csv:4: mode: unknown value 'mixed'; known: agg, disagg",
        "serving.csv:5: silicon_ttft_ms: must be positive, got '0'"]
    assert f"{source / 'gemm.parquet'}:4: latency_ms: must be positive, got -0.5" in [
        r.getMessage() for r in caplog.records]
    provenance = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert "| `gemm.parquet` | 3 | 6 | 1 |" in provenance
    assert "- `gemm.parquet:5`: gemm_dtype: unknown value 'fp4'" in provenance
    assert len(pq.read_table(tmp_path / "out" / "gemm.parquet")) == 3


def test_aiconfigurator_schema_failures_write_nothing(ext: Path, tmp_path: Path) -> None:
    source, out = ext / "aiconfigurator", tmp_path / "out"
    assert run_ingest(source, out, dataset="aiconfigurator").ok
    before = tree_digest(out)
    table = gemm_table()
    pq.write_table(table.drop_columns(["latency_ms"]), source / "gemm.parquet")
    nccl = nccl_table()
    pq.write_table(nccl.set_column(nccl.schema.get_field_index("num_gpus"), "num_gpus",
                                   pa.array(["2", "8"])), source / "nccl.parquet")
    write_tree(source, {"systems/l40s.yaml": "gpu:\n  mem_bw: fast\n"})
    report = run_ingest(source, out, dataset="aiconfigurator")
    assert not report.ok
    assert report.failures[0].startswith("gemm: gemm.parquet: missing columns ['latency_ms']")
    assert report.failures[1] == "nccl: nccl.parquet: column 'num_gpus' is string, expected int"
    assert report.failures[2] == "systems: systems/l40s.yaml: gpu.mem_bw must be a positive number, got 'fast'"
    assert tree_digest(out) == before


def test_aiconfigurator_constant_column_that_varies_fails(ext: Path, tmp_path: Path) -> None:
    source = ext / "aiconfigurator"
    table = gemm_table()
    pq.write_table(table.set_column(1, "framework", pa.array(["VLLM", "SGLANG", "VLLM"], pa.large_string())),
                   source / "gemm.parquet")
    report = run_ingest(source, tmp_path / "out", dataset="aiconfigurator")
    assert report.failures == ["gemm: gemm.parquet: column 'framework' was dropped as constant but has values "
                               "['VLLM', 'SGLANG']"]


# ---- Vidur ------------------------------------------------------------------------------------------
def test_vidur_long_form_dims_of_llama2_7b(ext: Path, tmp_path: Path) -> None:
    assert run_ingest(ext / "vidur", tmp_path / "out", dataset="vidur").ok
    mlp = pq.read_table(tmp_path / "out" / "mlp.parquet").to_pandas()
    assert list(mlp.columns) == [
        "gpu", "device", "model", "num_tokens", "tp", "op", "OPName", "B", "M", "N", "K", "H", "dtype", "latency_ms",
        "latency_mean_ms", "latency_min_ms", "latency_max_ms", "latency_std_ms", "n_head", "n_kv_head", "n_embd",
        "n_expanded_embd", "vocab_size", "use_gated_mlp"]
    llama = mlp[mlp["model"] == "meta-llama/Llama-2-7b-hf"]
    assert len(llama) == 10 * len(LLAMA_ROWS) and set(llama["device"]) == {"NVIDIA A100-SXM4-80GB"}
    row = llama[(llama["num_tokens"] == 16) & (llama["tp"] == 2)].set_index("op")
    assert list(row.index[:3]) == ["emb", "input_layernorm", "attn_pre_proj"]
    dims = {op: tuple(row.loc[op, ["B", "M", "N", "K", "H"]].fillna(-1).astype(int)) for op in row.index}
    assert dims["attn_pre_proj"] == (1, 16, 4096, 3 * 4096 // 2, -1)  # n_head = n_kv_head = 32, hd 128
    assert dims["attn_post_proj"] == (1, 16, 4096 // 2, 4096, -1)
    assert dims["mlp_up_proj"] == (1, 16, 4096, 2 * 11008 // 2, -1)  # gated: up and gate
    assert dims["mlp_down_proj"] == (1, 16, 11008 // 2, 4096, -1)
    assert dims["mlp_act"] == (16, -1, -1, -1, 11008 // 2)
    assert dims["attn_rope"] == (16, -1, -1, -1, 2 * 4096 // 2)
    assert dims["input_layernorm"] == dims["add"] == dims["emb"] == (16, -1, -1, -1, 4096)
    assert row["OPName"].to_dict() == {
        "emb": "embedding", "input_layernorm": "rmsnorm", "attn_pre_proj": "linear", "attn_rope": "rope",
        "attn_post_proj": "linear", "post_attention_layernorm": "rmsnorm", "mlp_up_proj": "linear",
        "mlp_act": "silu_mul", "mlp_down_proj": "linear", "add": "add"}
    # the source's median, mean, min, max, std of attn_pre_proj in that row (see measured_tree.op_stats)
    assert row.loc["attn_pre_proj", "latency_ms"] == round(0.03 + 0.016 + 0.02, 6)
    assert row.loc["attn_pre_proj", "latency_min_ms"] == round(0.066 - 0.002, 6)
    assert (row["dtype"] == "fp16").all() and (row["n_embd"] == 4096).all() and row["use_gated_mlp"].all()
    phi = mlp[mlp["model"] == "microsoft/phi-2"].set_index("op")
    assert len(phi) == 9 and "post_attention_layernorm" not in phi.index  # phi-2 has one norm per layer
    assert set(phi["device"]) == {"NVIDIA A40"} and set(phi["gpu"]) == {"a40"}
    assert phi.loc["input_layernorm", "OPName"] == "ln" and phi.loc["mlp_act", "OPName"] == "gelu"
    assert phi.loc["mlp_up_proj", "K"] == 10240 and phi.loc["attn_pre_proj", "K"] == 3 * 2560


def test_vidur_network_table(ext: Path, tmp_path: Path) -> None:
    report = run_ingest(ext / "vidur", tmp_path / "out", dataset="vidur")
    net = pq.read_table(tmp_path / "out" / "network.parquet").to_pandas()
    assert list(net.columns) == ["node", "gpu", "device", "collective", "size", "num_workers", "devices_per_node",
                                 "max_devices_per_node", "dtype", "latency_ms", "latency_mean_ms", "latency_min_ms",
                                 "latency_max_ms", "latency_std_ms"]
    assert net[["node", "device", "collective", "size", "num_workers"]].values.tolist() == [
        ["a100_dgx", "NVIDIA A100-SXM4-80GB", "all_reduce", 2048, 2],
        ["a100_dgx", "NVIDIA A100-SXM4-80GB", "all_reduce", 10240, 8],
        ["a40_pairwise_nvlink", "NVIDIA A40", "send_recv", 2048, 2]]
    assert net["latency_ms"].iloc[0] == 0.043000000000000003 and net["latency_std_ms"].iloc[1] == 0.0
    assert report.table("network").notes == ["dropped the unnamed index column and constant `rank` = 0"]


def test_vidur_bad_times_reject_one_op_and_bad_config_the_row(ext: Path, tmp_path: Path) -> None:
    override = {(0, "time_stats.attn_rope.median"): "nan", (1, "time_stats.mlp_act.mean"): "",
                (1, "time_stats.add.std"): "-0.1", (2, "num_tensor_parallel_workers"): "3"}
    write_tree(ext.parent, {
        f"external/{LLAMA_CSV}": mlp_csv(LLAMA2_7B, LLAMA_ROWS, override=override),
        "external/vidur/network/a40_pairwise_nvlink/send_recv.csv":
            VIDUR_FILES["vidur/network/a40_pairwise_nvlink/send_recv.csv"]
            + "1,0.036,0.037,,0.037,0.0004,0,2,10240,send_recv,1,8\n",
    })
    report = run_ingest(ext / "vidur", tmp_path / "out", dataset="vidur")
    assert report.ok, report.failures
    shown = LLAMA_CSV.removeprefix("vidur/")
    assert [str(r) for r in report.table("mlp").rejects] == [
        f"{shown}:2: time_stats.attn_rope.median: not a finite number 'nan'",
        f"{shown}:3: time_stats.mlp_act.mean: empty",
        f"{shown}:3: time_stats.add.std: must be non-negative, got '-0.1'",
        f"{shown}:4: model config: (n_head + n_kv_head) head_dim 8192 is not divisible by 3 tensor-parallel "
        "workers"]
    assert report.table("mlp").kept == 10 * 3 - 1 - 2 - 10 + 9  # + phi-2
    assert [str(r) for r in report.table("network").rejects] == [
        "network/a40_pairwise_nvlink/send_recv.csv:3: time_stats.send_recv.mean: empty"]
    mlp = pq.read_table(tmp_path / "out" / "mlp.parquet").to_pandas()
    first = mlp[(mlp["model"] == "meta-llama/Llama-2-7b-hf") & (mlp["num_tokens"] == 1)]
    assert "attn_rope" not in set(first["op"]) and len(first) == 9


def test_vidur_unknown_gpu_folder_fails(ext: Path, tmp_path: Path) -> None:
    write_tree(ext, {"vidur/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv": mlp_csv(LLAMA2_7B, LLAMA_ROWS)})
    report = run_ingest(ext / "vidur", tmp_path / "out", dataset="vidur")
    assert report.failures == ["mlp: compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv: unknown GPU folder 'h100'; "
                               "known: a100, a40"]
    assert not (tmp_path / "out").exists()


# ---- NeuSight AMD -----------------------------------------------------------------------------------
def test_amd_tables_have_the_nvidia_kernel_columns_plus_source(tmp_path: Path) -> None:
    source = write_amd(tmp_path / "amd")
    assert run_ingest(source, tmp_path / "out", dataset="neusight_amd").ok
    linear = pq.read_table(tmp_path / "out" / "kernels" / "linear.parquet")
    nvidia = pq.read_schema(NEUSIGHT_DIR / "kernels" / "test" / "linear.parquet")
    assert linear.schema.remove_metadata().equals(
        pa.schema([*nvidia.remove_metadata(), pa.field("Source", pa.string())]))
    df = linear.to_pandas()
    assert df["Device"].tolist() == ["AMD Instinct MI100", "AMD Instinct MI210", "AMD Instinct MI210"]
    assert df["Latency"].tolist() == [0.4951684057712555, 0.41, 7.5]  # by Device, then source order
    assert set(df["Source"]) == {"test"} and set(df["Torch Version"]) == {"p2.4.1"}
    assert df[["CUDNN Version", "Warps per SM", "Blocks per SM", "CUDA Version"]].isna().all().all()
    add = pq.read_table(tmp_path / "out" / "kernels" / "add.parquet").to_pandas()
    assert add[["B", "H", "Source"]].values.tolist() == [[58, 13, "train"]]
    assert add["Kernels"].iloc[0].startswith(";void at::native::vectorized_elementwise_kernel<4")
    provenance = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert "| `dims/train_vec.csv` |" in provenance and provenance.count("| copied |") == 2
    assert "Copyright (c) 2025 Georgia Institute of Technology and Microsoft Corporation" in provenance


def test_amd_bad_rows_and_bad_device_config(tmp_path: Path) -> None:
    lines = AMD_FILES[AMD_LINEAR_MI210].splitlines()
    source = write_amd(tmp_path / "amd", {**AMD_FILES, AMD_LINEAR_MI210: "\n".join([
        *lines, lines[1].replace("AMD Instinct MI210", "AMD Instinct MI100", 1),
        lines[1].replace(",0.41,", ",-1,"), lines[1].replace("AMD Instinct MI210", "AMD Instinct MI300X", 1),
        lines[1].rsplit(",", 1)[0] + ",-2560"]) + "\n"})
    report = run_ingest(source, tmp_path / "out", dataset="neusight_amd")
    assert report.ok
    assert [str(r) for r in report.table("kernels/linear").rejects] == [
        f"{AMD_LINEAR_MI210}:4: Device: 'AMD Instinct MI100' is not the file's device 'AMD Instinct MI210'",
        f"{AMD_LINEAR_MI210}:5: Latency: must be positive, got '-1'",
        f"{AMD_LINEAR_MI210}:6: Device: unknown value 'AMD Instinct MI300X'; known: AMD Instinct MI100, "
        "AMD Instinct MI210",
        f"{AMD_LINEAR_MI210}:7: K: must be non-negative, got '-2560'"]
    write_tree(source, {"train/device_configs/AMD_Instinct_MI100.json": '{"Device": "AMD Instinct MI100"}'})
    report = run_ingest(source, tmp_path / "out2", dataset="neusight_amd")
    assert report.failures == ["devices: train/device_configs/AMD_Instinct_MI100.json: Dev_Mem must be a positive "
                               "number, got None"]
    assert not (tmp_path / "out2").exists()

