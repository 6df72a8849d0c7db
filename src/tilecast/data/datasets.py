"""The datasets the ingest can make: their tables, licence, verbatim copies and PROVENANCE.md prose.

One entry per dataset in :data:`DATASETS`; ``jobs/ingest.py dataset=<name>`` picks one (the source
and output folders are in ``conf/ingest.yaml``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tilecast.data.aiconfigurator import check_system_yaml, plan_aiconfigurator
from tilecast.data.aiconfigurator_engines import plan_aiconfigurator_engines
from tilecast.data.aiconfigurator_moe import AICONFIGURATOR_MOE_TEXT, plan_aiconfigurator_moe
from tilecast.data.amd import check_device_config, plan_amd
from tilecast.data.graphs import plan_graphs
from tilecast.data.kernels import plan_kernels
from tilecast.data.labels import plan_labels
from tilecast.data.llm_foundry import check_csv, check_yaml, plan_llm_foundry
from tilecast.data.paper import plan_paper
from tilecast.data.provenance import NEUSIGHT_TEXT, ProvenanceText
from tilecast.data.tables import TableJob
from tilecast.data.vidur import plan_vidur
from tilecast.errors import UserError

Planner = Callable[[Path], list[TableJob]]


@dataclass(frozen=True)
class Copy:
    """Source files shipped verbatim: ``pattern`` (a glob under the source) into the output folder ``dest``.

    ``check(path, shown)`` raises :class:`~tilecast.data.rows.SchemaError` for a file that must not ship.
    """

    pattern: str
    dest: str
    check: Callable[[Path, str], None]


@dataclass(frozen=True)
class Dataset:
    """One ingestible dataset."""

    name: str
    planners: tuple[Planner, ...]
    text: ProvenanceText
    licence: str = "LICENSE"  # the licence file, relative to the source folder
    licence_kind: str = "MIT"
    copies: tuple[Copy, ...] = ()




AICONFIGURATOR_TEXT = ProvenanceText(
    title="AIConfigurator data",
    about="NVIDIA AIConfigurator's performance database\n"
          "(ai-dynamo/aiconfigurator @095f58a): GEMM, fused prefill and decode attention and NCCL collectives\n"
          "measured by its collector on vLLM (bf16 and fp8 tensor cores), and measured serving runs (TTFT, TPOT).",
    licence_title="Apache License 2.0",
    copyright="Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES\n(the SPDX header of the source files)",
    conventions="""## Conventions

- Latencies are in milliseconds, as measured (locked clocks, CUDA-graph capture, mean of 6 replays after
  3 warm-ups). `device` is the source's exact device string, `system` AIConfigurator's system name; the
  system's spec sheet is `systems/<system>.yaml`, copied verbatim (a second spec source for the catalog).
- Source columns are kept (names, order, values); the constant columns named in the table notes are
  dropped (their one value is given there). Strings are Arrow `string`, ints `int64`, floats `float64`.
- `gemm`: one `Linear(k -> n)` forward on an `m x k` activation; in the project's linear convention
  M = m tokens, N = k (reduced), K = n. fp8 rows include the dynamic per-tensor activation quantisation.
  A100 rows come from vLLM 0.14 (`version`) with a smaller shape grid.
- `context_attention`: fused causal prefill of `batch_size` sequences of `isl` tokens; `generation_attention`:
  one decode step over a KV cache of `step` tokens (`isl` = 1). `num_heads` query heads, `num_key_value_heads`
  KV heads, `head_dim`; `kv_cache_dtype` bfloat16 or fp8; `window_size` null where the source has none.
- `nccl`: `op_name` collective over `num_gpus` GPUs of one node, `message_size` in elements of `nccl_dtype`
  (half = 2 bytes, int8 = 1 byte).
- `serving` (from `serving.csv`): csv columns kept in order, `device` added after `system`; empty cells
  are null; parallel sizes parsed to integers (the csv writes `128.0`).
- Rows are checked (columns present with their types, latency > 0 and finite, dims > 0, known system
  and its device string, known dtype, collective, backend and mode strings); a failing row is logged as
  `<file>:<line>: <reason>`, left out and listed below. For the Parquet sources `<line>` is the 1-based
  row number in the file.
""",
    left_out="""## Left out

- Rows that fail a check (listed below) and the constant columns named in the table notes.
- Nothing else: every row that passed is shipped, no subsampling. The source holds no H100 SXM, H200 SXM
  or GB300 measurement (held back from this project); their spec sheets are among `systems/`.
