"""Inputs of GEMM tile choice for a GPU without profiles: shape, SM count, vendor and kernel generation.

cuBLAS ships one kernel library per architecture and picks a kernel from the problem shape and the
SM count (wave quantisation); rocBLAS (Tensile) does the same on AMD. Tile choice for an unseen GPU
therefore reads the shape, ``num_sm``, the vendor (whose BLAS library) and the architecture generation
(the newest training architecture stands in for newer ones).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.specs import GpuSpec, get_gpu

#: compute-capability-like ordinal of each architecture (kernel libraries follow it)
ARCH_GENERATION: dict[str, float] = {
    "maxwell": 5.0, "pascal": 6.0, "volta": 7.0, "turing": 7.5, "ampere": 8.0, "ada": 8.9, "hopper": 9.0,
    "blackwell": 10.0,
    "cdna1": 1.0, "cdna2": 2.0, "cdna3": 3.0,  # AMD (compared only with AMD libraries: gfx908, gfx90a, gfx942)
}
#: generation assumed for an architecture missing above (future NVIDIA), and for a GPU whose vendor has no
#: library among the training GPUs (an AMD GPU with NVIDIA-only training: the A100's library, as before)
DEFAULT_GENERATION = 8.0


def generation(arch: str) -> float:
    """Generation ordinal of an architecture name (``DEFAULT_GENERATION`` when unknown)."""
    return ARCH_GENERATION.get(str(arch).lower(), DEFAULT_GENERATION)


def row_gpu_columns(rows: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame:
    """``num_sm``, ``generation`` and ``vendor`` of each row's GPU (``gpu`` or the row's ``Device``)."""
    if gpu is not None:
        specs = {"": gpu}  # one key for every row
        dev = pd.Series("", index=rows.index, dtype=object)
    else:
        specs = {d: get_gpu(str(d)) for d in pd.unique(rows["Device"])}
        dev = rows["Device"].astype(object)
    return pd.DataFrame({"num_sm": dev.map({d: float(s.num_sm) for d, s in specs.items()}).to_numpy(float),
                         "generation": dev.map({d: generation(s.architecture) for d, s in specs.items()})
                         .to_numpy(float),
                         "vendor": dev.map({d: s.vendor for d, s in specs.items()}).to_numpy(object)},
                        index=rows.index)


def choice_features(rows: pd.DataFrame, gpu_cols: pd.DataFrame) -> pd.DataFrame:
    """Features a tile chooser reads: log2 dims, alignments, SM count, generation, 128x128 waves."""
    b, m, n, k = (pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=float) for c in ("B", "M", "N", "K"))
    sm = gpu_cols["num_sm"].to_numpy(dtype=float)
    return pd.DataFrame({
        "log_b": np.log2(b), "log_m": np.log2(m), "log_n": np.log2(n), "log_k": np.log2(k),
        "m_mod4": (m % 4 == 0) * 1.0, "n_mod4": (n % 4 == 0) * 1.0, "k_mod4": (k % 4 == 0) * 1.0,
        "log_num_sm": np.log2(sm), "generation": gpu_cols["generation"].to_numpy(dtype=float),
        "log_tiles128_per_sm": np.log2(b * np.ceil(k / 128.0) * np.ceil(m / 128.0) / sm),
        "log_n_over_mk": np.log2(n * n / (m * k)),
    }, index=rows.index)


def reference_nn_columns(rows: pd.DataFrame, spec: pd.DataFrame) -> np.ndarray:
    """The reference's raw, un-normalised nearest-neighbour space: ``B, M, N, K`` + spec values."""
    dims = rows[["B", "M", "N", "K"]].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    sp = spec[["fp32_gflops", "mem_bw_gbs", "num_sm", "mem_gb", "l2_mb"]].to_numpy(dtype=float)
    return np.c_[dims, sp]
