"""GEMM tile choice for GPUs without profiles: ``choose(rows, gpu) -> tile_k, tile_m, split, sliced``.

- ``nearest``: the reference (docs/method.md §6): tile of the nearest training row in raw, un-normalised
  ``(B, M, N, K, specs)`` space; split-K ignored.
- ``learned``: per training GPU, a boosted-tree classifier of the tile and a regressor of the split-K
  factor on the shape and SM count (:mod:`tilecast.tiles.choice`); a GPU without profiles uses the
  models of the training GPU of its vendor with the nearest kernel generation (its cuBLAS / rocBLAS
  library).
- ``fixed``: 128x128, no split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import xgboost as xgb
from scipy.spatial import cKDTree

from tilecast.errors import UserError
from tilecast.predictors.format import ModelFormatError, read_meta, write_meta
from tilecast.specs import GpuSpec
from tilecast.tiles.choice import DEFAULT_GENERATION, choice_features, reference_nn_columns, row_gpu_columns
from tilecast.tiles.gemm import DEFAULT_TILE, profiled_tiles
from tilecast.tiles.roofline import spec_frame

TILE_COLUMNS = ("tile_k", "tile_m", "split", "sliced")
META_FILE = "chooser.json"
#: ``format_version`` written to ``chooser.json``, and the versions :func:`load_chooser` reads
FORMAT_VERSION = 1
SUPPORTED_FORMATS = (1,)


class TileChooser(Protocol):
    name: str

    def choose(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame: ...
    def save(self, directory: Path) -> None: ...


def valid_profiled(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows whose kernel name carries a tile, and their profiled tiles."""
    tiles = profiled_tiles(rows)
    ok = tiles[list(TILE_COLUMNS)].notna().all(axis=1).to_numpy()
    return rows.loc[ok], tiles.loc[ok]


def _frame(index: pd.Index, tk: np.ndarray, tm: np.ndarray, split: np.ndarray, sliced: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"tile_k": tk, "tile_m": tm, "split": split, "sliced": sliced}, index=index)


