"""Answer a question end to end: enumerate the candidates, forecast them on the one path the scorer uses, decide.

Serving: the answered layouts x the concurrency grid become serve cells of the scoring engine
(:func:`tilecast.scoring.engine.score_grid`: each distinct prefill / decode graph built once, on Dask, cached
between runs; each distinct op forecast once per GPU), and :mod:`tilecast.planning.serve_plan` sizes the fleets
from the serve table it returns. Training: :mod:`tilecast.planning.train_plan` (the runs assembled on Dask).
Nothing here computes a latency: the planner reads the forecasters' answers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tilecast.errors import UserError
from tilecast.planning.layouts import ServeSearch, serve_layouts
from tilecast.planning.questions import Question, ServeQuestion, TrainQuestion
from tilecast.planning.result import Plan
from tilecast.planning.serve_plan import replica_cells, serve_plan
from tilecast.planning.train_plan import TrainSearch, train_plan
from tilecast.scoring.cluster import DaskConfig, dask_client
from tilecast.scoring.graph_cache import GraphCache
from tilecast.scoring.predictors import PredictorSource, families_for, resolve_source
from tilecast.scoring.pricing import Pricing, load_pricing


@dataclass(frozen=True)
class PlanSettings:
    """How to answer (``conf/plan.yaml``): predictors, prices, Dask, the search spaces."""

    pricing: Mapping[str, Any]
    dask: DaskConfig = field(default_factory=DaskConfig)
    predictor: str = "registry"  # registry | roofline
    alias: str = "champion"
    tracking_uri: str | None = None
    calibrate: bool = True
    serve: ServeSearch = field(default_factory=ServeSearch)
    train: TrainSearch = field(default_factory=TrainSearch)
    top: int = 20  # runners-up in the JSON
    cache: GraphCache | None = None  # serve graphs kept between runs
    progress: bool = False


def _empty_cells() -> pd.DataFrame:
    from tilecast.scoring.matrix import CELL_KEYS

    return pd.DataFrame({k: pd.Series(dtype=object) for k in (*CELL_KEYS, "n_gpus")})


def forecast_replicas(cells: pd.DataFrame, client: Any, source: PredictorSource, pricing: Pricing,
                      dask: DaskConfig | None = None, cache: GraphCache | None = None, progress: bool = False
                      ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The serve table of replica cells through the scoring engine's serving path, and its stats."""
    from tilecast.scoring.engine import score_grid

    scored = score_grid(_empty_cells(), client, source, pricing, dask=dask, progress=progress, cache=cache,
                        serve_cells=cells)
    return scored.serve, scored.stats.as_dict()


def plan_serving(question: ServeQuestion, settings: PlanSettings, client: Any, source: PredictorSource,
                 pricing: Pricing) -> Plan:
    t0 = time.perf_counter()
    search = settings.serve
    layouts = serve_layouts(question.gpus, question.dtypes, search)
    cells = replica_cells(layouts, question, search.concurrency)
    forecasts, stats = forecast_replicas(cells, client, source, pricing, settings.dask, settings.cache,
                                         settings.progress)
    t1 = time.perf_counter()
    info = {"candidates": len(layouts) * len(search.concurrency), "layouts": len(layouts),
            "concurrency": list(search.concurrency), "replica_cells": len(cells),
            "graphs": stats.get("graphs"), "cached_graphs": stats.get("cached_graphs"),
            "distinct_ops": stats.get("distinct_ops"), "forecast_s": t1 - t0}
    plan = serve_plan(question, layouts, forecasts, settings.top, info)
    plan.search["seconds"] = time.perf_counter() - t0
    plan.search["decide_s"] = time.perf_counter() - t1
    return plan


def plan_training(question: TrainQuestion, settings: PlanSettings, client: Any, source: PredictorSource,
                  pricing: Pricing) -> Plan:
    from tilecast.scoring.predictors import worker_predictor

    prices = {k: pricing.prices[k].usd_per_gpu_hour for k in question.gpus}
    return train_plan(question, settings.train, worker_predictor(source), prices, client, settings.top)


def families(question: Question) -> tuple[str, ...]:
    """The kernel families the question's forecasts need."""
    dtypes = question.dtypes if isinstance(question, ServeQuestion) else (question.dtype,)
    return families_for(dtypes)


def answer(question: Question, settings: PlanSettings, client: Any = None) -> Plan:
    """The plan of ``question``: prices checked, predictors pinned, the search on Dask (a LocalCluster of
    ``settings.dask`` unless ``client`` is given)."""
    pricing = load_pricing(settings.pricing)
    pricing.require(question.gpus)
    source = resolve_source(settings.predictor, settings.alias, settings.tracking_uri, families(question),
                            calibrate=settings.calibrate)
    run = plan_serving if isinstance(question, ServeQuestion) else plan_training
    if client is not None:
        plan = run(question, settings, client, source, pricing)
    else:
        with dask_client(settings.dask) as c:
            plan = run(question, settings, c, source, pricing)
    plan.predictor, plan.versions = source.label, source.versions
    if source.kind == "roofline":
        plan.notes.append("forecasts from the roofline (no learned predictors): optimistic, for a dry run")
    if source.missing:
        plan.notes += [f"no predictor for {fam}: {why}" for fam, why in source.missing]
    return plan




def settings_from_config(cfg: Mapping[str, Any]) -> PlanSettings:
    """:class:`PlanSettings` from a composed plan config (a plain dict)."""
    from tilecast.paths import ROOT, resolve
    from tilecast.pipelines.score import show_progress

    search = cfg.get("search") or {}
    unknown = sorted(set(search) - {"serve", "train"})
    if unknown:
        raise UserError(f"search: unknown key(s) {', '.join(unknown)} (known: serve, train)")
    cache = None
    if cfg.get("graph_cache", True):
        cache = GraphCache(resolve(cfg["cache_dir"]) if cfg.get("cache_dir") else ROOT / "reports" / ".cache",
                           variant="optimizer=adamw")
    top = cfg.get("top", 20)
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise UserError(f"top must be a non-negative integer, got {top!r}")
    return PlanSettings(pricing=cfg["pricing"], dask=DaskConfig.from_mapping(cfg.get("dask")),
                        predictor=str(cfg.get("forecaster") or "registry"), alias=str(cfg.get("alias") or "champion"),
                        tracking_uri=(cfg.get("mlflow") or {}).get("tracking_uri"),
                        calibrate=bool(cfg.get("calibrate", True)),
                        serve=ServeSearch.from_mapping(search.get("serve")),
                        train=TrainSearch.from_mapping(search.get("train")), top=top, cache=cache,
                        progress=show_progress(cfg.get("progress")))


__all__ = ["PlanSettings", "answer", "forecast_replicas", "plan_serving", "plan_training", "settings_from_config"]
