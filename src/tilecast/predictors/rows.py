"""The kernel rows each family is trained and evaluated on (read through :mod:`tilecast.data`).

Training rows come from the five training GPUs only: the random shapes of ``kernels/train`` plus
the model-like shapes of ``kernels/test`` measured on those GPUs (``Source`` = ``train`` or
``test``). ``kernels/train_processed`` is a subset of ``kernels/train`` (its large shapes) and adds
nothing. No row of an unseen GPU is ever returned by :func:`training_rows`.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from tilecast.data import load_kernels
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FAMILIES, family_of

#: catalog keys of the GPUs predictors are trained on
TRAINING_GPUS = ("tesla_p4", "tesla_p100_pcie_16gb", "tesla_t4", "tesla_v100_pcie_32gb", "a100_pcie_40gb")
#: public GPUs never trained on (evaluation only)
UNSEEN_GPUS = ("l4", "a100_pcie_80gb")

#: train tables (``kernels/train/<name>``) and the test table (``kernels/test/<name>``) of each family
_TRAIN_TABLES: dict[str, tuple[str, ...]] = {
    "bmm": ("bmm",),
    "linear": ("linear",),
    "elementwise": ("add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "tanh", "gelu", "relu"),
    "softmax": ("softmax",),
    "layernorm": ("ln",),
}
_TEST_TABLE = {"bmm": "bmm", "linear": "linear", "elementwise": "elem", "softmax": "softmax", "layernorm": "ln"}


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"unknown kernel family {family!r}; known: {', '.join(FAMILIES)}")


def device_names(gpus: Iterable[str]) -> list[str]:
    """Device names (as in the data) of GPUs given by catalog key or device name."""
    return [get_gpu(g).device_name for g in gpus]


def _of_family(rows: pd.DataFrame, family: str) -> pd.DataFrame:
    fam = rows["OPName"].astype(str).map(family_of)
    return rows.loc[(fam == family).to_numpy()]


def training_rows(family: str, gpus: Iterable[str] = TRAINING_GPUS) -> pd.DataFrame:
    """Rows ``family`` is trained on: train + test tables of ``gpus`` (never an unseen GPU).

    A ``Source`` column says which table each row comes from. Rows with a non-positive latency are
    dropped.
    """
    _check_family(family)
    devices = device_names(gpus)
    unseen = set(device_names(UNSEEN_GPUS)) & set(devices)
    if unseen:
        raise ValueError(f"refusing to train on unseen GPU rows: {', '.join(sorted(unseen))}")
    parts = [load_kernels("train", t).assign(Source="train") for t in _TRAIN_TABLES[family]]
    parts.append(load_kernels("test", _TEST_TABLE[family]).assign(Source="test"))
    rows = pd.concat(parts, ignore_index=True, sort=False)
    rows = rows.loc[rows["Device"].isin(devices).to_numpy() & (rows["Latency"] > 0).to_numpy()]
    return _of_family(rows, family).reset_index(drop=True)


def evaluation_rows(family: str, devices: Iterable[str] = UNSEEN_GPUS) -> pd.DataFrame:
    """Test rows (model-like shapes) of ``family`` measured on ``devices`` (keys or device names)."""
    _check_family(family)
    names = device_names(devices)
    rows = load_kernels("test", _TEST_TABLE[family]).assign(Source="test")
    rows = rows.loc[rows["Device"].isin(names).to_numpy() & (rows["Latency"] > 0).to_numpy()]
    return _of_family(rows, family).reset_index(drop=True)
