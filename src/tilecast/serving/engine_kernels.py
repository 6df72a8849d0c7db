"""Kernel times as a serving engine runs them: the project's predictors times the engine's kernel factors.

The project's ``tc_gemm``, ``attn_prefill`` and ``attn_decode`` predictors learn AIConfigurator's vLLM-harness
tables, so under vLLM a kernel's forecast is the predictor's (factor 1). SGLang and TRT-LLM call other kernel
libraries for some of the same operations (CUTLASS, DeepGEMM, TRT-LLM's own GEMMs, FMHA and XQA, FlashInfer):
:func:`engine_family_predictor` multiplies each row's forecast by ``exp(log_factor)`` of its (engine, family,
variant, kernel-library class, shape regime) cell, fitted on the engines' measured kernels against vLLM's on the same
shapes (:mod:`tilecast.serving.engine_kernel_fit`; docs/method.md §20). A row gets factor 1 when no factor
applies: other families (vector ops), bmm and fp4 / tf32 GEMMs, or a GPU whose kernel-library class no measured
GPU shares (Hopper, AMD): the data cannot say how the engine differs there, and leave one GPU out, factor 1 on
such a GPU beat borrowing the other classes' factors (``benchmarks/engine_kernels.md``).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from tilecast.forecast.kernels import FamilyPredictor
from tilecast.serving.engine_kernel_fit import (
    CELL,
    FACTOR_FAMILIES,
    TABLE_FAMILIES,
    VLLM_TABLES,
    default_kernels,
    fit_factor_table,
    kernel_generation,
    library_class,
    matched_kernels,
    regime_keys,
    variants,
    with_cells,
)
from tilecast.serving.engines import HARNESS_ENGINE, check_engine, resolve_version
from tilecast.specs import GpuSpec, get_gpu

#: how an engine runs fp8 GEMMs: ``tensor`` (per-tensor scales, the fp8 of the project's tables) or ``block``
#: (128-element block scales: DeepGEMM on datacenter Blackwell)
FP8_SCALINGS = ("tensor", "block")


class FactorTable:
    """Fitted engine kernel factors: lookups of ``log_factor`` by cell and regime, 0 where none was fitted."""

    def __init__(self, table: pd.DataFrame) -> None:
        self.table = table.reset_index(drop=True)
        keyed = self.table.set_index([*CELL, "regime"])["log_factor"]
        self._exact = keyed[~keyed.index.duplicated()]

    def log_factors_frame(self, rows: pd.DataFrame, default: float = 0.0) -> np.ndarray:
        """Per row of a frame with the ``CELL`` columns and ``regime``: the cell's regime factor, else the
        cell's ``*`` factor, else ``default`` (a cell never fitted, or a None variant / generation)."""
        if rows.empty:
            return np.zeros(0)
        keys = rows[[*CELL, "regime"]].astype(object)
        exact = self._exact.reindex(pd.MultiIndex.from_frame(keys)).to_numpy(float)
        whole = self._exact.reindex(pd.MultiIndex.from_frame(keys.assign(regime="*"))).to_numpy(float)
        out = np.where(np.isnan(exact), whole, exact)
        return np.where(np.isnan(out), default, out)

    def log_factors(self, engine: str, family: str, variant: np.ndarray, library: np.ndarray,
                    regime: np.ndarray) -> np.ndarray:
        """Per row: the cell's regime factor, else the cell's ``*`` factor, else 0 (identity)."""
        frame = pd.DataFrame({"engine": engine, "family": family, "variant": variant, "library": library,
                              "regime": regime})
        return self.log_factors_frame(frame)


def fit_factors(engine_tables: dict[str, pd.DataFrame], vllm_tables: dict[str, pd.DataFrame]) -> FactorTable:
    """A :class:`FactorTable` from engine tables (keys of ``TABLE_FAMILIES``) and the vLLM tables they match."""
    matched = [matched_kernels(t, engine_tables[t], vllm_tables[VLLM_TABLES[t]]) for t in TABLE_FAMILIES
               if t in engine_tables]
    return FactorTable(fit_factor_table(with_cells(default_kernels(pd.concat(matched, ignore_index=True)))))


