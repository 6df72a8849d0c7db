"""Engine kernel factors from the measured tables: each SGLang / TRT-LLM kernel row matched with vLLM's row of
the same shape on the same GPU, and the factor table fitted on them (docs/method.md §20).

A kernel row's **variant** is what changes the kernel library an engine calls: the GEMM dtype (``bf16``:
cuBLAS under every engine; ``fp8`` per-tensor: CUTLASS under vLLM and SGLang, TRT-LLM's own kernels; ``fp8_block``:
DeepGEMM on datacenter Blackwell, compared with vLLM's per-tensor fp8) and, for attention, the KV-cache dtype.
Its **regime** (:data:`REGIMES`) is the shape range inside which a library keeps one kernel: GEMMs by tokens
``M`` (small-M GEMV-like kernels vs tiled large-M ones) and weight size ``N x K``; prefill by prompt length,
tokens in the batch and query heads per KV head; decode by cache length, batch and query heads per KV head. Its
**library** (:func:`library_class`) is the set of kernels the engines and vLLM dispatch to on the GPU's SM
generation (:func:`kernel_generation`): GEMM libraries ship kernels per SM generation, so a GEMM's library is its
generation; the attention backends split datacenter Blackwell (TRT-LLM-gen FMHA / XQA under every engine) from
the rest, and Ada (sm89) and RTX Blackwell (sm120) run the same FlashAttention-2 / FlashInfer kernels, one class.

The factor of a (engine, family, variant, library, regime) cell is the median over the cell's GPUs of each
GPU's median log ratio engine / vLLM (every GPU weighs the same); a regime the cell's GPUs never measured takes
the median over the cell's other regimes. Only each engine's default kernel is fitted: on each GPU the kernel
library its table measures on the full shape grid (:func:`default_kernels`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecast.specs import GpuSpec, get_gpu

#: kernel families an engine changes, as the project's predictors name them
FACTOR_FAMILIES: tuple[str, ...] = ("tc_gemm", "attn_prefill", "attn_decode")
#: the engine tables' families -> the project's
TABLE_FAMILIES: dict[str, str] = {"gemm_engines": "tc_gemm", "context_attention_engines": "attn_prefill",
                                  "generation_attention_engines": "attn_decode"}
#: the vLLM table each engine table is matched with (``data/aiconfigurator``)
VLLM_TABLES: dict[str, str] = {"gemm_engines": "gemm", "context_attention_engines": "context_attention",
                               "generation_attention_engines": "generation_attention"}
#: the source's dtype spellings -> variant names
_VARIANTS = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block"}


@dataclass(frozen=True)
class RegimeAxis:
    """One regime axis: a feature of the kernel rows (project schema) and the edges that cut it into bins."""

    name: str
    feature: Callable[[pd.DataFrame], np.ndarray]
    edges: tuple[float, ...]


def _col(rows: pd.DataFrame, name: str) -> np.ndarray:
    return pd.to_numeric(rows[name], errors="coerce").to_numpy(float)


def _gqa(rows: pd.DataFrame) -> np.ndarray:
    return _col(rows, "H") / _col(rows, "Hkv") if "Hkv" in rows else np.ones(len(rows))


#: family -> its regime axes (a row's bin on an axis is the number of edges <= its feature)
REGIMES: dict[str, tuple[RegimeAxis, ...]] = {
    "tc_gemm": (RegimeAxis("tokens", lambda r: _col(r, "M"), (17, 65, 257, 1025, 4097)),
                RegimeAxis("weight", lambda r: _col(r, "N") * _col(r, "K"), (2.0 ** 22, 2.0 ** 26))),
    "attn_prefill": (RegimeAxis("prompt", lambda r: _col(r, "M"), (129, 513, 2049)),
                     RegimeAxis("tokens", lambda r: _col(r, "B") * _col(r, "M"), (4097, 32769)),
                     RegimeAxis("group", _gqa, (2, 9, 33))),
    "attn_decode": (RegimeAxis("cache", lambda r: _col(r, "N"), (128, 1024, 8192)),
                    RegimeAxis("batch", lambda r: _col(r, "B"), (9, 65, 513)),
                    RegimeAxis("group", _gqa, (2, 9, 33))),
}


def regime_keys(family: str, rows: pd.DataFrame) -> np.ndarray:
    """Each kernel row's regime as a string of bin numbers (``"2_0"``), one per axis of ``REGIMES[family]``."""
    bins = np.stack([np.digitize(np.nan_to_num(ax.feature(rows), nan=0.0), ax.edges) for ax in REGIMES[family]])
    codes, inverse = np.unique(bins, axis=1, return_inverse=True)
    names = np.array(["_".join(map(str, c)) for c in codes.T], dtype=object)
    return names[inverse.ravel()]


