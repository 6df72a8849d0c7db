"""Miniature AIConfigurator, Vidur and NeuSight-AMD source trees: real headers and a few real-looking rows."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.data.neusight_tree import write_tree

APACHE = ("                                 Apache License\n                           Version 2.0, January 2004\n"
          "                        http://www.apache.org/licenses/\n\n   Copyright [yyyy] [name of copyright owner]\n")
VIDUR_MIT = "    MIT License\n\n    Copyright (c) Microsoft Corporation.\n\n    Permission is hereby granted, ...\n"
NEUSIGHT_MIT = ("MIT License\n\nCopyright (c) 2025 Georgia Institute of Technology and Microsoft Corporation\n\n"
                "Permission is hereby granted, free of charge, ...\n")

# ---- AIConfigurator -------------------------------------------------------------------------------
A100, B200 = "NVIDIA A100-SXM4-80GB", "NVIDIA B200"
SYSTEM_YAML = ("# SPDX-FileCopyrightText: Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES.\n"
               "# SPDX-License-Identifier: Apache-2.0\n\ndata_dir: data/{name}\ngpu:\n  mem_bw: {bw}\n"
               "  mem_capacity: 85899345920\n  bfloat16_tc_flops: 312000000000000\n  sm_version: 80\n")
GEMM_ROWS = [  # system, version, device, kernel_source, gemm_dtype, m, n, k, latency_ms
    ("a100_sxm", "0.14.0", A100, "vllm_default", "bfloat16", 8192, 65536, 4096, 15.28754),
    ("a100_sxm", "0.14.0", A100, "vllm_default", "bfloat16", 1, 4096, 4096, 0.021),
    ("b200_sxm", "0.24.0", B200, "CutlassFP8ScaledMMLinearKernel", "fp8", 16, 6144, 4096, 0.0123),
]
#: system, version, device, kernel_source, batch, isl, heads, kv heads, head_dim, kv dtype, step, ms, window
ATTENTION_ROWS = [
    ("a100_sxm", "0.14.0", A100, "vllm_flash_attn", 4, 16384, 64, 1, 128, "bfloat16", 0, 96.474874, None),
    ("b200_sxm", "0.24.0", B200, "vllm_flashinfer_trtllmprefill", 1, 1024, 32, 8, 128, "fp8", 0, 0.2, 0.0),
]
GENERATION_ROWS = [
    ("a100_sxm", "0.14.0", A100, "vllm_flash_attn", 32, 1, 64, 1, 128, "bfloat16", 7, 0.013749, None),
]
NCCL_ROWS = [  # system, version, device, op_name, nccl_dtype, num_gpus, message_size, latency_ms
    ("a100_sxm", "2.27.3", A100, "all_gather", "half", 2, 256, 0.00898),
    ("b200_sxm", "2.29.2", B200, "all_reduce", "int8", 8, 1048576, 0.03),
]
SERVING_HEAD = ("id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,"
                "gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,"
                "prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,"
                "prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,"
                "decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,"
                "silicon_tpot_ms")
SERVING_ROWS = [
    "llama_b200_vllm_bf16_agg_1024x1024_c64,db-dump; config_id=1,vllm,0.19.0,meta-llama/Llama-3.1-70B,b200_sxm,"
    "bf16,agg,1024,1024,,,64.0,4.0,1.0,1.0,4.0,1.0,,,,,,,,,,,,,,,205.55675526484265,17.789099860809017",
    "qwen_gb200_trtllm_fp8_disagg,db-dump; config_id=2,trtllm,,Qwen/Qwen3-32B,gb200,fp8,disagg,8192,1024,fp8,,,,,,,,"
    "1.0,2.0,4.0,1.0,1.0,4.0,1.0,64.0,1.0,8.0,1.0,1.0,8.0,1.0,972.3109823355117,33.442908754168066",
]


def _head(rows: list[tuple], framework: str, op: str | None) -> dict[str, list]:
    out = {"system": [r[0] for r in rows], "framework": [framework] * len(rows), "version": [r[1] for r in rows],
           "device": [r[2] for r in rows]}
    if op is not None:
        out["op_name"] = [op] * len(rows)
    return out


def _large(columns: dict[str, list]) -> pa.Table:
    """Like the source files: strings as large_string, ints int64, floats double."""
    arrays = {}
    for name, values in columns.items():
        sample = next((v for v in values if v is not None), None)
        kind = pa.large_string() if isinstance(sample, str) else pa.int64() if isinstance(sample, int) else pa.float64()
        arrays[name] = pa.array(values, type=kind)
    return pa.table(arrays)


def gemm_table(rows: list[tuple] = GEMM_ROWS) -> pa.Table:
    cols = {**_head(rows, "VLLM", "gemm"), "kernel_source": [r[3] for r in rows], "gemm_dtype": [r[4] for r in rows],
            "m": [r[5] for r in rows], "n": [r[6] for r in rows], "k": [r[7] for r in rows],
            "latency_ms": [r[8] for r in rows]}
    return _large(cols)


def attention_table(rows: list[tuple], op: str) -> pa.Table:
    cols = {**_head(rows, "VLLM", op), "kernel_source": [r[3] for r in rows], "batch_size": [r[4] for r in rows],
            "isl": [r[5] for r in rows], "num_heads": [r[6] for r in rows], "num_key_value_heads": [r[7] for r in rows],
            "head_dim": [r[8] for r in rows], "beam_width": [1] * len(rows), "attn_dtype": ["bfloat16"] * len(rows),
            "kv_cache_dtype": [r[9] for r in rows], "step": [r[10] for r in rows], "latency_ms": [r[11] for r in rows],
            "window_size": [r[12] for r in rows]}
    table = _large(cols)
    return table.set_column(table.schema.get_field_index("window_size"), "window_size",
                            pa.array(cols["window_size"], type=pa.float64()))


def nccl_table(rows: list[tuple] = NCCL_ROWS) -> pa.Table:
    cols = {**_head(rows, "TRTLLM", None), "op_name": [r[3] for r in rows], "kernel_source": ["NCCL"] * len(rows),
            "nccl_dtype": [r[4] for r in rows], "num_gpus": [r[5] for r in rows],
            "message_size": [r[6] for r in rows], "latency_ms": [r[7] for r in rows]}
    return _large(cols)


def write_aiconfigurator(base: Path) -> Path:
    """``base/LICENSES/...`` and ``base/aiconfigurator/...``; returns the source folder."""
    source = base / "aiconfigurator"
    write_tree(base, {
        "LICENSES/aiconfigurator-Apache-2.0.txt": APACHE,
        "aiconfigurator/serving.csv": "\n".join([SERVING_HEAD, *SERVING_ROWS]) + "\n",
        "aiconfigurator/systems/a100_sxm.yaml": SYSTEM_YAML.format(name="a100_sxm", bw=2039000000000),
        "aiconfigurator/systems/h200_sxm.yaml": SYSTEM_YAML.format(name="h200_sxm", bw=4800000000000),
    })
    pq.write_table(gemm_table(), source / "gemm.parquet")
    pq.write_table(attention_table(ATTENTION_ROWS, "context_attention"), source / "context_attention.parquet")
    pq.write_table(attention_table(GENERATION_ROWS, "generation_attention"), source / "generation_attention.parquet")
    pq.write_table(nccl_table(), source / "nccl.parquet")
    return source


# ---- Vidur ----------------------------------------------------------------------------------------
VIDUR_OPS = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
             "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
LLAMA2_7B = (32, 32, 4096, 11008, 32768, True)
PHI2 = (32, 32, 2560, 10240, 51200, False)
CONFIG_HEAD = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
               "num_tensor_parallel_workers")


def op_stats(op_index: int, tokens: int, tp: int) -> tuple[float, float, float, float, float]:
    """min, max, mean, median, std of op ``op_index`` in a row (distinct, recognisable values)."""
    median = round(0.01 * (op_index + 1) + tokens / 1000 + tp / 100, 6)
    return (round(median - 0.002, 6), round(median + 0.003, 6), round(median + 0.0005, 6), median, 0.001)


def mlp_csv(config: tuple, rows: list[tuple[int, int]], ops: tuple[str, ...] = VIDUR_OPS,
            override: dict[tuple[int, str], str] | None = None) -> str:
    """A Vidur mlp.csv; ``override[(row index, column)]`` replaces one cell's text."""
    header = [f"time_stats.{op}.{s}" for op in ops for s in ("min", "max", "mean", "median", "std")] + list(CONFIG_HEAD)
    lines = [",".join(header)]
    for r, (tokens, tp) in enumerate(rows):
        cells = [repr(v) for i, op in enumerate(ops) for v in op_stats(VIDUR_OPS.index(op), tokens, tp)]
        cells += [str(v) for v in config] + [str(tokens), str(tp)]
        for (row, column), value in (override or {}).items():
            if row == r:
                cells[header.index(column)] = value
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


