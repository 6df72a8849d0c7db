"""AIConfigurator tables (``gemm, context_attention, generation_attention, nccl`` Parquet, ``serving.csv``).

Source columns and values are kept (``latency_ms`` in ms); columns listed in :data:`DROP_CONSTANT`
are dropped after checking they hold one value. Rows are checked (known system and its device string,
known dtype strings, positive dims and latency); a bad row is rejected with its 1-based row number.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml

from tilecast.data.columns import LATENCY, NULLABLE_NONNEG_INT, POSITIVE_INT, REQUIRED_STRING, STRING, one_of
from tilecast.data.frames import (
    Rule,
    check_table,
    choice,
    drop_constant,
    non_negative,
    positive,
    read_parquet_source,
    text,
)
from tilecast.data.rows import SchemaError, arrow_table, read_rows, require_columns, type_rows
from tilecast.data.tables import TableJob, TableResult

#: measured systems -> the exact device string their rows carry. H100 SXM, H200 SXM and GB300 are
#: held back from this project: a row of theirs is rejected as an unknown system.
SYSTEM_DEVICES: dict[str, str] = {
    "a100_sxm": "NVIDIA A100-SXM4-80GB",
    "b200_sxm": "NVIDIA B200",
    "b300_sxm": "NVIDIA B300 SXM6 AC",
    "gb200": "NVIDIA GB200",
    "l40s": "NVIDIA L40S",
    "rtx_pro_6000_server": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
}
GEMM_DTYPES = ("bfloat16", "fp8")
ATTN_DTYPES = ("bfloat16",)
KV_CACHE_DTYPES = ("bfloat16", "fp8")
NCCL_DTYPES = ("half", "int8")  # 2 bytes, 1 byte per element
NCCL_OPS = ("all_gather", "all_reduce", "alltoall", "reduce_scatter")

_HEAD = {"system": choice(tuple(SYSTEM_DEVICES)), "framework": text(), "version": text(), "device": text(),
         "op_name": text(), "kernel_source": text()}
_ATTENTION = {
    **_HEAD,
    "batch_size": positive("int"),
    "isl": positive("int"),
    "num_heads": positive("int"),
    "num_key_value_heads": positive("int"),
    "head_dim": positive("int"),
    "beam_width": positive("int"),
    "attn_dtype": choice(ATTN_DTYPES),
    "kv_cache_dtype": choice(KV_CACHE_DTYPES),
    "step": non_negative("int"),
    "latency_ms": positive(),
    "window_size": Rule("float", lambda v: ~(v >= 0), lambda x: f"must be non-negative, got {x!r}", nullable=True),
}
#: column rules of each Parquet table, in output order.
PARQUET_RULES: dict[str, dict[str, Rule]] = {
    "gemm": {**_HEAD, "gemm_dtype": choice(GEMM_DTYPES), "m": positive("int"), "n": positive("int"),
             "k": positive("int"), "latency_ms": positive()},
    "context_attention": _ATTENTION,
    "generation_attention": _ATTENTION,
    "nccl": {**_HEAD, "op_name": choice(NCCL_OPS), "nccl_dtype": choice(NCCL_DTYPES), "num_gpus": positive("int"),
             "message_size": positive("int"), "latency_ms": positive()},
}
#: columns dropped from each table after checking they are constant (the value is in PROVENANCE.md).
DROP_CONSTANT: dict[str, tuple[str, ...]] = {
    "gemm": ("framework", "op_name"),
    "context_attention": ("framework", "op_name", "beam_width"),
    "generation_attention": ("framework", "op_name", "beam_width"),
    "nccl": ("framework", "kernel_source"),
}

#: serving.csv columns with a type other than a nullable string; ``device`` is added after ``system``.
_SIZE_COLUMNS = ("batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
SERVING_TYPES = {
    "id": REQUIRED_STRING,
    "backend": one_of(("sglang", "trtllm", "vllm")),
    "backend_version": STRING,
    "model_path": REQUIRED_STRING,
    "system": one_of(tuple(SYSTEM_DEVICES)),
    "precision": one_of(("bf16", "fp4", "fp8", "int4"), nullable=True),
    "mode": one_of(("agg", "disagg")),
    "isl": POSITIVE_INT,
    "osl": POSITIVE_INT,
    **{c: NULLABLE_NONNEG_INT for c in _SIZE_COLUMNS},
    **{f"{stage}_{c}": NULLABLE_NONNEG_INT for stage in ("prefill", "decode")
       for c in ("batch_size", "num_workers", *_SIZE_COLUMNS[1:])},
    "silicon_ttft_ms": LATENCY,
    "silicon_tpot_ms": LATENCY,
}
SERVING_REQUIRED = ("id", "model_path", "system", "mode", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms")
TABLES = (*PARQUET_RULES, "serving")


def _device_matches_system(table: pa.Table) -> tuple[np.ndarray, Callable[[int], str]]:
    systems = table.column("system").to_pylist()
    devices = table.column("device").to_pylist()
    bad = np.array([SYSTEM_DEVICES.get(s) != d for s, d in zip(systems, devices, strict=True)], dtype=bool)
    return bad, lambda i: (f"device: {devices[i]!r} is not system {systems[i]!r}'s device "
                           f"{SYSTEM_DEVICES.get(systems[i])!r}")


def _parquet_table(name: str, source: Path) -> TableResult:
    shown = f"{name}.parquet"
    path = source / shown
    if not path.is_file():
        raise SchemaError(f"{shown}: missing")
    kept, rejects = check_table(read_parquet_source(path), shown, PARQUET_RULES[name],
                                row_checks=[_device_matches_system])
    kept, notes = drop_constant(kept, DROP_CONSTANT[name], shown)
    return TableResult(name, kept, rejects, [shown], notes)


def _serving_table(source: Path) -> TableResult:
    shown = "serving.csv"
    path = source / shown
    if not path.is_file():
        raise SchemaError(f"{shown}: missing")
    src = read_rows(path, shown)
    require_columns(src.header, SERVING_REQUIRED, shown)
    values, _, rejects = type_rows(src, shown, SERVING_TYPES)
    columns: dict[str, list] = {}
    for column, cells in values.items():
        columns[column] = cells
        if column == "system":
            columns["device"] = [SYSTEM_DEVICES[s] for s in cells]
    return TableResult("serving", arrow_table(columns, SERVING_TYPES), rejects, [shown])


def plan_aiconfigurator(source: Path) -> list[TableJob]:
    """One job per AIConfigurator table (the four Parquet tables, then serving)."""
    jobs = [TableJob(name, partial(_parquet_table, name)) for name in PARQUET_RULES]
    return jobs + [TableJob("serving", _serving_table)]


#: spec fields every ``systems/<name>.yaml`` must carry under ``gpu:`` (positive numbers).
SYSTEM_GPU_FIELDS = ("mem_bw", "mem_capacity", "bfloat16_tc_flops")


def check_system_yaml(path: Path, shown: str) -> None:
    """A system spec sheet parses as YAML with a ``gpu:`` mapping of positive numbers (copied verbatim)."""
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{shown}: not YAML ({' '.join(str(exc).split())})") from None
    gpu = spec.get("gpu") if isinstance(spec, dict) else None
    if not isinstance(gpu, dict):
        raise SchemaError(f"{shown}: no 'gpu:' mapping")
    for field in SYSTEM_GPU_FIELDS:
        value = gpu.get(field)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise SchemaError(f"{shown}: gpu.{field} must be a positive number, got {value!r}")