def kernel_generation(gpu: GpuSpec) -> str | None:
    """The SM family kernel libraries dispatch on: ``sm80`` (Ampere), ``sm89`` (Ada), ``sm90`` (Hopper),
    ``sm100`` (datacenter Blackwell, B300's sm103 included), ``sm120`` (RTX Blackwell); None for a GPU without a
    compute capability (not NVIDIA)."""
    sm = gpu.sm_version
    if gpu.vendor != "nvidia" or sm is None:
        return None
    return "sm89" if sm == 89 else f"sm{sm // 10 * 10}"


#: family -> SM generations that run the same kernel libraries (one class); other generations are their own class
LIBRARY_CLASSES: dict[str, dict[str, str]] = {
    "attn_prefill": {"sm89": "sm89+sm120", "sm120": "sm89+sm120"},
    "attn_decode": {"sm89": "sm89+sm120", "sm120": "sm89+sm120"},
}


def library_class(family: str, generation: str | None) -> str | None:
    """The kernel-library class of a row of ``family`` on a GPU of SM ``generation`` (None stays None)."""
    if generation is None:
        return None
    return LIBRARY_CLASSES.get(family, {}).get(generation, generation)


def variants(family: str, rows: pd.DataFrame, fp8_block: bool = False) -> np.ndarray:
    """Each kernel row's variant (None where no engine factor applies: bmm, fp4, tf32, fp32 GEMMs)."""
    from tilecast.tiles.dtypes import row_dtypes

    if family == "tc_gemm":
        dtypes = row_dtypes(rows)
        linear = rows["OPName"].astype(str).to_numpy() == "linear"
        fp8 = "fp8_block" if fp8_block else "fp8"
        table = {"bf16": "bf16", "fp16": "bf16", "fp8": fp8}
        return np.array([table.get(d) if lin else None for d, lin in zip(dtypes, linear, strict=True)], dtype=object)
    kv = row_dtypes(rows, "kv_dtype") if "kv_dtype" in rows else row_dtypes(rows)
    return np.where(kv == "fp8", "fp8", "bf16").astype(object)


