"""The kernel rows each family is trained and evaluated on (read through :mod:`tilecast.data`).

fp32 families: training rows come from the five NVIDIA training GPUs (:data:`TRAINING_GPUS`): the random
shapes of ``kernels/train`` plus the model-like shapes of ``kernels/test`` measured on those GPUs (``Source`` =
``train`` or ``test``), and NeuSight's AMD rows of the MI100 and MI210 (:data:`AMD_TRAINING_GPUS`,
:func:`amd_rows`, ``data/neusight_amd``), so the catalog's AMD forecasts rest on AMD measurements (issue 14.3;
leave-one-GPU-out over the NVIDIA GPUs is unchanged by them within noise, ``benchmarks/generalisation.md``).
``kernels/train_processed`` is a subset of ``kernels/train`` (its large shapes) and adds nothing. No row of an
unseen GPU (:data:`UNSEEN_GPUS`) is ever returned by :func:`training_rows`, nor of an AMD GPU other than the two.

Tensor-core families (``tc_gemm``, ``attn_prefill``, ``attn_decode``): AIConfigurator's bf16 / fp8
GEMM and fused-attention tables of its six public GPUs (:func:`tensor_training_gpus`); the GPUs it
holds back are the unseen ones, so every public GPU trains and leave-one-GPU-out is the estimate of
an unseen GPU (``benchmarks/precision.md``). Vidur's fp16 linear rows (another harness) only evaluate.
``vec_half``: Vidur's fp16 vector ops (norms, residual adds, SiLU x mul, rotary) of its two GPUs, the
only half-precision vector measurements the project has.

Mixture-of-experts era families (``moe``, ``mla_prefill``, ``mla_decode``): AIConfigurator's ``moe`` (the shipped
stratified sample), ``context_mla`` and ``generation_mla`` tables (``data/aiconfigurator_moe``) of the same six
GPUs under SGLang, TensorRT-LLM and vLLM; every GPU trains, leave-one-GPU-out estimates an unseen one.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from tilecast.data import load_kernels
from tilecast.errors import UserError
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FAMILIES, MOE_MLA_FAMILIES, PRECISION_FAMILIES, row_families
from tilecast.tiles.sources import kernel_rows

#: catalog keys of the NVIDIA GPUs the fp32 predictors are trained on (NeuSight's kernel tables)
TRAINING_GPUS = ("tesla_p4", "tesla_p100_pcie_16gb", "tesla_t4", "tesla_v100_pcie_32gb", "a100_pcie_40gb")
#: catalog keys of the AMD GPUs the fp32 predictors are trained on too (NeuSight's public AMD rows)
AMD_TRAINING_GPUS = ("mi100", "mi210")
#: every GPU the registered fp32 predictors are trained on
FP32_TRAINING_GPUS = (*TRAINING_GPUS, *AMD_TRAINING_GPUS)
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


#: AIConfigurator table(s) of each tensor-core family
_TENSOR_TABLES: dict[str, tuple[str, ...]] = {"tc_gemm": ("gemm",), "attn_prefill": ("context_attention",),
                                              "attn_decode": ("generation_attention",)}
#: ``data/aiconfigurator_moe`` table of each mixture-of-experts era family
_MOE_TABLES: dict[str, str] = {"moe": "moe", "mla_prefill": "context_mla", "mla_decode": "generation_mla"}


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise UserError(f"unknown kernel family {family!r}; known: {', '.join(FAMILIES)}")


def device_names(gpus: Iterable[str]) -> list[str]:
    """Device names (as in the data) of GPUs given by catalog key or device name."""
    return [get_gpu(g).device_name for g in gpus]


def _of_family(rows: pd.DataFrame, family: str) -> pd.DataFrame:
    return rows.loc[(row_families(rows) == family).to_numpy()]


def tensor_rows(family: str) -> pd.DataFrame:
    """Every shipped row of a precision-path family as kernel rows: AIConfigurator's (``Source`` =
    ``aiconfigurator``), or Vidur's for ``vec_half`` (``Source`` = ``vidur``)."""
    from tilecast.data import load_aiconfigurator, load_aiconfigurator_moe, load_vidur

    if family == "vec_half":
        rows = kernel_rows(load_vidur("mlp")).assign(Source="vidur")
    elif family in MOE_MLA_FAMILIES:
        rows = kernel_rows(load_aiconfigurator_moe(_MOE_TABLES[family])).assign(Source="aiconfigurator")
    else:
        parts = [kernel_rows(load_aiconfigurator(t)) for t in _TENSOR_TABLES[family]]
        rows = pd.concat(parts, ignore_index=True, sort=False).assign(Source="aiconfigurator")
    return _of_family(rows.loc[(rows["Latency"] > 0).to_numpy()], family).reset_index(drop=True)


def tensor_training_gpus(family: str = "tc_gemm") -> tuple[str, ...]:
    """Device names of the GPUs a precision-path family is trained on: every GPU of its shipped rows."""
    return tuple(sorted(tensor_rows(family)["Device"].astype(str).unique()))


