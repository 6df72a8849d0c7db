"""Kernel rows from every measured source schema the project ships (pure: frames in, frames out).

The project's kernel schema is ``OPName, B, M, N, K, H`` (+ ``Hkv``, ``dtype``, ``kv_dtype``),
``Device`` and ``Latency`` (ms) where measured. Each converter keeps the source's row order and
index, so forecasts align back to the input rows.

- NeuSight kernel csv: already the schema (``dtype`` absent = fp32).
- AIConfigurator ``gemm``: one ``Linear(k -> n)`` on ``m`` tokens -> ``linear`` with ``M = m``,
  ``N = k`` (reduced), ``K = n``; ``gemm_dtype`` bfloat16 | fp8.
- AIConfigurator ``context_attention``: causal prefill of ``batch_size`` x ``isl`` tokens ->
  ``attn_prefill`` with ``M = N = isl``; ``generation_attention``: one new token over ``step``
  cached ones -> ``attn_decode`` with ``M = 1``, ``N = step``.
- AIConfigurator ``nccl``: collectives, not kernels (``collective`` rows, see
  :mod:`tilecast.forecast.comm`); ``custom_allreduce``: a serving engine's own all-reduce, ``all_reduce``
  collective rows that name the engine and its kernel (:mod:`tilecast.serving.engine_allreduce`).
- The serving-engine tables (``gemm_engines``, ``*_attention_engines``) convert as their vLLM twins; every
  AIConfigurator kernel row names its ``engine`` (the source's ``framework``, lower case: ``vllm``, ``sglang``,
  ``trtllm``) and its ``engine_version``; ``fp8_block`` GEMMs are ``fp8`` rows with ``fp8_scaling`` ``block``.
- Vidur ``mlp`` (long form, :func:`tilecast.data.load_vidur`): already the schema, fp16.
- AIConfigurator ``moe``, ``context_mla``, ``generation_mla``, ``deepep_ll`` / ``deepep_normal``: the
  mixture-of-experts era tables (:mod:`tilecast.tiles.moe_sources`).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from tilecast.errors import UserError
from tilecast.tiles.moe_sources import MOE_CONVERTERS, MOE_SIGNATURES

#: a schema's identifying columns -> its name
_SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    *MOE_SIGNATURES,
    ("aiconfigurator_gemm", frozenset({"gemm_dtype", "m", "n", "k", "latency_ms"})),
    ("aiconfigurator_attention", frozenset({"num_heads", "num_key_value_heads", "head_dim", "isl", "step"})),
    ("aiconfigurator_nccl", frozenset({"nccl_dtype", "num_gpus", "message_size"})),
    ("aiconfigurator_custom_allreduce", frozenset({"allreduce_dtype", "num_gpus", "message_size"})),
    ("vidur_mlp", frozenset({"OPName", "num_tokens", "tp", "latency_ms"})),
    ("neusight", frozenset({"OPName"})),
)


def source_schema(frame: pd.DataFrame) -> str:
    """Which shipped schema ``frame`` is in (by its columns); unknown -> ValueError naming what is missing."""
    cols = set(frame.columns)
    for name, needed in _SIGNATURES:
        if needed <= cols:
            return name
    raise UserError("unrecognised kernel table: expected NeuSight kernel columns (OPName, B, M, N, K / B, H), "
                    "an AIConfigurator gemm / context_attention / generation_attention / nccl / custom_allreduce / "
                    "moe / context_mla / generation_mla / deepep_ll / deepep_normal table (or an engine twin) or a "
                    f"Vidur mlp table; got columns {', '.join(map(str, frame.columns))}")


def _device(frame: pd.DataFrame) -> pd.Series:
    for col in ("device", "Device", "system"):
        if col in frame:
            return frame[col].astype(str)
    return pd.Series([None] * len(frame), index=frame.index, dtype=object)


def _latency(frame: pd.DataFrame, col: str) -> pd.Series | None:
    return pd.to_numeric(frame[col], errors="coerce") if col in frame else None


def _finish(frame: pd.DataFrame, rows: dict, latency_col: str) -> pd.DataFrame:
    out = pd.DataFrame(rows, index=frame.index)
    out["Device"] = _device(frame)
    if "framework" in frame:  # AIConfigurator: the serving engine that ran the kernel
        out["engine"] = frame["framework"].astype(str).str.lower()
        if "version" in frame:
            out["engine_version"] = frame["version"].astype(object)
    lat = _latency(frame, latency_col)
    if lat is not None:
        out["Latency"] = lat
    return out


def from_aiconfigurator_gemm(frame: pd.DataFrame) -> pd.DataFrame:
    """AIConfigurator ``gemm`` rows as ``linear`` kernel rows (``M = m``, ``N = k``, ``K = n``)."""
    dtype = frame["gemm_dtype"].astype(str)
    block = dtype == "fp8_block"
    return _finish(frame, {"OPName": "linear", "B": 1, "M": frame["m"], "N": frame["k"], "K": frame["n"],
                           "H": 0, "dtype": dtype.where(~block, "fp8"),
                           "fp8_scaling": block.map({True: "block", False: "tensor"})}, "latency_ms")


def from_aiconfigurator_attention(frame: pd.DataFrame) -> pd.DataFrame:
    """AIConfigurator ``context_attention`` / ``generation_attention`` rows as fused-attention rows."""
    op = frame["op_name"].astype(str) if "op_name" in frame else pd.Series("", index=frame.index)
    decode = (op == "generation_attention").to_numpy() | (pd.to_numeric(frame["step"]) > 0).to_numpy()
    isl = pd.to_numeric(frame["isl"])
    step = pd.to_numeric(frame["step"])
    return _finish(frame, {
        "OPName": pd.Series(decode, index=frame.index).map({True: "attn_decode", False: "attn_prefill"}),
        "B": frame["batch_size"], "M": isl.where(~decode, 1), "N": isl.where(~decode, step),
        "K": frame["head_dim"], "H": frame["num_heads"], "Hkv": frame["num_key_value_heads"],
        "dtype": frame["attn_dtype"].astype(str) if "attn_dtype" in frame else "bf16",
        "kv_dtype": frame["kv_cache_dtype"].astype(str) if "kv_cache_dtype" in frame else None,
    }, "latency_ms")


def from_aiconfigurator_nccl(frame: pd.DataFrame) -> pd.DataFrame:
    """AIConfigurator ``nccl`` rows as ``collective`` rows: ``OPName`` the collective, ``H`` elements,
    ``B`` GPUs in the group, ``dtype`` of the elements."""
    return _finish(frame, {"OPName": frame["op_name"].astype(str), "B": frame["num_gpus"], "M": 0, "N": 0,
                           "K": 0, "H": frame["message_size"], "dtype": frame["nccl_dtype"].astype(str)},
                   "latency_ms")


def from_aiconfigurator_custom_allreduce(frame: pd.DataFrame) -> pd.DataFrame:
    """AIConfigurator ``custom_allreduce`` rows as ``all_reduce`` collective rows (``H`` elements, ``B`` GPUs) with
    the kernel that ran them (``engine_kernel``: the source's ``kernel_source``)."""
    return _finish(frame, {"OPName": "all_reduce", "B": frame["num_gpus"], "M": 0, "N": 0, "K": 0,
                           "H": frame["message_size"], "dtype": frame["allreduce_dtype"].astype(str),
                           "engine_kernel": frame["kernel_source"].astype(str)}, "latency_ms")


#: Vidur ops run as a kernel of the project's vocabulary: SiLU x mul (vLLM's fused ``silu_and_mul``) reads two
#: tensors and writes one per output element, as ``mul`` does
_VIDUR_OPS = {"silu_mul": "mul"}


def from_vidur_mlp(frame: pd.DataFrame) -> pd.DataFrame:
    """Vidur's long-form ``mlp`` rows (already in the kernel schema, fp16)."""
    cols = {c: frame[c] for c in ("OPName", "B", "M", "N", "K", "H") if c in frame}
    cols["OPName"] = frame["OPName"].astype(str).replace(_VIDUR_OPS)
    cols["dtype"] = frame["dtype"] if "dtype" in frame else "fp16"
    return _finish(frame, cols, "latency_ms")


CONVERTERS: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "aiconfigurator_gemm": from_aiconfigurator_gemm,
    "aiconfigurator_attention": from_aiconfigurator_attention,
    "aiconfigurator_nccl": from_aiconfigurator_nccl,
    "aiconfigurator_custom_allreduce": from_aiconfigurator_custom_allreduce,
    "vidur_mlp": from_vidur_mlp,
    "neusight": lambda frame: frame,
    **MOE_CONVERTERS,
}


def kernel_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (any shipped schema) as kernel rows, same index and order."""
    return CONVERTERS[source_schema(frame)](frame)
