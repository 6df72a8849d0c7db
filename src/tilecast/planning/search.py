"""Answer a question end to end: enumerate the candidates, forecast them on the one path the scorer uses, decide.

Serving: engine x GPU x dtype x layout x concurrency, forecast from the engines' step tables in process
(:mod:`tilecast.planning.engine_search`: one step table per (engine, dtype, layout) and GPU answers every
concurrency, the same forecast ``predict.py mode=serve engine=...`` makes for one configuration), and
:mod:`tilecast.planning.serve_plan` sizes the fleets and decides. Training: :mod:`tilecast.planning.train_plan`
(the runs assembled on Dask).
Nothing here computes a latency: the planner reads the forecasters' answers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tilecast.errors import UserError
from tilecast.planning.layouts import ServeSearch
from tilecast.planning.questions import Question, ServeQuestion, TrainQuestion
from tilecast.planning.result import Plan
from tilecast.planning.serve_plan import plan_of, statuses
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


def plan_serving(question: ServeQuestion, settings: PlanSettings, client: Any, source: PredictorSource,
                 pricing: Pricing) -> Plan:
    """Every (engine, GPU, dtype, layout, concurrency) forecast from the engines' step tables
    (:mod:`tilecast.planning.engine_search`), sized into fleets and decided (:mod:`tilecast.planning.serve_plan`).
    In process: one step table answers every concurrency, so there is no grid to spread over workers."""
    from tilecast.planning.engine_search import engine_candidates, with_layout
    from tilecast.scoring.predictors import worker_predictor

    t0 = time.perf_counter()
    rows, info, layouts = engine_candidates(question, question.gpus, settings.serve, worker_predictor(source),
                                            pricing, settings.progress)
    t1 = time.perf_counter()
    rows = statuses(rows, question)
    info.update({"candidates": len(rows), "forecast_s": t1 - t0})
    plan = plan_of(question, rows, settings.top, info, lambda frame: with_layout(frame, layouts))
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
    return families_for(dtypes, (question.model,))


def answer(question: Question, settings: PlanSettings, client: Any = None) -> Plan:
    """The plan of ``question``: prices checked, predictors pinned, the search on Dask (a LocalCluster of
    ``settings.dask`` unless ``client`` is given)."""
    pricing = load_pricing(settings.pricing)
    pricing.require(question.gpus)
    source = resolve_source(settings.predictor, settings.alias, settings.tracking_uri, families(question),
                            calibrate=settings.calibrate)
    run = plan_serving if isinstance(question, ServeQuestion) else plan_training
    if client is not None or run is plan_serving:  # the serving search runs in process (no cluster)
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


__all__ = ["PlanSettings", "answer", "plan_serving", "plan_training", "settings_from_config"]