NETWORK_HEAD = (",time_stats.{c}.min,time_stats.{c}.max,time_stats.{c}.mean,time_stats.{c}.median,time_stats.{c}.std,"
                "rank,num_workers,size,collective,devices_per_node,max_devices_per_node")
LLAMA_ROWS = [(1, 1), (16, 2), (4096, 4)]
VIDUR_FILES: dict[str, str] = {
    "LICENSES/vidur-MIT.txt": VIDUR_MIT,
    "vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv": mlp_csv(LLAMA2_7B, LLAMA_ROWS),
    "vidur/compute/a40/microsoft/phi-2/mlp.csv": mlp_csv(
        PHI2, [(8, 1)], tuple(op for op in VIDUR_OPS if op != "post_attention_layernorm")),
    "vidur/network/a100_dgx/all_reduce.csv": "\n".join([
        NETWORK_HEAD.format(c="all_reduce"),
        "0,0.031,0.077,0.050333333333333334,0.043000000000000003,0.01948218559493661,0,2,2048,all_reduce,1,8",
        "1,0.04,0.075,0.057,0.056,0.0,0,8,10240,all_reduce,8,8",
    ]) + "\n",
    "vidur/network/a40_pairwise_nvlink/send_recv.csv": "\n".join([
        NETWORK_HEAD.format(c="send_recv"),
        "0,0.017,0.039,0.02566666666666667,0.021,0.009568466729604881,0,2,2048,send_recv,1,8",
    ]) + "\n",
}


