"""MLP predictor (PyTorch, CPU): a utilisation head applied to the roofline.

The network reads the standardised device-agnostic features and outputs ``(g, a)``;
``util = sigmoid(g) * (1 - sigmoid(a) / W)`` with W the waves: in (0, 1), so the prediction
``roofline / util`` is never faster than the roofline, and the tail term fades with more waves
(the reference's ``sigmoid(g) - sigmoid(a) / W`` can reach 0 or below; this form cannot). Trained
with an L1 loss on log latency (relative error, symmetric in over/under-prediction). Inputs are
clipped to the training range at prediction time: like the trees, the network does not
extrapolate past the five training GPUs (a faster GPU's per-SM times fall outside the range).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from tilecast.predictors.base import register
from tilecast.predictors.bounds import bounded_ms, fit_launch_floor_ms
from tilecast.predictors.design import (
    GEMM_FAMILIES,
    design_matrix,
    fit_params,
    make_chooser,
    predictor_defaults,
    row_weights,
    training_tiles,
)
from tilecast.predictors.format import read_predictor_meta, write_predictor_meta
from tilecast.predictors.tile_choice import TileChooser, load_chooser_in, save_chooser_in
from tilecast.specs import GpuSpec

MODEL_FILE = "model.pt"
#: ``format_version`` written to ``meta.json``, and the versions :meth:`MLPPredictor.load` reads
FORMAT_VERSION = 1
SUPPORTED_FORMATS = (1,)
_V1_KEYS = ("name", "family", "columns", "mean", "std", "floor_ms", "params")  # the unversioned first layout

#: the defaults: ``conf/predictor/mlp.yaml`` (one source for jobs, benchmarks and tests)
DEFAULTS: dict[str, Any] = predictor_defaults("mlp")
_MIN_UTIL = 1e-4


class UtilisationNet(nn.Module):
    """MLP -> (g, a) -> ``util = sigmoid(g) * (1 - sigmoid(a) / waves)``."""

    def __init__(self, n_in: int, hidden: int, layers: int) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        width = n_in
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.SiLU()]
            width = hidden
        blocks.append(nn.Linear(width, 2))
        self.body = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor, waves: torch.Tensor) -> torch.Tensor:
        g, a = self.body(x).unbind(-1)
        util = torch.sigmoid(g) * (1.0 - torch.sigmoid(a) / waves)
        return util.clamp_min(_MIN_UTIL)


@register
class MLPPredictor:
    """Per-family utilisation MLP on the roofline."""

    name = "mlp"

    def __init__(self, family: str, net: UtilisationNet, columns: list[str], mean: np.ndarray, std: np.ndarray,
                 floor_ms: float, params: dict[str, Any], chooser: TileChooser | None = None,
                 fit_s: float = 0.0, lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> None:
        self.family, self.net, self.columns = family, net, list(columns)
        self.mean, self.std = np.asarray(mean, dtype=np.float32), np.asarray(std, dtype=np.float32)
        self.lo = np.full(len(self.columns), -np.inf, np.float32) if lo is None else np.asarray(lo, np.float32)
        self.hi = np.full(len(self.columns), np.inf, np.float32) if hi is None else np.asarray(hi, np.float32)
        self.floor_ms, self.params, self.chooser, self.fit_s = float(floor_ms), dict(params), chooser, fit_s

    @classmethod
    def fit(cls, family: str, rows: pd.DataFrame, **params: Any) -> MLPPredictor:
        """Fit on ``rows`` (kernel schema with ``Latency``) with AdamW and a cosine learning rate."""
        p = fit_params("mlp", family, DEFAULTS, params)
        t0 = time.perf_counter()
        threads_before = torch.get_num_threads()
        torch.set_num_threads(int(p["threads"]))
        gen = torch.Generator().manual_seed(int(p["seed"]))
        torch.manual_seed(int(p["seed"]))
        chooser = make_chooser(family, rows, p["tile_chooser"])
        x, roof = design_matrix(family, rows, tiles=training_tiles(family, rows, chooser))
        feats = x[p["features"]].to_numpy(dtype=np.float32)
        mean, std = feats.mean(0), feats.std(0) + 1e-6
        lo, hi = feats.min(0), feats.max(0)
        xt = torch.from_numpy((feats - mean) / std)
        waves = torch.from_numpy(np.exp2(x["log_waves"].to_numpy(dtype=np.float32)))
        lat = pd.to_numeric(rows["Latency"], errors="coerce").to_numpy(dtype=np.float64)
        target = torch.from_numpy(np.log(lat / roof).astype(np.float32))  # log(1 / util)
        weight = torch.from_numpy(row_weights(rows, p["test_row_weight"]).astype(np.float32))
        net = UtilisationNet(xt.shape[1], int(p["hidden"]), int(p["layers"]))
        opt = torch.optim.AdamW(net.parameters(), lr=float(p["lr"]), weight_decay=float(p["weight_decay"]))
        n, bs = len(xt), int(p["batch_size"])
        steps = max(1, int(p["epochs"]) * ((n + bs - 1) // bs))
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=float(p["lr"]), total_steps=steps)
        net.train()
        for _ in range(int(p["epochs"])):
            order = torch.randperm(n, generator=gen)
            for i in range(0, n, bs):
                idx = order[i:i + bs]
                loss_rows = (-torch.log(net(xt[idx], waves[idx])) - target[idx]).abs()
                loss = (loss_rows * weight[idx]).sum() / weight[idx].sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        net.eval()
        torch.set_num_threads(threads_before)
        return cls(family, net, p["features"], mean, std, fit_launch_floor_ms(rows), p, chooser,
                   time.perf_counter() - t0, lo, hi)

    def predict_ms(self, rows: pd.DataFrame, gpu: GpuSpec | None = None) -> np.ndarray:
        """Latency (ms) of each row on ``gpu`` (or its ``Device``): ``roofline / util``."""
        if len(rows) == 0:
            return np.zeros(0)
        tiles = self.chooser.choose(rows, gpu) if self.family in GEMM_FAMILIES else None
        x, roof = design_matrix(self.family, rows, gpu, tiles)
        raw = np.clip(x[self.columns].to_numpy(dtype=np.float32), self.lo, self.hi)  # no extrapolation
        feats = (raw - self.mean) / self.std
        waves = np.exp2(x["log_waves"].to_numpy(dtype=np.float32))
        with torch.no_grad():
            util = self.net(torch.from_numpy(feats), torch.from_numpy(waves)).numpy().astype(float)
        return bounded_ms(roof / util, roof, self.floor_ms)

    def save(self, directory: Path) -> None:
        """Write ``model.pt`` (state dict), the tile chooser and ``meta.json``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.net.state_dict(), directory / MODEL_FILE)
        save_chooser_in(directory, self.chooser)
        write_predictor_meta(directory, {"name": self.name, "family": self.family, "columns": self.columns,
                                         "mean": self.mean.tolist(), "std": self.std.tolist(), "lo": self.lo.tolist(),
                                         "hi": self.hi.tolist(), "floor_ms": self.floor_ms, "params": self.params,
                                         "fit_s": self.fit_s, "torch": torch.__version__}, FORMAT_VERSION)

    @classmethod
    def load(cls, directory: Path) -> MLPPredictor:
        """Rebuild from :meth:`save`'s files (an unreadable format raises ``ModelFormatError``)."""
        directory = Path(directory)
        meta = read_predictor_meta(directory, cls.name, SUPPORTED_FORMATS, _V1_KEYS)
        p = meta["params"]
        net = UtilisationNet(len(meta["columns"]), int(p["hidden"]), int(p["layers"]))
        net.load_state_dict(torch.load(directory / MODEL_FILE, weights_only=True))
        net.eval()
        lo, hi = (np.array(meta[k]) if k in meta else None for k in ("lo", "hi"))  # absent: no clipping
        return cls(meta["family"], net, meta["columns"], np.array(meta["mean"]), np.array(meta["std"]),
                   meta["floor_ms"], p, load_chooser_in(directory), meta.get("fit_s", 0.0), lo, hi)