@functools.cache
def shipped_factors() -> FactorTable:
    """The factors fitted on the shipped tables (``data/aiconfigurator_engines`` against ``data/aiconfigurator``),
    once per process."""
    from tilecast.data import load_aiconfigurator, load_aiconfigurator_engines

    engines = {t: load_aiconfigurator_engines(t) for t in TABLE_FAMILIES}
    vllm = {v: load_aiconfigurator(v) for v in VLLM_TABLES.values()}
    return fit_factors(engines, vllm)


def _libraries(family: str, rows: pd.DataFrame, gpu: GpuSpec | None) -> np.ndarray:
    """Each row's kernel-library class from its GPU (``gpu``, else its ``Device``)."""
    if gpu is not None:
        return np.full(len(rows), library_class(family, kernel_generation(gpu)), dtype=object)
    if "Device" not in rows:
        raise ValueError("kernel rows name no GPU (no Device column) and no gpu was given")
    names = rows["Device"].astype(str)
    libs = {n: library_class(family, kernel_generation(get_gpu(n))) for n in pd.unique(names)}
    return names.map(libs).to_numpy(dtype=object)


def engine_log_factors(engine: str, family: str, rows: pd.DataFrame, gpu: GpuSpec | None = None,
                       factors: FactorTable | None = None, fp8_scaling: str = "tensor") -> np.ndarray:
    """Per kernel row of ``family``: log(engine time / vLLM time) as the factor table has it (0 for vLLM and
    wherever no factor applies). ``gpu`` None reads each row's ``Device``."""
    name = check_engine(engine)
    if fp8_scaling not in FP8_SCALINGS:
        raise ValueError(f"unknown fp8 scaling {fp8_scaling!r}; known: {', '.join(FP8_SCALINGS)}")
    if name == HARNESS_ENGINE or family not in FACTOR_FAMILIES or rows.empty:
        return np.zeros(len(rows))
    table = shipped_factors() if factors is None else factors
    return table.log_factors(name, family, variants(family, rows, fp8_scaling == "block"),
                             _libraries(family, rows, gpu), regime_keys(family, rows))


def engine_family_predictor(predict: FamilyPredictor, engine: str, version: str | None = None, *,
                            factors: FactorTable | None = None, fp8_scaling: str = "tensor") -> FamilyPredictor:
    """``predict`` (a :data:`FamilyPredictor` trained on the vLLM-harness tables) as ``engine`` runs the kernels.

    ``engine`` is one of :data:`tilecast.serving.engines.ENGINES` (``vllm``, ``sglang``, ``trtllm``) and
    ``version`` one of its releases (None: the newest measured; see :func:`resolve_version`); an unknown one is
    an :class:`UnknownEngineError` / :class:`UnknownEngineVersionError` naming the known ones. ``vllm`` returns
    ``predict`` itself. ``fp8_scaling="block"`` prices fp8 GEMMs as block-scaled (DeepGEMM); ``factors``
    replaces the shipped factor table (tests, leave-one-GPU-out).
    """
    name = check_engine(engine)
    resolve_version(name, version)
    if fp8_scaling not in FP8_SCALINGS:
        raise ValueError(f"unknown fp8 scaling {fp8_scaling!r}; known: {', '.join(FP8_SCALINGS)}")
    if name == HARNESS_ENGINE:
        return predict

    def engine_predict(family: str, rows: pd.DataFrame, gpu: GpuSpec | None) -> np.ndarray:
        base = np.asarray(predict(family, rows, gpu), dtype=float)
        if family not in FACTOR_FAMILIES:
            return base
        return base * np.exp(engine_log_factors(name, family, rows, gpu, factors, fp8_scaling))

    engine_predict.engine = name  # type: ignore[attr-defined]
    return engine_predict
