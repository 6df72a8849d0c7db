"""Per-family training runs: fit, measure, plot, log to MLflow, register, alias ``@challenger``.

One MLflow run per family with the predictor's params, the composed config, lineage tags (git
commit, data hash, hash of the rows fitted), metrics (validation MAPE per training GPU, MAPE on
each unseen GPU) and a parity plot; then a new version of ``tilecast-<family>`` with the alias
(``@challenger``) and ``@<predictor>`` (the newest version of that predictor, e.g. after a sweep).

With ``logo`` the run also carries the leave-one-GPU-out criterion (:mod:`tilecast.predictors.logo`) over the
GPUs of the family's training rows (the rows before the validation split, same predictor and parameters; for
the fp32 families the five NVIDIA training GPUs and, where they have model-shaped rows, bmm / linear, the
MI100 and MI210 of ``training_rows``' AMD rows):
``logo_mape_pct`` (mean over left-out GPUs), ``logo_worst_mape_pct``, ``logo_mape_pct.<gpu>``, ``logo_s`` (fit
seconds) and the tag ``tilecast.logo_worst_gpu``; promotion gates on them (:mod:`tilecast.training.promotion`).
It costs one extra fit per GPU of the family's data: on by default (:class:`TrainSpec` and ``conf/train.yaml`` agree),
off in the nightly bootstrap (``conf/nightly.yaml``'s ``train.logo``). It runs before the version is registered, so a
version at ``@challenger`` from a ``logo`` run always has its figures.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt
import mlflow
import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.metrics import ape_pct
from tilecast.predictors import KernelPredictor, evaluation_rows, fit_predictor, training_rows
from tilecast.predictors.logo import run_logo
from tilecast.predictors.rows import UNSEEN_GPUS
from tilecast.registry.aliases import move_alias
from tilecast.registry.lineage import frame_hash, log_lineage
from tilecast.registry.models import log_predictor, model_name
from tilecast.registry.tracking import ensure_experiment
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FAMILIES, FAMILY_DIMS, FAMILY_OPTIONAL, FP32_FAMILIES, TENSOR_FAMILIES
from tilecast.training.parity import parity_figure

log = logging.getLogger("tilecast.train")

#: aliases only promotion moves (after its evaluation); training refuses to set them
PROTECTED_ALIASES = ("champion",)


#: the fewest rows a family may be trained on (``max_rows``): fewer leave the validation split empty
MIN_ROWS = 20


@dataclass(frozen=True)
class TrainSpec:
    """What to train: predictor name and hyper-parameters, families, split and evaluation GPUs."""

    predictor: str
    params: dict[str, Any] = field(default_factory=dict)
    families: tuple[str, ...] = FP32_FAMILIES  # the five fp32 families (the tensor-core ones: families=[...])
    experiment: str = "tilecast-train"
    alias: str = "challenger"
    val_fraction: float = 0.2
    seed: int = 0
    unseen_gpus: tuple[str, ...] = UNSEEN_GPUS
    max_rows: int | None = None  # subsample each family's training rows (quick runs, tests)
    logo: bool = True  # also run leave-one-GPU-out on the training rows (one more fit per GPU; promotion gates on it)

    def __post_init__(self) -> None:
        if isinstance(self.families, str) or not self.families:
            raise UserError(f"families={self.families!r} must be a non-empty list, e.g. families=[softmax]; "
                             f"known: {', '.join(FAMILIES)}")
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise UserError(f"unknown family {unknown[0]!r}; known: {', '.join(FAMILIES)}")
        if self.max_rows is not None and (not isinstance(self.max_rows, int) or self.max_rows < MIN_ROWS):
            raise UserError(f"max_rows={self.max_rows!r} must be an integer >= {MIN_ROWS} (or null: every row), "
                             "so the validation split holds rows to measure")
        if self.alias in PROTECTED_ALIASES:
            raise UserError(f"alias={self.alias}: training never sets @{self.alias}; it registers @challenger "
                             f"(the default), and only `python jobs/promote.py families=[{','.join(self.families)}]` "
                             f"moves @{self.alias}, after evaluating the challenger against the current one")


@dataclass(frozen=True)
class FamilyResult:
    """Outcome of one family: its run, registered version and metrics."""

    family: str
    run_id: str
    model: str
    version: str
    fit_s: float
    metrics: dict[str, float]
    predictor: KernelPredictor = field(repr=False, compare=False)


def split_rows(rows: pd.DataFrame, val_fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Random train / validation split (seeded), stratified by nothing: the paper's 80/20."""
    if not 0.0 < val_fraction < 1.0:
        raise UserError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    rng = np.random.default_rng(seed)
    is_val = rng.random(len(rows)) < val_fraction
    return rows.loc[~is_val], rows.loc[is_val]


def mape_by_gpu(rows: pd.DataFrame, pred_ms: np.ndarray) -> dict[str, float]:
    """MAPE (%) per GPU key of the rows' ``Device`` column."""
    ape = pd.Series(ape_pct(pred_ms, rows["Latency"]), index=rows.index)
    keys = rows["Device"].map({d: get_gpu(str(d)).key for d in pd.unique(rows["Device"])})  # each device once
    return {str(k): float(v) for k, v in ape.groupby(keys).mean().items()}