""",
    files_note="`used: copied` marks files shipped verbatim\n(`systems/*.yaml`); the licence lies beside the "
               "source in `../LICENSES/`.",
)

AICONFIGURATOR_ENGINES_TEXT = ProvenanceText(
    title="AIConfigurator engine data",
    about="NVIDIA AIConfigurator's performance database\n"
          "(ai-dynamo/aiconfigurator @095f58a): the GEMM and fused prefill / decode attention kernels as the SGLang\n"
          "and TRT-LLM engines run them (a sample of the shapes), and the engines' own all-reduce kernels.",
    licence_title="Apache License 2.0",
    copyright="Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES\n(the SPDX header of the source files)",
    conventions="""## Conventions

- Latencies are in milliseconds, as measured (the collector of `data/aiconfigurator`: locked clocks, CUDA-graph
  capture, mean of 6 replays after 3 warm-ups). `system`, `device`, `framework` (the engine: `sglang`,
  `trtllm`; the all-reduce table also `vllm`), `version` (its release) and `kernel_source` (the kernel library the
  engine ran: e.g. `sglang_torch_linear` = cuBLAS, `sglang_sgl_kernel_fp8_scaled_mm` = CUTLASS,
  `sglang_deepgemm_gemm_nt_f8f8bf16` / `deepgemm` = DeepGEMM, `torch_flow` = TRT-LLM's own GEMM / FMHA / XQA,
  `trtllm_mha` = TRT-LLM FMHA under SGLang, `flashinfer`, `triton`, `flash_attention`) are the source's.
- `gemm_engines`: columns as `data/aiconfigurator/gemm` (M = m tokens, N = k reduced, K = n in the project's linear
  convention); `gemm_dtype` adds `fp8_block` (128-element block-scaled fp8, DeepSeek style).
- `context_attention_engines` / `generation_attention_engines`: columns as the vLLM attention tables;
  `attn_dtype` fp8 is fp8 FMHA (fp8 queries over an fp8 KV cache).
- `custom_allreduce`: one all-reduce of `message_size` bf16 elements over `num_gpus` GPUs of one node by the
  engine's own kernel: `kernel_source` `vLLM_custom_graph` / `vLLM_custom_eager` (inside a CUDA graph or not),
  `SGLang_CustomAllReduce_graph` / `_eager`, `TRTLLM`; `backend` / `implementation` as the source (null where
  it has none). Above the size an engine hands to NCCL, the rows time NCCL.
- Rows are checked (columns present with their types, latency > 0 and finite, dims > 0, known system and its
  device string, known dtype and engine); a failing row is logged as `<file>:<line>: <reason>` (the 1-based row
  number), left out and listed below.
""",
    left_out="""## Left out

- Rows that fail a check (listed below) and the constant columns named in the table notes. Among them every
  SGLang kernel row the source files under system `b300_sxm`: their `device` is `NVIDIA GB300`, a GPU held back
  from this project, so the device check rejects them (SGLang's kernels are shipped for five GPUs, TRT-LLM's
  for six).
- Sliding-window attention rows (`window_size` > 0): the vLLM tables they would be compared with have none.
- The kernel tables are a shape sample (the table notes say how many rows of how many): a shape is kept when the
  crc32 of its dims' text is 0 modulo 8 (GEMM) or 4 (attention), so a kept shape is kept on every GPU and engine
  (`tilecast.data.aiconfigurator_engines.shape_kept`). `custom_allreduce` is shipped whole. The source holds no
  H100 SXM, H200 SXM or GB300 measurement (held back from this project).
""",
    files_note="The licence lies beside the source in `../LICENSES/`.",
)

VIDUR_TEXT = ProvenanceText(
    title="Vidur data",
    about="Microsoft Vidur's profiles\n"
          "(microsoft/vidur @7d47513): per-op times inside Llama-style layers (fp16, inference mode) on A100-80GB\n"
          "and A40, and collective times.",
    copyright="Copyright (c) Microsoft Corporation",
    conventions="""## Conventions

- Latencies are in milliseconds: `latency_ms` is Vidur's median, `latency_{mean,min,max,std}_ms` its other
  statistics. Each op's time is the sum of its CUDA kernels in a torch.profiler trace (launch gaps excluded).
- `mlp`: long form, one row per (source file, `num_tokens`, `tp` = `num_tensor_parallel_workers`, `op`), in
  file, source-row, then Vidur op order. `gpu` is Vidur's folder (a100 -> `NVIDIA A100-SXM4-80GB`, a40 ->
  `NVIDIA A40`), `model` the `<org>/<name>` of the path, `dtype` fp16; the model config columns
  (`n_head, n_kv_head, n_embd, n_expanded_embd, vocab_size, use_gated_mlp`) are repeated on every row.