def write_vidur(base: Path, files: dict[str, str] = VIDUR_FILES) -> Path:
    write_tree(base, files)
    return base / "vidur"


# ---- NeuSight AMD ---------------------------------------------------------------------------------
AMD_HEAD = "OPName,Latency,Device,Kernel Name,Grid x,Grid y,Grid z,Block x,Block y,Block z,Kernels"
AMD_LINEAR = "Cijk_Alik_Bljk_SB_MT128x64x32_MI32x32x2x1_SE_1LDSB0_APM1_WG64_4_1_WGM15"
AMD_ADD = ('"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, '
           'at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"')
AMD_ADD_KERNELS = '";' + AMD_ADD.strip('"').lower() + '"'
MI100, MI210 = "AMD Instinct MI100", "AMD Instinct MI210"
AMD_LINEAR_MI210 = "test/collect/linear/p2.4.1/AMD Instinct MI210.csv"
AMD_FILES: dict[str, str] = {
    "LICENSE": NEUSIGHT_MIT,
    AMD_LINEAR_MI210: "\n".join([
        AMD_HEAD + ",B,M,N,K",
        f"linear,0.41,{MI210},{AMD_LINEAR},5120,16,1,256,1,1,;{AMD_LINEAR.lower()},1,1024,2560,2560",
        f"linear,7.5,{MI210},{AMD_LINEAR},2048,342,1,256,1,1,;{AMD_LINEAR.lower()},1,32768,4096,1024",
    ]) + "\n",
    "test/collect/linear/p2.4.1/AMD Instinct MI100.csv": "\n".join([
        AMD_HEAD + ",B,M,N,K",
        f"linear,0.4951684057712555,{MI100},{AMD_LINEAR},5120,16,1,256,1,1,;{AMD_LINEAR.lower()},1,1024,2560,2560",
    ]) + "\n",
    "train/collect/add/p2.4.1/AMD Instinct MI210.csv": "\n".join([
        AMD_HEAD + ",B,H",
        f"add,0.013952200114727021,{MI210},{AMD_ADD},1,1,1,256,1,1,{AMD_ADD_KERNELS},58,13",
    ]) + "\n",
    "train/device_configs/AMD_Instinct_MI100.json": json.dumps(
        {"Device": MI100, "Dev_Mem": 32, "Mem_Bw": 1230, "Num_Sm": 120, "Core_Per_SM": 4, "Freq": 1502,
         "SingleFLOPsMM": 46100, "SingleFLOPsVEC": 23100, "L2Cache": 8}, indent=4),
    "train/device_configs/AMD_Instinct_MI210.json": json.dumps(
        {"Device": MI210, "Dev_Mem": 64, "Mem_Bw": 1640, "Num_Sm": 104, "Core_Per_SM": 4, "Freq": 1700,
         "SingleFLOPsMM": 45300, "SingleFLOPsVEC": 22600, "L2Cache": 16}, indent=4),
    "dims/train_vec.csv": "58;13\n141;126\n",  # present in the real source, read by no table
}


def write_amd(root: Path, files: dict[str, str] = AMD_FILES) -> Path:
    return write_tree(root, files)