def _input_example(family: str, rows: pd.DataFrame) -> pd.DataFrame:
    extra = ("dtype", "kv_dtype") if family in TENSOR_FAMILIES else tuple(c for c, _ in FAMILY_OPTIONAL.get(family, ()))
    cols = ["OPName", *FAMILY_DIMS[family], *extra, "Device"]
    return rows[[c for c in cols if c in rows]].head(5)


def _flat_params(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, dict):
            out.update(_flat_params(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@dataclass
class Fitted:
    """What fitting one family computed (no MLflow involved): the predictor, its figures and the rows' sizes; made
    in a worker process when families are fitted in parallel (:func:`fit_family`), logged by the parent."""

    family: str
    predictor: KernelPredictor
    fit_s: float
    metrics: dict[str, float]
    train_rows: int
    val_rows: int
    unseen_rows: int
    train_hash: str
    example: pd.DataFrame
    groups: dict[str, tuple[np.ndarray, np.ndarray]]  # parity plot: name -> (measured, predicted)
    logo_tags: dict[str, str] = field(default_factory=dict)


def fit_family(spec: TrainSpec, family: str) -> Fitted:
    """Fit ``spec.predictor`` on ``family``'s rows and measure it (validation split, unseen GPUs, LOGO when
    ``spec.logo``); pure computation, safe in a worker process."""
    rows = training_rows(family)
    if spec.max_rows is not None and len(rows) > spec.max_rows:
        rows = rows.sample(n=spec.max_rows, random_state=spec.seed).sort_index()
    train, val = split_rows(rows, spec.val_fraction, spec.seed)
    unseen_devices = [get_gpu(k).device_name for k in spec.unseen_gpus]
    unseen = evaluation_rows(family, devices=unseen_devices)
    t0 = time.perf_counter()
    predictor = fit_predictor(spec.predictor, family, train, **spec.params)
    fit_s = time.perf_counter() - t0
    val_pred = np.asarray(predictor.predict_ms(val), dtype=float)
    unseen_pred = np.asarray(predictor.predict_ms(unseen), dtype=float) if len(unseen) else np.array([])
    val_by_gpu = mape_by_gpu(val, val_pred)
    unseen_by_gpu = mape_by_gpu(unseen, unseen_pred) if len(unseen) else {}
    metrics = {"fit_s": fit_s, "val_mape_pct": float(ape_pct(val_pred, val["Latency"]).mean()),
               **{f"val_mape_pct.{k}": v for k, v in val_by_gpu.items()},
               **{f"unseen_mape_pct.{k}": v for k, v in unseen_by_gpu.items()}}
    if unseen_by_gpu:
        metrics["unseen_mape_pct"] = float(np.mean(list(unseen_by_gpu.values())))
    logo_tags: dict[str, str] = {}
    if spec.logo:
        figures, logo_tags = _logo(spec, family, rows)
        metrics |= figures
    groups = {"validation": (val["Latency"].to_numpy(float), val_pred)}
    for key in unseen_by_gpu:
        mask = (unseen["Device"] == get_gpu(key).device_name).to_numpy()
        groups[f"unseen {key}"] = (unseen["Latency"].to_numpy(float)[mask], unseen_pred[mask])
    return Fitted(family, predictor, fit_s, metrics, len(train), len(val), len(unseen), frame_hash(train),
                  _input_example(family, train), groups, logo_tags)


def train_family(spec: TrainSpec, family: str, config_yaml: str | None = None, group: str = "",
                 fitted: Fitted | None = None) -> FamilyResult:
    """Fit ``spec.predictor`` on ``family`` (or take what :func:`fit_family` computed), log one MLflow run,
    register a version with ``spec.alias``."""
    fitted = fitted or fit_family(spec, family)
    metrics, predictor = fitted.metrics, fitted.predictor
    experiment_id = ensure_experiment(spec.experiment)
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"{spec.predictor}-{family}") as run:
        log_lineage(config_yaml, job="train", family=family, predictor=spec.predictor, group=group,
                    train_rows_hash=fitted.train_hash)
        mlflow.log_params({"predictor": spec.predictor, "family": family, "val_fraction": spec.val_fraction,
                           "seed": spec.seed, "train_rows": fitted.train_rows, "val_rows": fitted.val_rows,
                           "unseen_rows": fitted.unseen_rows, "max_rows": spec.max_rows,
                           **_flat_params(dict(predictor.params), "param.")})
        if fitted.logo_tags:
            mlflow.set_tags(fitted.logo_tags)
        mlflow.log_metrics(metrics)
        fig = parity_figure(f"{spec.predictor} / {family}", fitted.groups)
        mlflow.log_figure(fig, "plots/parity.png")
        plt.close(fig)
        mv = log_predictor(predictor, fitted.example,
                           tags={"tilecast.run_id": run.info.run_id, "tilecast.family": family})
        reason = f"trained by jobs/train.py (predictor={spec.predictor}, run {run.info.run_id})"
        for alias in dict.fromkeys((spec.alias, spec.predictor)):  # @challenger and the newest per predictor
            move_alias(mv.name, alias, mv.version, metrics=metrics, reason=reason)
    _log_progress(family, spec, fitted.train_rows, fitted.fit_s, metrics, mv.name, mv.version)
    return FamilyResult(family, run.info.run_id, mv.name, str(mv.version), fitted.fit_s, metrics, predictor)


def _logo(spec: TrainSpec, family: str, rows: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """Run LOGO on ``rows``: (its metrics, the run tags naming its worst GPU and the rows it ran on)."""
    result = run_logo(family, spec.predictor, spec.params, rows)
    if result is None:  # one GPU only: the tag says so, promotion finds no figure
        return {}, {"tilecast.logo": "none: the training rows come from fewer than two GPUs with rows to score"}
    return result.metrics(), {"tilecast.logo_worst_gpu": result.worst_gpu,
                              "tilecast.logo_gpus": ",".join(result.mape_pct),
                              "tilecast.logo_rows_hash": frame_hash(rows)}


def _log_progress(family: str, spec: TrainSpec, n: int, fit_s: float, metrics: dict[str, float],
                  name: str, version: str) -> None:
    val = ", ".join(f"{k.split('.', 1)[1]} {v:.1f}" for k, v in metrics.items() if k.startswith("val_mape_pct."))
    unseen = ", ".join(f"{k.split('.', 1)[1]} {v:.1f}%" for k, v in metrics.items()
                       if k.startswith("unseen_mape_pct."))
    logo = (f"; leave-one-GPU-out MAPE {metrics['logo_mape_pct']:.1f}% (worst {metrics['logo_worst_mape_pct']:.1f}%)"
            if "logo_mape_pct" in metrics else "")
    log.info("%s: %s fit %.1f s on %d rows; val MAPE %.1f%% (%s); unseen %s%s -> %s v%s @%s", family,
             spec.predictor, fit_s, n, metrics["val_mape_pct"], val, unseen or "none", logo, name, version,
             spec.alias)


#: the biggest families first, so that parallel fits end together (rows of each, roughly: bmm and elementwise are
#: the longest fits, the tensor-core families next)
_FIT_ORDER = ("bmm", "tc_gemm", "elementwise", "linear", "attn_prefill", "attn_decode", "vec_half", "softmax",
              "layernorm")


def default_workers() -> int:
    """Processes that fit families at once: the machine's cores (``os.cpu_count()``), at least 1."""
    return max(1, os.cpu_count() or 1)


def fit_families(spec: TrainSpec, families: Sequence[str], workers: int = 1) -> dict[str, Fitted]:
    """:func:`fit_family` of every family, ``workers`` at once in threads (1: one after the other). The fits are
    independent and deterministic (seeded), so the result is the same either way; the logging to MLflow stays in
    the calling process (one writer on the store)."""
    if workers <= 1 or len(families) <= 1:
        return {f: fit_family(spec, f) for f in families}
    order = sorted(families, key=lambda f: _FIT_ORDER.index(f) if f in _FIT_ORDER else len(_FIT_ORDER))
    # threads, not processes: XGBoost (one OpenMP thread per booster, conf/predictor/xgboost.yaml) and the numpy /
    # scipy work release the GIL, and a thread costs no interpreter start-up (a spawned process re-imports
    # tilecast and MLflow: measured slower than one thread for every family here)
    with ThreadPoolExecutor(max_workers=min(workers, len(order)), thread_name_prefix="fit") as pool:
        futures = {f: pool.submit(fit_family, spec, f) for f in order}
        return {f: futures[f].result() for f in families}


def train(spec: TrainSpec, config_yaml: str | None = None, workers: int = 1) -> list[FamilyResult]:
    """Train every family of ``spec`` (one run and one registered version each); ``workers`` fits run at once
    (:func:`fit_families`), the runs are logged one after the other in family order."""
    for family in spec.families:
        model_name(family)  # unknown family -> error before any work
    group = uuid.uuid4().hex[:12]
    families = _unique(spec.families)
    if workers <= 1 or len(families) <= 1:
        return [train_family(spec, family, config_yaml, group) for family in families]
    order = sorted(families, key=lambda f: _FIT_ORDER.index(f) if f in _FIT_ORDER else len(_FIT_ORDER))
    results: dict[str, FamilyResult] = {}
    # the fits run in threads; each family is logged here (one writer on the store) as soon as its fit is done,
    # while the others still fit
    with ThreadPoolExecutor(max_workers=min(workers, len(order)), thread_name_prefix="fit") as pool:
        futures = {pool.submit(fit_family, spec, f): f for f in order}
        for future in as_completed(futures):
            family = futures[future]
            results[family] = train_family(spec, family, config_yaml, group, future.result())
    return [results[f] for f in families]


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))