- `OPName` is the project's kernel op: `linear` (attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj),
  `rmsnorm` (norms of gated models) or `ln`, `silu_mul` (gated mlp_act) or `gelu`, `add`, `rope`, `embedding`.
- Dims per TP rank (T tokens, hd = n_embd / n_head, TP workers): linear ops `B=1, M=T, N=in, K=out` with
  attn_pre_proj in n_embd, out (n_head + 2 n_kv_head) hd / TP; attn_post_proj in n_head hd / TP, out n_embd;
  mlp_up_proj in n_embd, out (2 if gated else 1) n_expanded_embd / TP; mlp_down_proj in n_expanded_embd / TP,
  out n_embd. Vector ops `B=T, H=row length` (M, N, K null): norms, add and emb n_embd; mlp_act
  n_expanded_embd / TP output elements (silu_mul reads twice that); attn_rope (n_head + n_kv_head) hd / TP
  (q and k; phi-2 rotates only 32 of its 80 head dims). Linear rows have H null.
- phi-2 has no `post_attention_layernorm` (attention and MLP share one norm): no rows for it.
- `network`: one row per source row of `network/<node>/{all_reduce,send_recv}.csv`: `node` kind, `gpu`,
  `device` (a100_dgx -> `NVIDIA A100-SXM4-80GB`; a100_pairwise_nvlink, a PCIe pair bridged by NVLink ->
  `NVIDIA A100 80GB PCIe`; a40_pairwise_nvlink -> `NVIDIA A40`), `collective`, `size` in fp16 elements,
  `num_workers`, `devices_per_node`, `max_devices_per_node`, `dtype` fp16, latencies as above.
- Rows are checked (columns present, integer config > 0 with TP dividing every per-rank width, times
  finite and > 0, std >= 0); a failing row is logged as `<file>:<line>: <reason>`, left out and listed
  below. A bad time rejects that op of the source row only (the reason names the column).
""",
    left_out="""## Left out

- Rows that fail a check (listed below); `network`'s unnamed index column and its constant `rank`.
- Nothing else: every source row and op is shipped, no subsampling. The source holds no H100 SXM, H200 SXM
  or GB300 measurement (held back from this project).
""",
    files_note="The licence lies beside the source in `../LICENSES/`.",
)

NEUSIGHT_AMD_TEXT = ProvenanceText(
    title="NeuSight AMD data",
    about="NeuSight's kernel measurements\n"
          "on the AMD Instinct MI100 and MI210 (fp32, PyTorch 2.4.1), in the NeuSight kernel schema, and its AMD\n"
          "spec sheets.",
    conventions="""## Conventions

- `kernels/<op>` have the columns of `data/neusight/kernels` tables, in their order, then `Source`:
  `OPName, Latency, Device, Torch Version, CUDNN Version, Kernel Name, Warps per SM, Blocks per SM, Grid x,
  Grid y, Grid z, Block x, Block y, Block z, CUDA Version, Kernels`, dims `B, M, N, K` (bmm, linear) or
  `B, H`, `Source`. `Latency` in ms (mean of the 5 fastest of 25 timings), values as in the source.
- `Source` is `test` for the model-shaped bmm and linear rows of `test/collect` (the AMD training-shape
  bmm/linear files are not in the public snapshot; these are fair training data) and `train` for the vector
  ops of `train/collect`. Rows are ordered by Device, then source order.
- The AMD files lack `Torch Version` (set from the folder name, `p2.4.1`), `CUDNN Version`, `Warps per SM`,
  `Blocks per SM` and `CUDA Version` (null). `Device` is `AMD Instinct MI100` or `AMD Instinct MI210`, as the
  files spell them, and must match the file name.
- `devices/*.json`: the spec sheets, copied verbatim: `Mem_Bw` GB/s, `SingleFLOPsMM` (matrix cores) and
  `SingleFLOPsVEC` (vector units) fp32 GFLOP/s, `Num_Sm`, `L2Cache` MB, `Dev_Mem` GB.
- Rows are checked (columns present, numeric types, latency > 0, known device matching the file name,
  dims >= 0); a failing row is logged as `<file>:<line>: <reason>`, left out and listed below.
""",
    left_out="""## Left out

- Rows that fail a check (listed below).
- `dims/*.csv`, the shape lists that drove the collection: five are byte-identical to NeuSight's, shipped as
  `data/neusight/kernels/dims`; `train_vec.csv` differs, and the measured rows carry every shape anyway.
- Nothing is subsampled (every row fits in well under 2 MB of Parquet). AMD end-to-end labels are held back
  from this project and are not in the source.
