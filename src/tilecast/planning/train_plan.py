"""The training plan: every (GPU, GPU count, sharding, tp, pp, checkpointing, micro-batch) for a training
question, the cheapest run meeting the deadline at the high end of its interval (or the fastest within the
budget), the cost vs time-to-train front, and why the others lost.

The search (docs/method.md §20), all of it on the training-run forecaster's own pieces
(:mod:`tilecast.forecast.train_run`):

1. **enumerate** the runs (:class:`~tilecast.specs.train_run.TrainRun` refuses a layout that does not split
   the global batch or the GPUs: counted, not kept);
2. **memory** of each run on each GPU (:func:`~tilecast.forecast.train_memory.train_memory`, microseconds a
   run): a run that does not fit is kept with the memory it needs;
3. **one micro-batch's kernels** per distinct (micro-batch, tp) graph, priced on every GPU at once
   (:func:`~tilecast.forecast.train_run.price_matrix`);
4. a **lower bound** of each fitting run's step (its kernels alone: ``grad_accum x blocks of the fullest stage x
   (forward + backward of a block)``; collectives, recompute, optimizer and the pipeline bubble only add),
   hence of its days and cost; then **assemble** (:func:`~tilecast.forecast.train_run.assemble`: collectives,
   overlap, optimizer, memory) in rounds, best bound first, on Dask when a client is given; a run whose bounds
   an assembled one already beats on cost and on days at the high end is **ruled out** without assembling.

Every run processes the same tokens per step (``global_batch x seq_len``), so days = steps x step time; the
high end of the step's interval (:func:`~tilecast.forecast.intervals.forecast_interval`, mode ``training``) gives
``days_to_train_hi``. A deadline question keeps runs that fit and finish by the deadline at the high end and
picks the cheapest (USD to train, point forecast); a budget question keeps runs whose high-end cost is within
the budget and picks the fastest.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.forecast.intervals import forecast_interval
from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.train_memory import rank_shape, stage_layers, train_memory
from tilecast.forecast.train_run import (
    MicroBatchTimes,
    assemble,
    comm_model,
    micro_batch_frame,
    micro_batch_times,
    price_matrix,
)
from tilecast.forecast.workload import check_gpu_dtype
from tilecast.planning.layouts import search_fields
from tilecast.planning.pareto import pareto_mask
from tilecast.planning.questions import S_PER_DAY, DeadlineError, TrainQuestion
from tilecast.planning.result import STATUSES, TRAIN_PLAN_COLUMNS, Plan, fitting, keep, rank_order
from tilecast.specs import SpecError, get_gpu
from tilecast.specs.train_run import TrainRun

GIB = float(2**30)


@dataclass(frozen=True)
class TrainSearch:
    """The training search space (``conf/plan.yaml`` ``search.train``)."""

    n_gpus: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    sharding: tuple[str, ...] = ("none", "zero1", "zero3", "hybrid")
    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = (1, 2, 4, 8)
    cp: tuple[int, ...] = (1,)
    activation_checkpointing: tuple[str, ...] = ("none", "selective", "full")
    micro_batch: tuple[int, ...] = (1, 2, 4)
    gpus_per_node: int = 8
    round_size: int = 256  # runs assembled per round (then the bounds rule out what they can)

    @classmethod
    def from_mapping(cls, cfg: Mapping | None) -> TrainSearch:
        return cls(**search_fields(cls, cfg, "search.train", ints=("gpus_per_node", "round_size"),
                                   words=("sharding", "activation_checkpointing")))


def layout_label(run: TrainRun) -> str:
    parts = [run.sharding if run.sharding != "none" else "ddp"]
    parts += [f"{k}{getattr(run, k)}" for k in ("tp", "pp", "cp") if getattr(run, k) > 1]
    parts.append(f"ckpt {run.activation_checkpointing}")
    return " ".join(parts)


def enumerate_runs(question: TrainQuestion, search: TrainSearch) -> tuple[list[TrainRun], int, dict[str, int]]:
    """The valid runs of the search (GPU-independent), how many were tried, and the refusals by reason."""
    runs, tried, refused = [], 0, {}
    n_gpus = [n for n in search.n_gpus if question.max_gpus is None or n <= question.max_gpus]
    for n, sharding, tp, pp, cp, ckpt, mb in itertools.product(n_gpus, search.sharding, search.tp, search.pp,
                                                               search.cp, search.activation_checkpointing,
                                                               search.micro_batch):
        tried += 1
        try:
            runs.append(TrainRun(question.model, question.seq_len, int(mb), int(n), global_batch=question.global_batch,
                                 gpus_per_node=search.gpus_per_node, dtype=question.dtype, sharding=sharding,
                                 tp=int(tp), pp=int(pp), cp=int(cp), activation_checkpointing=ckpt))
        except SpecError as exc:
            kind = type(exc).__name__
            refused[kind] = refused.get(kind, 0) + 1
    return runs, tried, refused


def _graph_key(run: TrainRun) -> tuple:
    return (run.micro_batch, run.tp, run.cp)


def micro_batch_table(runs: list[TrainRun], gpus: list, predict: FamilyPredictor | None
                      ) -> dict[tuple, dict[str, MicroBatchTimes | str]]:
    """Per distinct micro-batch graph of ``runs``: per GPU key its kernel times (or why it has none)."""
    out: dict[tuple, dict[str, MicroBatchTimes | str]] = {}
    for run in runs:
        key = _graph_key(run)
        if key in out:
            continue
        frame = micro_batch_frame(run)
        ms, errors = price_matrix(frame, run, gpus, predict, comm_model(run))
        layers = int(frame.attrs["num_layers"])
        out[key] = {}
        for j, gpu in enumerate(gpus):
            col = ms[:, j]
            out[key][gpu.key] = (f"forecast failed: {errors.get(gpu.key, 'some ops have no forecast')}"
                                 if gpu.key in errors or not np.isfinite(col).all()
                                 else micro_batch_times(frame, col, layers))
    return out


def assemble_many(items: list[tuple[TrainRun, str, MicroBatchTimes]], prices: Mapping[str, float]
                  ) -> list[dict[str, Any]]:
    """Assemble each (run, GPU key, kernel times): step, throughput, MFU, memory, fit, cost per 1B tokens (a Dask
    task's body)."""
    out = []
    for run, gpu_key, mb in items:
        fc = assemble(run, get_gpu(gpu_key), mb, pricing=prices, advise=False)
        p = fc.parts
        exposed = sum(p.comm_exposed_ms.values())
        out.append({"step_s": fc.step_s, "tokens_per_s_per_gpu": fc.tokens_per_s_per_gpu, "mfu_pct": fc.mfu_pct,
                    "fits": fc.fits, "mem_required_gib": fc.memory.total_bytes / GIB, "comm_exposed_ms": exposed,
                    "usd_per_1b_tokens": fc.usd_per_1b_tokens})
    return out


def _lower_bound_s(run: TrainRun, mb: MicroBatchTimes) -> float:
    """A step can take no less than its micro-batches' block kernels on the fullest stage."""
    layers = stage_layers(run, rank_shape(run).layers)
    return run.grad_accum * layers * (mb.fw_layer + mb.bw_layer) / 1e3


def _ruled_out(bound_cost: np.ndarray, bound_days: np.ndarray, cost: np.ndarray, days: np.ndarray) -> np.ndarray:
    """True where some evaluated point is no dearer than a candidate's cost bound and no slower than its days
    bound: the candidate can be neither cheaper nor faster (vectorised with a prefix minimum)."""
    ok = np.isfinite(cost) & np.isfinite(days)
    if not ok.any():
        return np.zeros(len(bound_cost), dtype=bool)
    order = np.argsort(cost[ok], kind="stable")
    c, d = cost[ok][order], np.minimum.accumulate(days[ok][order])
    at = np.searchsorted(c, bound_cost, side="right") - 1
    best = np.where(at >= 0, d[np.clip(at, 0, None)], np.inf)
    return best <= bound_days


def search_runs(question: TrainQuestion, search: TrainSearch, predict: FamilyPredictor | None,
                prices: Mapping[str, float], client: Any = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Every (GPU, run) the search keeps track of, with status and numbers; and what it did (counts, seconds)."""
    t0 = time.perf_counter()
    runs, tried, refused = enumerate_runs(question, search)
    stats: dict[str, Any] = {"layouts_tried": tried, "layouts_valid": len(runs), "layouts_refused": refused}
    rows: list[dict[str, Any]] = []
    gpus = []
    for key in question.gpus:
        gpu = get_gpu(key)
        try:
            check_gpu_dtype(gpu, question.dtype)
            gpus.append(gpu)
        except SpecError as exc:
            rows.append({"gpu": key, "dtype": question.dtype, "status": "not supported", "error": str(exc)})
    fit_items = []
    labels = np.array([layout_label(r) for r in runs], dtype=object)
    # what a run needs per GPU does not depend on the GPU, only what it holds does: one memory model per run,
    # compared with every GPU's capacity (as train_memory states it)
    need = np.array([train_memory(run, gpus[0]).total_bytes for run in runs]) if gpus and runs else np.zeros(0)
    for gpu in gpus:
        capacity = train_memory(runs[0], gpu).capacity_bytes if runs else 0.0
        fits = need <= capacity
        fit_items += [(runs[i], gpu.key) for i in np.flatnonzero(fits)]
        # a run that does not fit: kept once per layout, the one closest to fitting (the rest are counted)
        out = np.flatnonzero(~fits)
        if len(out):
            closest = pd.DataFrame({"i": out, "label": labels[out], "need": need[out]}).sort_values("need")
            for i, n in closest.drop_duplicates("label")[["i", "need"]].itertuples(index=False):
                rows.append(_base(runs[i], gpu.key, question) | {"status": "does not fit", "fits": False,
                                                                 "mem_required_gib": n / GIB,
                                                                 "gpu_mem_gib": gpu.mem_gb})
        stats["does_not_fit"] = stats.get("does_not_fit", 0) + len(out)
    stats["candidates"] = tried * len(question.gpus)
    stats["memory_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    table = micro_batch_table([r for r, _ in fit_items], gpus, predict) if fit_items else {}
    stats["graphs"] = len(table)
    stats["price_s"] = time.perf_counter() - t1
    factor = {g.key: float(forecast_interval("training", g, question.dtype, 1.0)[1]) for g in gpus}
    steps = question.tokens / (question.global_batch * question.seq_len)
    todo, bound_s = [], []
    for run, g in fit_items:
        mb = table[_graph_key(run)][g]
        if isinstance(mb, str):
            rows.append(_base(run, g, question) | {"status": "failed", "error": mb})
            continue
        todo.append((run, g, mb))
        bound_s.append(_lower_bound_s(run, mb))
    stats.update(fitting=len(todo))
    done = _rounds(todo, np.asarray(bound_s), question, search, prices, factor, steps, client, stats)
    for (run, g, _), res in done:
        rows.append(_base(run, g, question) | res)
    stats["assemble_s"] = time.perf_counter() - t1 - stats["price_s"]
    stats["seconds"] = time.perf_counter() - t0
    frame = pd.DataFrame(rows)
    return statuses(frame, question, factor, prices), stats


def _rounds(todo: list, bound_s: np.ndarray, question: TrainQuestion, search: TrainSearch,
            prices: Mapping[str, float], factor: Mapping[str, float], steps: float, client: Any,
            stats: dict[str, Any]) -> list:
    """Assemble the fitting runs best bound first, ruling out by bound what assembled runs already beat."""
    if not todo:
        stats.update(assembled=0, ruled_out=0)
        return []
    n_gpus = np.array([r.n_gpus for r, _, _ in todo], dtype=float)
    price = np.array([prices[g] for _, g, _ in todo], dtype=float)
    fac = np.array([factor[g] for _, g, _ in todo], dtype=float)
    # a deadline question ranks by cost and holds days to the high end; a budget question the other way round
    deadline = question.days is not None
    cost_fac, days_fac = (np.ones_like(fac), fac) if deadline else (fac, np.ones_like(fac))
    b_days = steps * bound_s * days_fac / S_PER_DAY
    b_cost = steps * bound_s / 3600.0 * n_gpus * price * cost_fac
    key = b_cost if deadline else b_days
    order = list(np.argsort(key, kind="stable"))
    open_ = np.ones(len(todo), dtype=bool)
    cost, days = np.full(len(todo), np.nan), np.full(len(todo), np.nan)
    done, rounds = [], 0
    while True:
        order = [i for i in order if open_[i]]
        if not order:
            break
        batch, order = order[:search.round_size], order[search.round_size:]
        results = _assemble(client, [todo[i] for i in batch], prices)
        rounds += 1
        for i, res in zip(batch, results, strict=True):
            open_[i] = False
            done.append((todo[i], res))
            if res["fits"]:
                step = res["step_s"]
                cost[i] = steps * step / 3600.0 * n_gpus[i] * price[i] * cost_fac[i]
                days[i] = steps * step * days_fac[i] / S_PER_DAY
        if order:
            rest = np.array(order)
            out = _ruled_out(b_cost[rest], b_days[rest], cost, days)
            open_[rest[out]] = False
            order = [i for i in order if open_[i]]
    stats.update(assembled=len(done), ruled_out=len(todo) - len(done), rounds=rounds)
    return done


def _assemble(client: Any, items: list, prices: Mapping[str, float]) -> list[dict[str, Any]]:
    if client is None or len(items) < 16:
        return assemble_many(items, prices)
    n = max(1, len(client.scheduler_info().get("workers", {})) * 2)
    parts = [items[i::n] for i in range(n)]
    futures = client.map(assemble_many, parts, prices=dict(prices), pure=False)
    results = client.gather(futures)
    out: list = [None] * len(items)
    for k, part in enumerate(results):
        for j, res in enumerate(part):
            out[k + j * n] = res
    return out


def _base(run: TrainRun, gpu: str, question: TrainQuestion) -> dict[str, Any]:
    return {"gpu": gpu, "n_gpus": run.n_gpus, "dtype": run.dtype, "layout": layout_label(run),
            "sharding": run.sharding, "tp": run.tp, "pp": run.pp, "cp": run.cp,
            "activation_checkpointing": run.activation_checkpointing, "micro_batch": run.micro_batch,
            "grad_accum": run.grad_accum, "global_batch": run.global_batch, "seq_len": run.seq_len,
            "gpus_per_node": run.gpus_per_node}


def statuses(frame: pd.DataFrame, q: TrainQuestion, factor: Mapping[str, float], prices: Mapping[str, float]
             ) -> pd.DataFrame:
    """Days, cost, their high ends, margins and status of each row (vectorised): rows of ``gpu, n_gpus, step_s,
    tokens_per_s_per_gpu, fits`` (and ``status`` / ``error`` where already decided, e.g. not supported);
    ``factor``: per GPU the high end of the step's interval over the step."""
    for col in ("step_s", "tokens_per_s_per_gpu", "mfu_pct", "mem_required_gib", "usd_per_1b_tokens",
                "comm_exposed_ms", "gpu_mem_gib"):
        if col not in frame:
            frame[col] = np.nan
    for col in ("fits", "error"):
        if col not in frame:
            frame[col] = None
    step = frame["step_s"].to_numpy(dtype=float)
    fac = frame["gpu"].map(factor).to_numpy(dtype=float)
    price = frame["gpu"].map(prices).to_numpy(dtype=float)
    n = frame["n_gpus"].to_numpy(dtype=float)
    tokens_per_s = frame["tokens_per_s_per_gpu"].to_numpy(dtype=float) * n
    frame["step_hi_s"] = step * fac
    frame["days_to_train"] = q.tokens / tokens_per_s / S_PER_DAY
    frame["days_to_train_hi"] = frame["days_to_train"] * fac
    frame["usd_per_gpu_hour"] = price
    frame["usd_to_train"] = frame["days_to_train"] * 24.0 * n * price
    frame["usd_to_train_hi"] = frame["usd_to_train"] * fac
    frame["gpu_mem_gib"] = frame["gpu"].map(lambda g: get_gpu(g).mem_gb).astype(float)
    if q.days is not None:
        point, hi, limit = frame["days_to_train"], frame["days_to_train_hi"], q.days
    else:
        point, hi, limit = frame["usd_to_train"], frame["usd_to_train_hi"], q.budget_usd
    frame["margin_pct"] = 100 * (1 - hi / limit)
    frame["miss_pct"] = np.maximum(0.0, -frame["margin_pct"])
    status = frame["status"].astype(object).to_numpy() if "status" in frame else np.full(len(frame), None)
    open_ = pd.isna(status)
    no_fit = (frame["fits"].astype("boolean") == False).fillna(False).to_numpy(dtype=bool)  # noqa: E712
    point_ok, hi_ok = (point <= limit).to_numpy(dtype=bool), (hi <= limit).to_numpy(dtype=bool)
    status = np.select([~open_, no_fit, ~point_ok, ~hi_ok],
                       [status, "does not fit", "misses the target", "meets only at the point forecast"],
                       default="meets")
    frame["status"] = status
    frame["status_rank"] = frame["status"].map({s: i for i, s in enumerate(STATUSES)}).astype(int)
    frame["feasible"] = frame["status"] == STATUSES[0]
    for col in ("n_gpus", "tp", "pp", "cp", "micro_batch", "grad_accum", "global_batch", "seq_len", "gpus_per_node"):
        if col in frame:
            frame[col] = pd.array(frame[col].to_numpy(dtype=float), dtype="Float64").astype("Int64")
    return frame


def decide(rows: pd.DataFrame, q: TrainQuestion, top: int = 20) -> tuple[bool, pd.DataFrame, pd.DataFrame]:
    """(feasible, kept candidates with ``chosen`` and ``why``, the cost vs days front). The plan: the cheapest
    feasible run (a deadline) or the fastest (a budget), then fewer GPUs. Kept: per (GPU, layout) its best run,
    the front, and the plan."""
    objective = rows["usd_to_train"] if q.days is not None else rows["days_to_train"]
    gpus = rows["n_gpus"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    ranked = rows.iloc[rank_order(rows, objective.to_numpy(dtype=float), gpus)]
    fit = fitting(ranked)
    front = pareto_mask(np.where(fit, ranked["usd_to_train"], np.nan), np.where(fit, ranked["days_to_train"], np.nan))
    return keep(ranked, front, ["gpu", "layout"], lambda kept, plan: why(kept, q, plan), "days_to_train")


def why(kept: pd.DataFrame, q: TrainQuestion, plan: pd.Series | None) -> list[str]:
    """A short reason per kept run: why it is the plan, or why it lost to it."""
    from tilecast.reports.money import usd

    out = []
    for r in kept.to_dict("records"):
        s = r["status"]
        if r.get("chosen"):
            text = ("the plan: the cheapest run finishing by the deadline at the high end of its interval"
                    if q.days is not None else "the plan: the fastest run within the budget at the high end")
        elif s == "meets":
            if q.days is not None:
                extra = r["usd_to_train"] - plan["usd_to_train"]
                text = (f"meets it, but {usd(extra)} more to train (+{100 * extra / plan['usd_to_train']:.1f}%)"
                        if extra >= 0.5 else "meets it at the same cost, with more GPUs")
            else:
                extra = r["days_to_train"] - plan["days_to_train"]
                text = (f"meets it, but {extra:.2f} days slower (+{100 * extra / plan['days_to_train']:.1f}%)"
                        if extra > 0 else "meets it as fast, with more GPUs")
        elif s in ("meets only at the point forecast", "misses the target"):
            prefix = "meets it at the point forecast only: " if s != "misses the target" else ""
            if q.days is not None:
                text = (f"{prefix}{r['days_to_train_hi']:.1f} days at the high end > {q.days:g} "
                        f"({r['days_to_train']:.1f} point)")
            else:
                text = f"{prefix}{usd(r['usd_to_train_hi'])} at the high end > {usd(q.budget_usd)}"
        elif s == "does not fit":
            text = f"does not fit: {r['mem_required_gib']:.1f} GiB per GPU of {r['gpu_mem_gib']:.0f}"
        else:
            text = f"{s}: {r.get('error')}"
        out.append(text)
    return out


def check_deadline(rows: pd.DataFrame, q: TrainQuestion) -> None:
    """A deadline shorter than the fastest step of any fitting run (or a budget below the cheapest step) can
    never be met: :class:`~tilecast.planning.questions.DeadlineError` naming that step."""
    ok = rows.loc[rows["fits"].astype(object) == True]  # noqa: E712
    if ok.empty:
        return
    if q.days is not None:
        fastest = ok.loc[ok["step_s"].idxmin()]
        if q.deadline_s < fastest["step_s"]:
            raise DeadlineError(f"days={q.days:g} ({q.deadline_s:,.1f} s) is shorter than one step: the fastest run "
                                f"takes {fastest['step_s']:,.1f} s a step ({fastest['n_gpus']} x {fastest['gpu']}, "
                                f"{fastest['layout']})")
    else:
        per_step = ok["usd_to_train"] * ok["global_batch"].astype(float) * ok["seq_len"].astype(float) / q.tokens
        if q.budget_usd < per_step.min():
            raise DeadlineError(f"budget_usd={q.budget_usd:g} buys less than one step (the cheapest step costs "
                                f"${per_step.min():,.2f})")


def train_plan(q: TrainQuestion, search: TrainSearch, predict: FamilyPredictor | None,
               prices: Mapping[str, float], client: Any = None, top: int = 20) -> Plan:
    """Search, check the deadline, decide."""
    rows, stats = search_runs(q, search, predict, prices, client)
    check_deadline(rows, q)
    feasible, kept, pareto = decide(rows, q, top)
    counts = rows["status"].value_counts().to_dict()
    counts["does not fit"] = stats.get("does_not_fit", 0)  # kept once per layout, counted in full
    if "not supported" in counts:
        counts["not supported"] = int((rows["status"] == "not supported").sum()) * stats["layouts_valid"]
    stats["by_status"] = {s: int(counts.get(s, 0)) for s in STATUSES if counts.get(s, 0)}
    stats["ruled out by a bound"] = stats.get("ruled_out", 0)
    first = [c for c in TRAIN_PLAN_COLUMNS if c in kept]
    kept = kept[first + [c for c in kept.columns if c not in first]]
    return Plan(q, feasible, kept, pareto, stats)


__all__ = ["TrainSearch", "assemble_many", "check_deadline", "decide", "enumerate_runs", "layout_label",
           "micro_batch_table", "search_runs", "train_plan", "why"]