def training_rows(family: str, gpus: Iterable[str] = TRAINING_GPUS, amd: bool = True) -> pd.DataFrame:
    """Rows ``family`` is trained on: train + test tables of ``gpus`` (never an unseen GPU) and, for an fp32
    family with ``amd`` (the default), the AMD rows of :data:`AMD_TRAINING_GPUS` (:func:`amd_rows`);
    ``amd=False`` is the NVIDIA-only pool (``benchmarks/kernels.py``'s published setup).

    A ``Source`` column says which table each row comes from. Rows with a non-positive latency are
    dropped.
    """
    _check_family(family)
    if family in PRECISION_FAMILIES:
        rows = tensor_rows(family)
        if gpus is TRAINING_GPUS:  # every GPU of the family's data
            return rows
        return rows.loc[rows["Device"].isin(set(device_names(gpus))).to_numpy()].reset_index(drop=True)
    devices = device_names(gpus)
    unseen = set(device_names(UNSEEN_GPUS)) & set(devices)
    if unseen:
        raise ValueError(f"refusing to train on unseen GPU rows: {', '.join(sorted(unseen))}")
    rows = _fp32_rows(family, devices)
    if not amd:
        return rows
    extra = amd_rows(family)
    extra = extra.loc[extra["Device"].isin(device_names(AMD_TRAINING_GPUS)).to_numpy()]
    return pd.concat([rows, extra], ignore_index=True, sort=False)


def _fp32_rows(family: str, devices: Iterable[str] | None) -> pd.DataFrame:
    """Train + test rows of an fp32 family on ``devices`` (device names; None: every GPU of the data)."""
    parts = [load_kernels("train", t).assign(Source="train") for t in _TRAIN_TABLES[family]]
    parts.append(load_kernels("test", _TEST_TABLE[family]).assign(Source="test"))
    rows = pd.concat(parts, ignore_index=True, sort=False)
    keep = rows["Latency"].to_numpy() > 0
    if devices is not None:
        keep &= rows["Device"].isin(list(devices)).to_numpy()
    return _of_family(rows.loc[keep], family).reset_index(drop=True)


def logo_gpus() -> tuple[str, ...]:
    """Catalog keys of every public GPU with fp32 kernel test rows: the leave-one-GPU-out pool (read from the
    data, the training GPUs and the unseen ones alike), in the data's device order."""
    devices: dict[str, None] = {}
    for family in FAMILIES:
        if family not in PRECISION_FAMILIES:
            devices.update(dict.fromkeys(sorted(load_kernels("test", _TEST_TABLE[family])["Device"].astype(str))))
    return tuple(get_gpu(d).key for d in devices)


def logo_rows(family: str) -> pd.DataFrame:
    """Every public row of an fp32 family (train + test tables of every GPU of :func:`logo_gpus`) for
    leave-one-GPU-out folds. Unlike :func:`training_rows` it holds the unseen GPUs' rows: a fold fits on
    the other GPUs and forecasts the one it leaves out, so no fold sees the GPU it is judged on."""
    _check_family(family)
    if family in PRECISION_FAMILIES:
        raise ValueError(f"{family}: leave-one-GPU-out rows of a precision family are tensor_rows({family!r})")
    return _fp32_rows(family, None)


def amd_rows(family: str) -> pd.DataFrame:
    """NeuSight's AMD rows of an fp32 family (``data/neusight_amd``: MI100, MI210; bmm / linear are the
    model-shaped ``test`` rows, vector ops the ``train`` rows); part of :func:`training_rows` (``amd=True``)."""
    from tilecast.data import load_amd_kernels

    _check_family(family)
    tables = {"bmm": ("bmm",), "linear": ("linear",), "elementwise": _TRAIN_TABLES["elementwise"],
              "softmax": ("softmax",), "layernorm": ("ln",)}.get(family, ())
    if not tables:
        raise ValueError(f"{family}: no AMD rows (fp32 families only)")
    rows = pd.concat([load_amd_kernels(t) for t in tables], ignore_index=True, sort=False)
    return _of_family(rows.loc[rows["Latency"].to_numpy() > 0], family).reset_index(drop=True)


def evaluation_rows(family: str, devices: Iterable[str] = UNSEEN_GPUS) -> pd.DataFrame:
    """Test rows (model-like shapes) of ``family`` measured on ``devices`` (keys or device names); a
    tensor-core family's rows of ``devices`` from its AIConfigurator tables."""
    _check_family(family)
    if family in PRECISION_FAMILIES:
        names = set(device_names(devices))
        rows = tensor_rows(family)
        return rows.loc[rows["Device"].isin(names).to_numpy()].reset_index(drop=True)
    names = device_names(devices)
    rows = load_kernels("test", _TEST_TABLE[family]).assign(Source="test")
    rows = rows.loc[rows["Device"].isin(names).to_numpy() & (rows["Latency"] > 0).to_numpy()]
    return _of_family(rows, family).reset_index(drop=True)


#: the precision-path family's rows of a GPU it never trains on (the promotion gate's unseen kernels):
#: Vidur's fp16 linear layers on the A40, a GPU and a harness no tensor-core row comes from
PRECISION_GATE_DEVICES: dict[str, tuple[str, ...]] = {"tc_gemm": ("NVIDIA A40",)}


def precision_gate_rows(family: str) -> pd.DataFrame:
    """Kernel rows of GPUs ``family`` is never trained on (empty where the data has none: the gate then
    compares the versions' validation MAPE)."""
    from tilecast.data import load_vidur

    devices = PRECISION_GATE_DEVICES.get(family, ())
    if not devices:
        return pd.DataFrame()
    rows = kernel_rows(load_vidur("mlp")).assign(Source="vidur")
    rows = rows.loc[rows["Device"].isin(devices).to_numpy() & (rows["Latency"] > 0).to_numpy()]
    return _of_family(rows, family).reset_index(drop=True)