""",
    files_note="`used: copied` marks the device configs shipped\nverbatim under `devices/`; `used: no` marks "
               "the `dims/` shape lists (see Left out).",
)

LLM_FOUNDRY_TEXT = ProvenanceText(
    title="llm-foundry data",
    about="MosaicML llm-foundry's published MPT training throughput\n"
          "(mosaicml/llm-foundry @8c8dd48, the tables of scripts/train/benchmarking/README.md): whole training steps\n"
          "of MPT 125M-70B on 8-512 A100-40GB / 80GB (FSDP, activation checkpointing, gradient accumulation).",
    licence_title="Apache License 2.0",
    copyright="Copyright (c) MosaicML (llm-foundry)",
    conventions="""## Conventions

- `mpt_training`: the csv's columns, names and order kept, typed (counts `int64`, throughput and utilisation
  `float64`, flags `bool`). `section` names the cluster (A100 40GB or 80GB nodes of 8 GPUs joined by 1600 Gbps
  RoCE); `GPU` is the table's short name (`a100_80gb`: the catalog's `a100_sxm4_80gb` alias); `Model` the MPT
  size; `GlobalBatchSize` in sequences, `GlobalBatchSize (T)` in tokens; `Throughput` per second in sequences,
  tokens and tokens per GPU; `MFU` / `HFU` in percent of 312 TFLOP/s; `Model TFLOP` per GPU per second;
  `Precision` `amp_bf16` / `bf16`, `MP Mode` Composer's FSDP mixed precision (`DEFAULT` reduces in fp32, `PURE`
  in bf16); `Sharding Strategy` FSDP's (`FULL_SHARD` = ZeRO-3); `NumParams` every parameter of the run's model.
- Measured with Composer + PyTorch FSDP and flash attention, 12 steps after warm-up; a step is forward +
  backward + optimizer (AdamW) over the global batch.
- `mpt_training.csv` ships verbatim (`python jobs/evaluate.py training_runs=data/llm_foundry/mpt_training.csv`
  reads it) and `yamls/mpt-*.yaml`, the architectures of the rows (copied to `conf/model/mpt_*.yaml`).
- Rows are checked (columns present, counts > 0, throughput and utilisation > 0, `MicroBatchSize x GradAccum x
  # GPUs = GlobalBatchSize`, an FSDP sharding strategy); a failing row is logged as `<file>:<line>: <reason>`,
  left out of the table and listed below.
""",
    left_out="""## Left out

- Rows that fail a check (listed below). `SOURCE.txt` (the commit, quoted above). Nothing else: the source
  holds no H100 table (held back from this project).
""",
    files_note="`used: copied` marks the files shipped verbatim (the csv and\nthe architecture yamls).",
)

DATASETS: dict[str, Dataset] = {
    "neusight": Dataset("neusight", (plan_kernels, plan_labels, plan_graphs, plan_paper), NEUSIGHT_TEXT),
    "neusight_amd": Dataset("neusight_amd", (plan_amd,), NEUSIGHT_AMD_TEXT,
                            copies=(Copy("train/device_configs/*.json", "devices", check_device_config),)),
    "aiconfigurator": Dataset("aiconfigurator", (plan_aiconfigurator,), AICONFIGURATOR_TEXT,
                              licence="../LICENSES/aiconfigurator-Apache-2.0.txt", licence_kind="Apache-2.0",
                              copies=(Copy("systems/*.yaml", "systems", check_system_yaml),)),
    "aiconfigurator_engines": Dataset("aiconfigurator_engines", (plan_aiconfigurator_engines,),
                                      AICONFIGURATOR_ENGINES_TEXT, licence="../LICENSES/aiconfigurator-Apache-2.0.txt",
                                      licence_kind="Apache-2.0"),
    "vidur": Dataset("vidur", (plan_vidur,), VIDUR_TEXT, licence="../LICENSES/vidur-MIT.txt"),
    "aiconfigurator_moe": Dataset("aiconfigurator_moe", (plan_aiconfigurator_moe,), AICONFIGURATOR_MOE_TEXT,
                                  licence="../LICENSES/aiconfigurator-Apache-2.0.txt", licence_kind="Apache-2.0"),
    "llm_foundry": Dataset("llm_foundry", (plan_llm_foundry,), LLM_FOUNDRY_TEXT,
                           licence="LICENSE-llm-foundry-Apache-2.0.txt", licence_kind="Apache-2.0",
                           copies=(Copy("mpt_training.csv", ".", check_csv),
                                   Copy("yamls/mpt-*.yaml", "yamls", check_yaml))),
}


def get_dataset(name: str) -> Dataset:
    """The dataset ``name``; ValueError lists the known ones."""
    if name not in DATASETS:
        raise UserError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return DATASETS[name]
