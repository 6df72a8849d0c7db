"""AIConfigurator's serving-engine tables: SGLang and TRT-LLM GEMM and fused-attention kernels (a shape sample)
and the engines' own all-reduce kernels (every row): ``data/aiconfigurator_engines``.

The kernel tables hold about a million rows each; the engine effect they measure is a ratio to the vLLM
tables of ``data/aiconfigurator`` on the same shapes, which a sample of the shapes shows as well: a row is kept
when the crc32 of its shape (the same shape on every GPU and engine, :func:`shape_kept`) falls in one of
:data:`SAMPLE_EVERY` buckets. Sliding-window attention rows are left out (no vLLM row has a window). Rows are
checked as the other AIConfigurator tables are (known system and its device string, known dtype, positive dims
and latency); constant columns are dropped.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilecast.data.aiconfigurator import _ATTENTION, _HEAD, _device_matches_system
from tilecast.data.frames import Rule, check_table, choice, drop_constant, positive, read_parquet_source, text
from tilecast.data.rows import SchemaError
from tilecast.data.tables import TableJob, TableResult

#: engines of the kernel tables, and of the all-reduce table (its vLLM rows are vLLM's custom all-reduce)
KERNEL_ENGINES = ("sglang", "trtllm")
ALLREDUCE_ENGINES = ("sglang", "trtllm", "vllm")
#: GEMM dtypes: ``fp8_block`` is DeepSeek-style 128-block-scaled fp8 (DeepGEMM where the GPU has it)
ENGINE_GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block")
#: fp8 queries (fp8 FMHA) run with an fp8 KV cache
ENGINE_ATTN_DTYPES = ("bfloat16", "fp8")

_ENGINE_HEAD = {**_HEAD, "framework": choice(KERNEL_ENGINES)}
PARQUET_RULES: dict[str, dict[str, Rule]] = {
    "gemm_engines": {**_ENGINE_HEAD, "gemm_dtype": choice(ENGINE_GEMM_DTYPES), "m": positive("int"),
                     "n": positive("int"), "k": positive("int"), "latency_ms": positive()},
    "context_attention_engines": {**_ATTENTION, **_ENGINE_HEAD, "attn_dtype": choice(ENGINE_ATTN_DTYPES)},
    "generation_attention_engines": {**_ATTENTION, **_ENGINE_HEAD, "attn_dtype": choice(ENGINE_ATTN_DTYPES)},
    "custom_allreduce": {**_HEAD, "framework": choice(ALLREDUCE_ENGINES), "op_name": choice(("all_reduce",)),
                         "allreduce_dtype": choice(("bfloat16",)), "num_gpus": positive("int"),
                         "message_size": positive("int"), "latency_ms": positive(),
                         "backend": text(nullable=True), "implementation": text(nullable=True)},
}
DROP_CONSTANT: dict[str, tuple[str, ...]] = {
    "gemm_engines": ("op_name",),
    "context_attention_engines": ("op_name", "beam_width"),
    "generation_attention_engines": ("op_name", "beam_width"),
    "custom_allreduce": ("op_name",),  # allreduce_dtype stays: the element size of message_size
}
#: the columns that make a kernel table's shape (a sampled shape is kept on every GPU and engine)
SHAPE_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm_engines": ("m", "n", "k"),
    "context_attention_engines": ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "step"),
    "generation_attention_engines": ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "step"),
}
#: one shape in this many is kept (the crc32 of its ``a,b,c`` text is 0 modulo it); 1 = every row
SAMPLE_EVERY: dict[str, int] = {"gemm_engines": 8, "context_attention_engines": 4,
                                "generation_attention_engines": 4, "custom_allreduce": 1}
TABLES = tuple(PARQUET_RULES)


def shape_kept(shapes: Sequence[Sequence[int]], every: int) -> np.ndarray:
    """True for each shape (a row of ints) whose crc32 of ``"a,b,c"`` is 0 modulo ``every``."""
    if every == 1:
        return np.ones(len(shapes), dtype=bool)
    return np.array([zlib.crc32(",".join(str(int(v)) for v in s).encode()) % every == 0 for s in shapes],
                    dtype=bool)


def _sample(table: pa.Table, name: str) -> tuple[pa.Table, list[str]]:
    """Drop sliding-window rows and keep the sampled shapes; the notes say how many of how many."""
    notes, before = [], table.num_rows
    if "window_size" in table.column_names:
        window = pc.fill_null(pc.greater(table.column("window_size"), 0), False)
        table = table.filter(pc.invert(window))
        notes.append(f"left out {before - table.num_rows} sliding-window rows (window_size > 0)")
    every = SAMPLE_EVERY[name]
    if every > 1:
        cols = [table.column(c).to_numpy() for c in SHAPE_COLUMNS[name]]
        keep = shape_kept(np.stack(cols, axis=1) if cols[0].size else np.zeros((0, len(cols)), int), every)
        n = table.num_rows
        table = table.filter(pa.array(keep))
        notes.append(f"shape sample: kept {table.num_rows} of {n} rows (1 shape in {every}, crc32 of "
                     f"`{','.join(SHAPE_COLUMNS[name])}`)")
    return table, notes


def _engine_table(name: str, source: Path) -> TableResult:
    shown = f"{name}.parquet"
    path = source / shown
    if not path.is_file():
        raise SchemaError(f"{shown}: missing")
    kept, rejects = check_table(read_parquet_source(path), shown, PARQUET_RULES[name],
                                row_checks=[_device_matches_system])
    kept, notes = drop_constant(kept, DROP_CONSTANT[name], shown)
    kept, sample_notes = _sample(kept, name)
    return TableResult(name, kept, rejects, [shown], notes + sample_notes)


def plan_aiconfigurator_engines(source: Path) -> list[TableJob]:
    """One job per engine table."""
    return [TableJob(name, partial(_engine_table, name)) for name in PARQUET_RULES]