def _kernel_rows(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    from tilecast.tiles.sources import kernel_rows

    rows = kernel_rows(frame)
    if table == "gemm_engines":  # fp8_block is a variant, not a dtype the predictors know
        rows["dtype"] = frame["gemm_dtype"].map(lambda d: "fp8" if d == "fp8_block" else d).astype(str)
    return rows


def matched_kernels(table: str, engine: pd.DataFrame, vllm: pd.DataFrame) -> pd.DataFrame:
    """Engine rows of ``table`` (a key of :data:`TABLE_FAMILIES`) with vLLM's latency of the same shape, GPU and
    dtype (``fp8_block`` against vLLM's per-tensor fp8): the project's kernel columns (``OPName, B, M, N, K, H,
    Hkv, dtype, kv_dtype``) plus ``system, engine, version, kernel_source, attn_dtype, family, variant, engine_ms,
    vllm_ms``. Rows without a vLLM twin are left out."""
    family = TABLE_FAMILIES[table]
    if family == "tc_gemm":
        keys = ["system", "vdtype", "m", "n", "k"]
        e = engine.assign(vdtype=engine["gemm_dtype"].replace({"fp8_block": "fp8"}))
        v = vllm.rename(columns={"gemm_dtype": "vdtype"})
    else:
        keys = ["system", "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype",
                "step"]
        e = engine
        v = vllm[vllm["attn_dtype"] == "bfloat16"]
        v = v[~v["kernel_source"].str.contains("triton|trtllmdecode|fidecode" if family == "attn_prefill"
                                               else "triton")]
    v = v.drop_duplicates(keys)[[*keys, "latency_ms"]].rename(columns={"latency_ms": "vllm_ms"})
    joined = e.merge(v, on=keys, how="inner")
    rows = _kernel_rows(table, joined)
    out = rows.assign(system=joined["system"].to_numpy(), engine=joined["framework"].to_numpy(),
                      version=joined["version"].to_numpy(), kernel_source=joined["kernel_source"].to_numpy(),
                      attn_dtype=joined["attn_dtype"].to_numpy() if "attn_dtype" in joined else "",
                      family=family, engine_ms=joined["latency_ms"].to_numpy(float),
                      vllm_ms=joined["vllm_ms"].to_numpy(float))
    raw = joined["gemm_dtype"] if family == "tc_gemm" else joined["kv_cache_dtype"]
    out["variant"] = raw.map(_VARIANTS).to_numpy()
    return out.reset_index(drop=True)


def default_kernels(matched: pd.DataFrame) -> pd.DataFrame:
    """The rows of each engine's default kernel: per (engine, GPU, family, variant) the ``kernel_source`` with the
    most rows (the library the engine's table measures on the full grid), and within it bf16 queries where it has
    them (fp8 FMHA only where the library runs an fp8 KV cache no other way)."""
    keys = ["engine", "system", "family", "variant"]
    counts = matched.groupby([*keys, "kernel_source"], sort=True).size().rename("n").reset_index()
    best = counts.sort_values("n", kind="stable").groupby(keys).tail(1)[[*keys, "kernel_source"]]
    rows = matched.merge(best, on=[*keys, "kernel_source"])
    attn = rows.groupby(keys)["attn_dtype"].agg(lambda a: "bfloat16" if (a == "bfloat16").any() else a.iloc[0])
    return rows.merge(attn.rename("chosen").reset_index(), on=keys).query("attn_dtype == chosen").drop(
        columns="chosen").reset_index(drop=True)


def with_cells(matched: pd.DataFrame) -> pd.DataFrame:
    """``matched`` plus ``generation``, ``library``, ``regime`` and ``log_ratio`` (log engine / vLLM)."""
    gens = {s: kernel_generation(get_gpu(s)) for s in matched["system"].unique()}
    out = matched.assign(generation=matched["system"].map(gens), log_ratio=np.log(matched["engine_ms"]
                                                                                  / matched["vllm_ms"]))
    pairs = out[["family", "generation"]].drop_duplicates()
    classes = {(f, g): library_class(f, g) for f, g in pairs.itertuples(index=False, name=None)}
    out["library"] = pd.MultiIndex.from_frame(out[["family", "generation"]]).map(classes.get)
    out["regime"] = ""
    for fam, idx in out.groupby("family").groups.items():
        out.loc[idx, "regime"] = regime_keys(str(fam), out.loc[idx])
    return out


#: the cell of a factor: engine, family, variant, kernel-library class (then regime)
CELL = ["engine", "family", "variant", "library"]


def fit_factor_table(cells: pd.DataFrame) -> pd.DataFrame:
    """The factor table: one row per (engine, family, variant, generation, regime) with ``log_factor`` (median
    over GPUs of each GPU's median log ratio) and ``gpus`` (how many GPUs measured it); a regime key ``*`` per
    cell holds the median over its regimes, for regimes its GPUs never measured. ``cells`` is
    :func:`with_cells` of the default kernels."""
    per_gpu = cells.groupby([*CELL, "regime", "system"], sort=True)["log_ratio"].median()
    table = per_gpu.groupby([*CELL, "regime"]).agg(["median", "size"]).rename(
        columns={"median": "log_factor", "size": "gpus"}).reset_index()
    whole = table.groupby(CELL)["log_factor"].median().rename("log_factor").reset_index()
    whole = whole.assign(regime="*", gpus=table.groupby(CELL)["gpus"].max().to_numpy())
    return pd.concat([table, whole], ignore_index=True).sort_values([*CELL, "regime"]).reset_index(drop=True)
