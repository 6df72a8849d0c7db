"""The score table: one row per cell, fixed columns and types (``scores.parquet``).

Keys first (``dtype`` the last of them: the workload's precision), then latency (end to end, per phase,
per op family: the fp32 families, then the tensor-core ones), the prediction interval of the step time
(``pred_lo_ms`` / ``pred_hi_ms`` at :data:`tilecast.forecast.intervals.DEFAULT_LEVEL`, ``interval_note``
says what it rests on), throughput, memory and fit, cost, what produced the numbers, and ``error`` (null
unless the cell could not be forecast; its other numbers are then null too). Tables written before the
dtype axis read back as fp32 (:func:`with_defaults`).
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from tilecast.forecast.summary import GROUPS
from tilecast.scoring.matrix import CELL_KEYS, DEFAULT_DTYPE, SERVE_KEYS

#: op families (and ``mem``/``comm``) with an ``ms_<family>`` column, as ``forecast.summarise`` names them (the
#: tensor-core groups after the original eight, so older columns keep their place)
BREAKDOWN = ("bmm", "linear", "elementwise", "softmax", "layernorm", "mem", "comm", "other", "tc_gemm",
             "attn_prefill", "attn_decode", "vec_half", "moe", "mla_prefill", "mla_decode")
LATENCY = ("e2e_ms", "fw_ms", "bw_ms", "acc_ms", *(f"ms_{f}" for f in BREAKDOWN))

SCHEMA = pa.schema([
    ("model", pa.string()), ("gpu", pa.string()), ("batch", pa.int64()), ("seq_len", pa.int64()),
    ("mode", pa.string()), ("parallel", pa.string()), ("fused", pa.bool_()), ("dtype", pa.string()),
    ("n_gpus", pa.int64()),
    *((c, pa.float64()) for c in LATENCY),
    ("pred_lo_ms", pa.float64()), ("pred_hi_ms", pa.float64()),
    ("samples_per_s", pa.float64()), ("tokens_per_s", pa.float64()),
    ("mem_required_gib", pa.float64()), ("gpu_mem_gib", pa.float64()), ("fits", pa.bool_()),
    ("usd_per_gpu_hour", pa.float64()), ("cost_per_step_usd", pa.float64()), ("cost_per_1m_tokens_usd", pa.float64()),
    ("price_estimate", pa.bool_()),
    ("predictor", pa.string()), ("versions", pa.string()), ("run_date", pa.string()),
    ("interval_note", pa.string()), ("error", pa.string()),
])
COLUMNS = tuple(SCHEMA.names)
assert COLUMNS[: len(CELL_KEYS)] == CELL_KEYS
assert set(BREAKDOWN) == set(GROUPS), "every breakdown group of forecast.summary has a column"


def conform(df: pd.DataFrame) -> pa.Table:
    """The score table as Arrow with exactly :data:`SCHEMA` (missing columns are an error, extras dropped)."""
    missing = [c for c in COLUMNS if c not in df]
    if missing:
        raise ValueError(f"score table misses columns {missing}")
    return pa.Table.from_pandas(df[list(COLUMNS)], schema=SCHEMA, preserve_index=False)


def with_defaults(df: pd.DataFrame) -> pd.DataFrame:
    """A score table as this schema reads it: one written before the dtype axis gets ``dtype`` = fp32 (what
    every cell then was), placed after ``fused``."""
    if "dtype" in df:
        return df
    out = df.copy()
    at = list(out.columns).index("fused") + 1 if "fused" in out else len(out.columns)
    out.insert(at, "dtype", DEFAULT_DTYPE)
    return out


def read_scores(path) -> pd.DataFrame:
    """Read a ``scores.parquet`` back (nullable booleans stay nullable; older tables get ``dtype`` fp32)."""
    return with_defaults(pd.read_parquet(path))


#: the serve table (``serve_scores.parquet``): one row per serve cell. Latency per request and per decode
#: step, throughput per GPU and per user, per-GPU memory and fit (``fits`` false: the numbers are still
#: given, with the memory it needs), cost per 1M output tokens of the tensor-parallel group, the largest
#: concurrency whose KV cache fits, provenance and ``error`` (null unless the cell could not be forecast)
SERVE_SCHEMA = pa.schema([
    ("model", pa.string()), ("gpu", pa.string()), ("dtype", pa.string()), ("tp", pa.int64()),
    ("isl", pa.int64()), ("osl", pa.int64()), ("concurrency", pa.int64()), ("n_gpus", pa.int64()),
    ("engine", pa.string()),
    ("ttft_ms", pa.float64()), ("tpot_ms", pa.float64()),
    ("ttft_lo_ms", pa.float64()), ("ttft_hi_ms", pa.float64()), ("tpot_lo_ms", pa.float64()),
    ("tpot_hi_ms", pa.float64()), ("request_latency_ms", pa.float64()),
    ("prefill_ms", pa.float64()), ("decode_step_ms", pa.float64()),
    ("tokens_per_s_per_gpu", pa.float64()), ("tokens_per_s_per_user", pa.float64()),
    ("mem_required_gib", pa.float64()), ("gpu_mem_gib", pa.float64()), ("weights_gib", pa.float64()),
    ("kv_cache_gib", pa.float64()), ("fits", pa.bool_()), ("max_concurrency", pa.int64()),
    ("usd_per_gpu_hour", pa.float64()), ("cost_per_1m_output_tokens_usd", pa.float64()),
    ("price_estimate", pa.bool_()),
    ("predictor", pa.string()), ("versions", pa.string()), ("run_date", pa.string()),
    ("interval_note", pa.string()), ("error", pa.string()),
])
SERVE_COLUMNS = tuple(SERVE_SCHEMA.names)
assert SERVE_COLUMNS[: len(SERVE_KEYS)] == SERVE_KEYS


def conform_serve(df: pd.DataFrame) -> pa.Table:
    """The serve table as Arrow with exactly :data:`SERVE_SCHEMA`."""
    missing = [c for c in SERVE_COLUMNS if c not in df]
    if missing:
        raise ValueError(f"serve table misses columns {missing}")
    return pa.Table.from_pandas(df[list(SERVE_COLUMNS)], schema=SERVE_SCHEMA, preserve_index=False)
