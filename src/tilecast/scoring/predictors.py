"""Which kernel predictors a score run uses: resolved and loaded once on the client, shipped to each worker once.

The client resolves ``tilecast-<family>@<alias>`` to exact versions (:func:`resolve_source`), so every
worker forecasts with the same versions even if the alias moves during the run. It then loads them
(and the per-GPU calibrations of the grid's GPUs) once (:func:`client_predictor`); the engine
scatters that object to every worker, which deserialises it once and keeps it for all its tasks.
Workers need no access to the MLflow store, and none of them pays for resolving model URIs and
loading pyfunc models (seconds per model). Without a shipped object a worker loads the models
itself, once, into a module-level cache keyed by the model URIs (:func:`worker_predictor`).
``roofline`` needs no registry (tests, or a registry not trained yet).

A run resolves the families its cells' dtypes need (:func:`families_for`): the fp32 families always
(a missing one stops the run before any work, as before), the tensor-core families (``tc_gemm``,
``attn_prefill``, ``attn_decode``) only for a matrix with other dtypes. A tensor-core family with no
registered model does not stop the run: it is listed in :attr:`PredictorSource.missing`, and every
cell with an op of that family carries an error naming the family and the train command (no silent
roofline fallback); the other cells are scored.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.ops import op_latency_matrix
from tilecast.predictors.sources import FORECASTERS, check_forecaster
from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.dtypes import HALF_DTYPES, TENSOR_DTYPES, op_dtype
from tilecast.tiles.ops import FAMILIES, FP32_FAMILIES, MOE_MLA_FAMILIES, PRECISION_FAMILIES, TENSOR_FAMILIES
from tilecast.tiles.roofline import roofline_ms

log = logging.getLogger(__name__)

KINDS = FORECASTERS


@dataclass(frozen=True)
class PredictorSource:
    """A pinned set of predictors: ``registry`` versions (by model URI) or the ``roofline`` baseline."""

    kind: str
    alias: str = ""
    tracking_uri: str | None = None
    resolved: tuple = field(default=(), compare=False)  # registry.models.Resolved per family
    uris: tuple[tuple[str, str], ...] = ()  # (family, models:/<name>/<version>)
    calibrate: bool = True
    missing: tuple[tuple[str, str], ...] = ()  # (family, why): optional families with no registered model

    @property
    def label(self) -> str:
        """How the score table names the predictor: ``registry@champion`` or ``roofline``."""
        return f"registry@{self.alias}" if self.kind == "registry" else self.kind

    @property
    def versions(self) -> dict[str, str]:
        """Family -> registered version (empty for the roofline)."""
        return {fam: uri.rsplit("/", 1)[-1] for fam, uri in self.uris}

    def versions_json(self) -> str:
        return json.dumps(self.versions, sort_keys=True)

    def describe(self) -> str:
        if self.kind != "registry":
            return self.kind
        return ", ".join([*(r.describe() for r in self.resolved),
                          *(f"{fam}: none registered" for fam, _ in self.missing)])

    def missing_error(self, family: str) -> str | None:
        """The error text of cells that need ``family`` when it has no registered model, else None."""
        why = dict(self.missing).get(family)
        return None if why is None else f"no predictor for family {family!r}: {why}"


def families_for(dtypes: Iterable[str], models: Iterable[object] = ()) -> tuple[str, ...]:
    """Kernel families the cells of these workload dtypes (and ``models``: catalog keys or specs) are forecast
    with: the fp32 families (fp32 GEMMs, and vector ops in every dtype), ``tc_gemm`` for tensor-core GEMMs, the
    fused-attention families for half precisions, and the fused-MoE / MLA families when a mixture-of-experts
    model is among ``models`` in a half precision."""
    dtypes = set(dtypes)
    tensor = any(op_dtype(d, k) in TENSOR_DTYPES for d in dtypes for k in ("linear", "bmm"))
    half = bool(dtypes & HALF_DTYPES)
    return (*FP32_FAMILIES, *(("tc_gemm",) if tensor else ()),
            *(f for f in TENSOR_FAMILIES if f != "tc_gemm" and half),
            *(MOE_MLA_FAMILIES if half and any_moe(models) else ()))


def any_moe(models: Iterable[object]) -> bool:
    """Whether any of ``models`` (catalog keys or specs; keys the catalog does not know are skipped: their cells
    carry that error) is a mixture-of-experts model."""
    from tilecast.specs import get_model

    for m in models:
        try:
            if (m if hasattr(m, "family") else get_model(str(m))).family == "moe":
                return True
        except (KeyError, ValueError):
            continue
    return False


def resolve_source(kind: str = "registry", alias: str = "champion", tracking_uri: str | None = None,
                   families: Iterable[str] = FAMILIES, calibrate: bool = True,
                   optional: Iterable[str] = PRECISION_FAMILIES) -> PredictorSource:
    """Pin the predictors of a run (registry: alias -> version per family, with the registry's fallback).

    A family in ``optional`` without a registered model is recorded in ``missing`` (its cells will carry
    the error); any other family without one raises :class:`~tilecast.registry.RegistryError`."""
    if check_forecaster(kind) == "roofline":
        return PredictorSource("roofline")
    from tilecast.registry.models import RegistryError, resolve_alias
    from tilecast.registry.tracking import configure

    uri = configure(tracking_uri)
    optional = set(optional)
    resolved, missing = [], []
    for fam in dict.fromkeys(families):
        try:
            resolved.append(resolve_alias(fam, alias))
        except RegistryError as exc:
            if fam not in optional:
                raise
            missing.append((fam, str(exc)))
            log.warning("no predictor for %s: its cells will carry the error (%s)", fam, exc)
    return PredictorSource("registry", alias, uri, tuple(resolved), tuple((r.family, r.uri) for r in resolved),
                           calibrate, tuple(missing))


def _roofline(family: str, rows: pd.DataFrame, gpu) -> np.ndarray:
    return roofline_ms(rows, gpu)


#: per-process cache: (tracking URI, model URIs, calibrate) -> loaded predictor
_CACHE: dict[tuple, FamilyPredictor] = {}


def worker_predictor(source: PredictorSource) -> FamilyPredictor:
    """The FamilyPredictor of ``source``, loaded once per process (the first task on a worker loads it)."""
    if source.kind == "roofline":
        return _roofline
    key = (source.tracking_uri, source.uris, source.calibrate)
    if key not in _CACHE:
        from tilecast.registry.kernel_forecast import RegistryPredictor
        from tilecast.registry.models import LoadedPredictor, load_version
        from tilecast.registry.tracking import configure

        configure(source.tracking_uri)
        loaded = {r.family: LoadedPredictor(load_version(r.uri), r.version, r) for r in source.resolved}
        _CACHE[key] = RegistryPredictor(loaded, calibrate=source.calibrate)
        log.info("loaded %s", source.describe())
    return _CACHE[key]


def warm_up(source: PredictorSource) -> None:
    """Import what deserialising the shipped predictors needs (the registry, the predictor classes), so a
    worker does it while it waits for them rather than on its first prediction task."""
    if source.kind == "registry":
        import tilecast.predictors  # noqa: F401
        import tilecast.registry.kernel_forecast  # noqa: F401


#: one kernel row per family, to check that a predictor survives the trip to a worker
_PROBE_ROWS = {
    "bmm": {"OPName": "bmm", "B": 16, "M": 512, "N": 64, "K": 512, "H": 0},
    "linear": {"OPName": "linear", "B": 1, "M": 2048, "N": 1024, "K": 4096, "H": 0},
    "elementwise": {"OPName": "add", "B": 2048, "M": 0, "N": 0, "K": 0, "H": 1024},
    "softmax": {"OPName": "softmax", "B": 8192, "M": 0, "N": 0, "K": 0, "H": 512},
    "layernorm": {"OPName": "ln", "B": 2048, "M": 0, "N": 0, "K": 0, "H": 1024},
    "tc_gemm": {"OPName": "linear", "B": 1, "M": 2048, "N": 1024, "K": 4096, "H": 0, "dtype": "bf16"},
    "attn_prefill": {"OPName": "attn_prefill", "B": 4, "M": 512, "N": 512, "K": 64, "H": 16, "Hkv": 16,
                     "dtype": "bf16"},
    "attn_decode": {"OPName": "attn_decode", "B": 8, "M": 1, "N": 1024, "K": 128, "H": 32, "Hkv": 8,
                    "dtype": "bf16"},
    "vec_half": {"OPName": "rmsnorm", "B": 2048, "M": 0, "N": 0, "K": 0, "H": 4096, "dtype": "bf16"},
    "moe": {"OPName": "moe", "tokens": 256, "hidden": 4096, "inter": 1536, "topk": 8, "experts": 128, "moe_tp": 1,
            "moe_ep": 8, "dtype": "bf16"},
    "mla_prefill": {"OPName": "mla_prefill", "B": 1, "M": 1024, "N": 1024, "H": 16, "dtype": "bf16"},
    "mla_decode": {"OPName": "mla_decode", "B": 32, "M": 1, "N": 2048, "H": 16, "dtype": "bf16"},
}


def _outcome(predict: FamilyPredictor, family: str, rows: pd.DataFrame, gpu: GpuSpec) -> tuple:
    try:
        return ("ok", np.asarray(predict(family, rows, gpu), dtype=float).tolist())
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return ("raises", type(exc).__name__)


def ships_faithfully(predictor: FamilyPredictor, gpu: GpuSpec, families: Iterable[str]) -> bool:
    """True when a pickled copy behaves exactly as ``predictor`` (same numbers, or the same error) on one
    probe row per family."""
    try:
        copy = pickle.loads(pickle.dumps(predictor))
    except Exception:  # noqa: BLE001 - what does not pickle stays on the client
        log.debug("predictor does not pickle", exc_info=True)
        return False
    for fam in families:
        rows = pd.DataFrame([{**_PROBE_ROWS[fam], "Device": gpu.device_name}])
        if _outcome(predictor, fam, rows, gpu) != _outcome(copy, fam, rows, gpu):
            return False
    return True


def client_predictor(source: PredictorSource, gpu_keys: Iterable[str]) -> FamilyPredictor | None:
    """The loaded predictors of ``source`` with the calibrations of ``gpu_keys`` fetched, ready to ship to
    the workers; None for the roofline (nothing to load) or when a copy would not predict the same (then
    every worker loads the models itself)."""
    if source.kind != "registry":
        return None
    predictor = worker_predictor(source)
    keys = list(gpu_keys)
    for key in keys:
        predictor.calibration(key)  # looked up here once, not by every worker
    if keys and not ships_faithfully(predictor, get_gpu(keys[0]), [r.family for r in source.resolved]):
        log.warning("the loaded predictors do not survive pickling: every worker loads them itself")
        return None
    return predictor


def latency_chunk(source: PredictorSource, ops: pd.DataFrame, gpu_keys: list[str], n_gpus: int = 1,
                  predictor: FamilyPredictor | None = None) -> tuple[np.ndarray, dict[str, str]]:
    """Per-instance ms of distinct op rows on every GPU: shape (len(ops), len(gpu_keys)), and errors by GPU.

    One :func:`tilecast.forecast.ops.op_latency_matrix` call: each family's kernel rows predicted once for
    all GPUs (one stacked call), then what is not a kernel prediction (memory moves, communication, fused
    vector groups) per GPU, vectorised; ``n_gpus`` is the all-reduce group of the rows' communication ops.
    ``predictor``: the loaded predictors shipped by the client (else the worker loads ``source`` itself,
    once). A GPU whose forecast fails gets NaN and its error text, the other GPUs are unaffected. Runs on
    a Dask worker.
    """
    gpus = [get_gpu(k) for k in gpu_keys]
    return op_latency_matrix(ops, gpus, predictor or worker_predictor(source), n_gpus=n_gpus)