class FixedTileChooser:
    """Every GEMM gets the same tile (default 128x128) and no split."""

    name = "fixed"
    v1_keys = ("name", "tile_k", "tile_m")  # keys of the unversioned first layout

    def __init__(self, tile_k: float = DEFAULT_TILE[0], tile_m: float = DEFAULT_TILE[1]) -> None:
        self.tile_k, self.tile_m = float(tile_k), float(tile_m)

    @classmethod
    def fit(cls, rows: pd.DataFrame, **_: Any) -> FixedTileChooser:
        return cls()

    def choose(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame:
        n = len(rows)
        return _frame(rows.index, np.full(n, self.tile_k), np.full(n, self.tile_m), np.ones(n), np.zeros(n))

    def save(self, directory: Path) -> None:
        _write_meta(directory, {"name": self.name, "tile_k": self.tile_k, "tile_m": self.tile_m})

    @classmethod
    def load(cls, directory: Path) -> FixedTileChooser:
        meta = _read_meta(directory, cls.v1_keys)
        return cls(meta["tile_k"], meta["tile_m"])


class NearestTileChooser:
    """The reference: tile of the nearest profiled row in raw ``(B, M, N, K, specs)`` space, no split."""

    name = "nearest"
    v1_keys = ("name",)

    def __init__(self, points: np.ndarray, tiles: np.ndarray) -> None:
        self.points, self.tiles = np.asarray(points, float), np.asarray(tiles, float)
        self._tree = cKDTree(self.points)

    @classmethod
    def fit(cls, rows: pd.DataFrame, **_: Any) -> NearestTileChooser:
        rows, tiles = valid_profiled(rows)
        return cls(reference_nn_columns(rows, spec_frame(rows)), tiles[["tile_k", "tile_m", "sliced"]].to_numpy())

    def choose(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame:
        _, idx = self._tree.query(reference_nn_columns(rows, spec_frame(rows, gpu)))
        t = self.tiles[idx]
        return _frame(rows.index, t[:, 0], t[:, 1], np.ones(len(rows)), t[:, 2])

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(directory / "nearest.npz", points=self.points, tiles=self.tiles)
        _write_meta(directory, {"name": self.name})

    @classmethod
    def load(cls, directory: Path) -> NearestTileChooser:
        _read_meta(directory, cls.v1_keys)
        data = np.load(Path(directory) / "nearest.npz", allow_pickle=False)  # data only, never a pickle
        return cls(data["points"], data["tiles"])


_CHOOSER_XGB = {"max_depth": 5, "eta": 0.25, "subsample": 0.8, "max_bin": 32, "nthread": 1, "seed": 0}
#: features of the per-GPU tile models (SM count and generation are constant within one GPU)
_SHAPE_FEATURES = ["log_b", "log_m", "log_n", "log_k", "m_mod4", "n_mod4", "k_mod4", "log_tiles128_per_sm",
                   "log_n_over_mk"]


@dataclass
class _GpuTileModel:
    """Tile classifier and split-K regressor of one training GPU's kernel library."""

    device: str
    generation: float
    num_sm: float
    classes: list[str]
    tile_model: xgb.Booster
    split_model: xgb.Booster | None
    shapes: np.ndarray  # (n, 4) profiled B, M, N, K of this GPU
    tiles: np.ndarray  # (n, 4) their tile_k, tile_m, split, sliced
    vendor: str = "nvidia"  # whose BLAS library (choosers saved before AMD rows trained are NVIDIA's)

    def predict(self, x: pd.DataFrame, dims: np.ndarray, same_gpu: bool) -> np.ndarray:
        """(n, 4) tiles; profiled shapes are copied when the target has this GPU's generation and SMs."""
        d = xgb.DMatrix(x[_SHAPE_FEATURES])
        label = pd.Series(np.array(self.classes)[self.tile_model.predict(d).astype(int)])
        parts = label.str.rstrip("s").str.split("x", expand=True)
        split = np.ones(len(x)) if self.split_model is None else \
            np.maximum(np.round(2.0 ** self.split_model.predict(d)), 1.0)
        out = np.column_stack([parts[0].astype(float).to_numpy(), parts[1].astype(float).to_numpy(), split,
                               label.str.endswith("s").to_numpy(dtype=float)])
        if same_gpu and len(self.shapes):
            known = pd.DataFrame(self.shapes).drop_duplicates(keep="last")
            pos = pd.MultiIndex.from_frame(known).get_indexer(pd.MultiIndex.from_arrays(dims.T))
            hit = pos >= 0
            out[hit] = self.tiles[known.index.to_numpy()[pos[hit]]]
        return out


class LearnedTileChooser:
    """Per-GPU tile models; a new GPU uses the one of its vendor and the nearest kernel generation.

    cuBLAS (rocBLAS on AMD) ships one kernel library per architecture, so a GPU's tiles are predicted by
    the tile classifier (``<tk>x<tm>[s]``) and split-K regressor learnt on the training GPU of the same
    vendor and the nearest generation (ties: the newer one, then the closer SM count), reading the shape
    and the target's own SM count (waves of 128x128 tiles). A target with the same vendor, generation and
    SM count as that GPU runs the same heuristic on the same library: its profiled shapes are copied. An
    A100-80GB gets the A100-40GB's library and profiles, an L4 or H100 the A100's classifier, an MI250 the
    MI210's; a vendor no training GPU has takes the library of :data:`DEFAULT_GENERATION` (an AMD GPU
    with NVIDIA-only training: the A100's). Split-K is predicted, not ignored.
    """

    name = "learned"
    v1_keys = ("name", "models", "params")

    def __init__(self, models: list[_GpuTileModel], params: dict[str, Any]) -> None:
        self.models, self.params = models, params

    @classmethod
    def fit(cls, rows: pd.DataFrame, rounds: int = 30, test_row_weight: float = 5.0, max_rows: int = 15_000,
            seed: int = 0, **_: Any) -> LearnedTileChooser:
        """Fit one model per GPU of ``rows``: its test-shape rows plus at most ``max_rows`` others."""
        rows, tiles = valid_profiled(rows)
        gpu_cols = row_gpu_columns(rows)
        models = []
        for device in sorted(rows["Device"].astype(str).unique()):
            mine = rows.index[(rows["Device"].astype(str) == device).to_numpy()]
            keep = _subsample(rows.loc[mine], max_rows, seed)
            r, t, g = rows.loc[keep], tiles.loc[keep], gpu_cols.loc[keep]
            x = choice_features(r, g)[_SHAPE_FEATURES]
            weight = _row_weights(r, test_row_weight)
            labels = (t["tile_k"].astype(int).astype(str) + "x" + t["tile_m"].astype(int).astype(str)
                      + np.where(t["sliced"] > 0, "s", "")).to_numpy()
            classes = sorted(set(labels))
            y = np.searchsorted(np.array(classes), labels)
            params = {**_CHOOSER_XGB, "objective": "multi:softmax", "num_class": max(len(classes), 2)}
            tile_model = xgb.train(params, xgb.DMatrix(x, label=y, weight=weight), rounds)
            log_split = np.log2(t["split"].to_numpy(dtype=float))
            split_model = None
            if log_split.max() > 0:
                split_model = xgb.train({**_CHOOSER_XGB, "objective": "reg:squarederror"},
                                        xgb.DMatrix(x, label=log_split, weight=weight), rounds)
            shapes = rows.loc[mine, ["B", "M", "N", "K"]].to_numpy(dtype=float)
            models.append(_GpuTileModel(device, float(g["generation"].iloc[0]), float(g["num_sm"].iloc[0]),
                                        classes, tile_model, split_model, shapes,
                                        tiles.loc[mine, list(TILE_COLUMNS)].to_numpy(dtype=float),
                                        str(g["vendor"].iloc[0])))
        return cls(models, {"rounds": rounds, "test_row_weight": test_row_weight, "max_rows": max_rows,
                            "seed": seed})

    def library_for(self, generation: float, num_sm: float, vendor: str = "nvidia") -> _GpuTileModel:
        """The training GPU whose kernel library a GPU of ``vendor``, ``generation`` and ``num_sm`` is assumed
        to use: one of its vendor's, else (no training GPU of that vendor) any at :data:`DEFAULT_GENERATION`."""
        models = [m for m in self.models if m.vendor == vendor]
        if not models:
            models, generation = self.models, DEFAULT_GENERATION
        return min(models, key=lambda m: (abs(m.generation - generation), -m.generation,
                                          abs(np.log2(m.num_sm / num_sm))))

    def choose(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame:
        gpu_cols = row_gpu_columns(rows, gpu)
        x = choice_features(rows, gpu_cols)
        dims = rows[["B", "M", "N", "K"]].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
        out = np.zeros((len(rows), 4))
        keys = list(zip(gpu_cols["generation"].to_numpy(), gpu_cols["num_sm"].to_numpy(),
                        gpu_cols["vendor"].to_numpy(), strict=True))
        for key in set(keys):
            mask = np.array([k == key for k in keys])
            lib = self.library_for(*key)
            same = (lib.generation, lib.num_sm, lib.vendor) == key
            out[mask] = lib.predict(x.loc[mask], dims[mask], same)
        return _frame(rows.index, out[:, 0], out[:, 1], out[:, 2], out[:, 3])

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        metas = []
        for i, m in enumerate(self.models):
            m.tile_model.save_model(directory / f"tile_classifier_{i}.json")
            if m.split_model is not None:
                m.split_model.save_model(directory / f"split_regressor_{i}.json")
            np.savez_compressed(directory / f"profiled_{i}.npz", shapes=m.shapes, tiles=m.tiles)
            metas.append({"device": m.device, "generation": m.generation, "num_sm": m.num_sm,
                          "classes": m.classes, "split": m.split_model is not None, "vendor": m.vendor})
        _write_meta(directory, {"name": self.name, "models": metas, "params": self.params})

    @classmethod
    def load(cls, directory: Path) -> LearnedTileChooser:
        directory = Path(directory)
        meta = _read_meta(directory, cls.v1_keys)
        models = []
        for i, m in enumerate(meta["models"]):
            split = xgb.Booster(model_file=str(directory / f"split_regressor_{i}.json")) if m["split"] else None
            prof = np.load(directory / f"profiled_{i}.npz", allow_pickle=False)
            models.append(_GpuTileModel(m["device"], m["generation"], m["num_sm"], m["classes"],
                                        xgb.Booster(model_file=str(directory / f"tile_classifier_{i}.json")), split,
                                        prof["shapes"], prof["tiles"], m.get("vendor", "nvidia")))
        return cls(models, meta["params"])


#: tile choosers by name
TILE_CHOOSERS: dict[str, type] = {c.name: c for c in (FixedTileChooser, NearestTileChooser, LearnedTileChooser)}


def fit_chooser(name: str, rows: pd.DataFrame, **params: Any) -> TileChooser:
    """Fit tile chooser ``name`` on profiled GEMM rows."""
    if name not in TILE_CHOOSERS:
        raise UserError(f"unknown tile chooser {name!r}; known: {', '.join(TILE_CHOOSERS)}")
    return TILE_CHOOSERS[name].fit(rows, **params)


def load_chooser(directory: Path) -> TileChooser:
    """Rebuild a chooser written by its ``save``; an unreadable format raises :class:`ModelFormatError`."""
    name = _read_meta(directory, ("name",)).get("name")
    if name not in TILE_CHOOSERS:
        raise ModelFormatError("tile chooser", Path(directory) / META_FILE, None, SUPPORTED_FORMATS,
                               f"unknown chooser {name!r}; known: {', '.join(TILE_CHOOSERS)}")
    return TILE_CHOOSERS[name].load(directory)


CHOOSER_DIR = "tile_chooser"  # a GEMM predictor's chooser, inside the predictor's directory


def save_chooser_in(directory: Path, chooser: TileChooser | None) -> None:
    """Save ``chooser`` (if any) into ``<directory>/tile_chooser``, where :func:`load_chooser_in` finds it."""
    if chooser is not None:
        chooser.save(Path(directory) / CHOOSER_DIR)


def load_chooser_in(directory: Path) -> TileChooser | None:
    """The chooser saved by :func:`save_chooser_in` into ``directory`` (None when there is none)."""
    path = Path(directory) / CHOOSER_DIR
    return load_chooser(path) if path.exists() else None


def _subsample(rows: pd.DataFrame, max_rows: int, seed: int) -> pd.Index:
    """Labels of all test-shape rows plus at most ``max_rows`` of the others, drawn with ``seed``."""
    is_test = rows["Source"].astype(str).eq("test") if "Source" in rows else pd.Series(False, index=rows.index)
    others = rows.index[~is_test.to_numpy()]
    if len(others) > max_rows:
        others = pd.Index(np.random.default_rng(seed).choice(others, size=max_rows, replace=False))
    return rows.index[is_test.to_numpy()].append(others).sort_values()


def _row_weights(rows: pd.DataFrame, test_row_weight: float) -> np.ndarray:
    if "Source" not in rows:
        return np.ones(len(rows))
    return np.where(rows["Source"].astype(str).to_numpy() == "test", test_row_weight, 1.0)


def _write_meta(directory: Path, meta: dict[str, Any]) -> None:
    write_meta(Path(directory) / META_FILE, meta, FORMAT_VERSION)


def _read_meta(directory: Path, v1_keys: tuple[str, ...]) -> dict[str, Any]:
    return read_meta(Path(directory) / META_FILE, "tile chooser", SUPPORTED_FORMATS, v1_keys)
