"""Design matrices of learned predictors: features, roofline and the learned target of kernel rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.predictors.tile_choice import TileChooser, fit_chooser, valid_profiled
from tilecast.specs import GpuSpec
from tilecast.tiles.features import FEATURE_BUILDERS, default_features
from tilecast.tiles.ops import GEMM_OPS
from tilecast.tiles.roofline import kernel_flops_bytes, roofline_ms, spec_frame

GEMM_FAMILIES = frozenset(GEMM_OPS)


def predictor_defaults(name: str) -> dict[str, Any]:
    """The ``params`` of ``conf/predictor/<name>.yaml``: the one source of a learned predictor's defaults.

    ``jobs/train.py`` composes the same file through Hydra (so ``predictor.params.rounds=200`` overrides a
    listed key) and :func:`fit_predictor` with no parameters reads it here, so a benchmark and a registered
    model are the same model unless a parameter is overridden on purpose."""
    import yaml

    from tilecast.paths import CONF_DIR

    path = CONF_DIR / "predictor" / f"{name}.yaml"
    params = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("params")
    if not isinstance(params, dict) or not params:
        raise UserError(f"{path}: no 'params' mapping (the defaults of predictor {name!r})")
    return dict(params)


def fit_params(predictor: str, family: str, defaults: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` updated with ``params`` (an unknown name is an error listing the known ones), with the
    family's default feature columns when ``features`` is None."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise UserError(f"unknown {predictor} parameter {unknown[0]!r}; known: {', '.join(defaults)}")
    for key, value in params.items():  # a positive numeric default admits only positive numbers of its kind
        default = defaults[key]
        if isinstance(default, bool) or not isinstance(default, int | float) or default <= 0:
            continue
        kind = int if isinstance(default, int) else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
            what = "a positive integer" if kind is int else "a positive number"
            raise UserError(f"{predictor} parameter {key}={value!r} must be {what} (default {default!r})")
    p = {**defaults, **params}
    p["features"] = list(p["features"] or default_features(family))
    return p


def design_matrix(family: str, rows: pd.DataFrame, gpu: GpuSpec | None = None,
                  tiles: pd.DataFrame | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """Feature frame and roofline time (ms) of ``rows``; GEMM families need ``tiles``."""
    if family in GEMM_FAMILIES and tiles is None:
        raise ValueError(f"{family}: GEMM features need tiles (tile_k, tile_m, split, sliced)")
    spec = spec_frame(rows, gpu)
    roof = roofline_ms(rows, gpu)
    flops, nbytes = kernel_flops_bytes(rows)
    return FEATURE_BUILDERS[family](rows, spec, tiles, roof, flops, nbytes), roof


def training_tiles(family: str, rows: pd.DataFrame, chooser: TileChooser | None) -> pd.DataFrame | None:
    """Tiles of training rows: profiled where the kernel name has one, else the chooser's."""
    if family not in GEMM_FAMILIES:
        return None
    tiles = chooser.choose(rows) if chooser is not None else None
    _, prof = valid_profiled(rows)
    if tiles is None:
        if len(prof) != len(rows):
            raise ValueError(f"{family}: {len(rows) - len(prof)} rows have no tile in 'Kernel Name'")
        return prof
    tiles.loc[prof.index, list(prof.columns)] = prof
    return tiles


_CHOOSERS: dict[tuple, TileChooser] = {}
_CHOOSER_CACHE_SIZE = 8


def make_chooser(family: str, rows: pd.DataFrame, name: str, **params: Any) -> TileChooser | None:
    """Fit the tile chooser of a GEMM family (None for vector families).

    Fitted choosers are reused for identical rows and parameters (the mlp and xgboost predictors of
    a family share one), so a benchmark fits each chooser once.
    """
    if family not in GEMM_FAMILIES:
        return None
    cols = [c for c in ("B", "M", "N", "K", "Device", "Kernel Name", "Grid x", "Grid y", "Grid z", "Source")
            if c in rows]
    key = (family, name, len(rows), int(pd.util.hash_pandas_object(rows[cols], index=True).sum()),
           tuple(sorted(params.items())))
    if key not in _CHOOSERS:
        if len(_CHOOSERS) >= _CHOOSER_CACHE_SIZE:
            _CHOOSERS.pop(next(iter(_CHOOSERS)))
        _CHOOSERS[key] = fit_chooser(name, rows, **params)
    return _CHOOSERS[key]


def log_ratio_target(rows: pd.DataFrame, roof_ms: np.ndarray) -> np.ndarray:
    """Learned target: ``log(latency / roofline)``, clipped at 0 (predictions never beat the roofline)."""
    lat = pd.to_numeric(rows["Latency"], errors="coerce").to_numpy(dtype=float)
    return np.maximum(np.log(lat / roof_ms), 0.0)


def row_weights(rows: pd.DataFrame, test_row_weight: float) -> np.ndarray:
    """Sample weights: model-like test-shape rows (``Source == 'test'``) count ``test_row_weight`` times."""
    if "Source" not in rows:
        return np.ones(len(rows))
    return np.where(rows["Source"].astype(str).to_numpy() == "test", float(test_row_weight), 1.0)
