"""Serving forecasts against measured runs (rows in the schema of AIConfigurator's ``serving.csv``).

Each row names its GPU by ``system`` (``b200_sxm``: catalog aliases), its model by ``model_path`` (a
Hugging Face id the catalog resolves), ``precision`` (bf16 | fp8 | fp4; int4: a release's own int4 experts,
:func:`tilecast.specs.model.workload_dtype_of`), ``tp_size`` / ``pp_size``, ``isl``,
``osl`` and ``batch_size`` (the concurrency); a mixture-of-experts model's layout from ``tp_size``,
``attention_dp_size``, ``moe_tp_size``, ``moe_ep_size`` (:func:`tilecast.specs.layout.layout_from_row`). A row
the forecaster cannot answer (a layout that does not match the model or its GPU count, an unknown model, GPU,
engine or engine release, a concurrency of 0, a precision the checkpoint cannot run in, disaggregated serving,
pipeline parallelism) gets its reason in ``error`` and empty forecasts; every other row is answered. ``mode=disagg``
rows (separate prefill and decode pools) are forecast by :func:`tilecast.serving.disagg.evaluate_disagg`. A row
without ``precision`` runs at its checkpoint's dtype, said in ``note``. ``backend`` (default vLLM) and
``backend_version`` choose the engine. Identical configurations are forecast once, and the rows sharing a
(model, dtype, split, engine) share one step-cost grid (:mod:`tilecast.serving.step`) and one vectorised steady
state (:mod:`tilecast.serving.steady`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.forecast.serve import DEFAULT_ENGINE, SERVE_DTYPES, ServeWorkload, kv_capacity_tokens, serve_memory
from tilecast.forecast.workload import check_gpu_dtype
from tilecast.metrics import ape_pct
from tilecast.serving.disagg import evaluate_disagg
from tilecast.serving.engines import check_engine, resolve_version
from tilecast.serving.policy import EnginePolicy, engine_policy
from tilecast.serving.steady import steady_state
from tilecast.serving.step import step_costs
from tilecast.specs import SpecError, UnknownSpecError, get_gpu, get_model
from tilecast.specs.layout import layout_from_row
from tilecast.specs.model import workload_dtype_of

SERVE_COLUMNS = ("pred_ttft_ms", "pred_tpot_ms", "fits", "engine", "error", "note")
_KEY = ("model_path", "system", "precision", "tp_size", "pp_size", "isl", "osl", "batch_size", "mode",
        "attention_dp_size", "moe_tp_size", "moe_ep_size", "backend", "backend_version")


def _int(value: object, name: str) -> int:
    number = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    if not np.isfinite(number) or number != int(number):
        raise UserError(f"{name}={value!r} is not an integer")
    return int(number)


class ServeRowError(UserError):
    """A serving row that cannot be forecast as it stands (concurrency 0, an unknown engine...): its ``error``."""


def serve_row_workload(row: pd.Series) -> tuple[ServeWorkload, str, str | None]:
    """The serve workload, GPU key and note of one measured row (raises with the reason it cannot be forecast).
    A row without ``precision`` runs at the checkpoint's dtype (the note says so)."""
    if str(row.get("mode", "agg")) != "agg":
        raise ServeRowError(f"mode={row.get('mode')!r}: disaggregated rows are forecast by the disaggregated path, "
                            "not this aggregated one")
    model = get_model(str(row["model_path"]))
    note = None
    if pd.isna(row.get("precision")) or str(row.get("precision")).strip() == "":
        precision = model.default_dtype
        note = f"no precision given: run at the checkpoint's dtype {precision}"
    else:
        precision = workload_dtype_of(model, str(row.get("precision")))  # int4: Kimi-K2.5's own int4 experts
    if precision not in SERVE_DTYPES:
        raise ServeRowError(f"precision={precision!r} is not modelled; serve dtypes: {', '.join(SERVE_DTYPES)}")
    gpu = get_gpu(str(row["system"]))
    concurrency = _int(row["batch_size"], "batch_size")
    if concurrency < 1:
        raise ServeRowError(f"batch_size (concurrency) = {concurrency}: a benchmark needs at least one request in "
                            "flight")
    pp = _int(row.get("pp_size", 1) if pd.notna(row.get("pp_size", 1)) else 1, "pp_size")
    layout = layout_from_row(row, model) if model.moe is not None else None  # tp, attention dp, ep
    tp = layout.tp if layout is not None else _int(row["tp_size"], "tp_size")  # a wide-EP row's tp is its dp
    sw = ServeWorkload(model, precision, tp, _int(row["isl"], "isl"), _int(row["osl"], "osl"), concurrency, pp,
                       layout)
    return sw, gpu.key, note


def _engine(row: pd.Series) -> tuple[str, str | None]:
    """The row's engine (``backend``, default vLLM) and its measured release standing for ``backend_version``."""
    engine = check_engine(row.get("backend") if pd.notna(row.get("backend", None)) else DEFAULT_ENGINE)
    version = row.get("backend_version")
    version = None if version is None or (isinstance(version, float) and np.isnan(version)) else str(version)
    return engine, resolve_version(engine, version)


@dataclass
class ServingPlan:
    """The distinct configurations of serving rows (``groups``: each row's), their step costs and what stands in
    the way of the others: per configuration ``cost`` (a :class:`~tilecast.serving.step.StepCost`, None where it
    cannot be answered), ``workload``, ``fits``, ``engine``, ``error``, ``note``."""

    groups: np.ndarray
    cost: list
    workload: list
    fits: np.ndarray
    engine: np.ndarray
    error: np.ndarray
    note: np.ndarray
    kv_tokens: np.ndarray  # the KV cache's capacity in tokens (inf: unknown)

    def steady(self, with_policy: Callable | None = None) -> tuple[np.ndarray, np.ndarray]:
        """TTFT and TPOT per configuration, vectorised over those sharing a step cost (``with_policy``: maps each
        step cost's policy to the one to run, e.g. other overheads)."""
        n = len(self.cost)
        ttft, tpot = np.full(n, np.nan), np.full(n, np.nan)
        by_cost: dict[int, list[int]] = {}
        for j, cost in enumerate(self.cost):
            if cost is not None:
                by_cost.setdefault(id(cost), []).append(j)
        for idx in by_cost.values():
            cost = self.cost[idx[0]]
            if with_policy is not None:
                cost = replace(cost, policy=with_policy(cost.policy))
            sws = [self.workload[j] for j in idx]
            st = steady_state(cost, np.array([w.isl for w in sws]), np.array([w.osl for w in sws]),
                              np.array([w.concurrency for w in sws]), kv_tokens=self.kv_tokens[idx])
            ttft[idx], tpot[idx] = st["ttft_ms"], st["tpot_ms"]
        return ttft, tpot


def plan_serving(rows: pd.DataFrame, predict: Callable | None = None,
                 policies: dict[str, EnginePolicy] | None = None) -> ServingPlan:
    """Each distinct configuration of ``rows`` parsed, and the step costs of those that can be answered: one grid per
    (model, dtype, split, engine) over every GPU its rows name (``policies``: engine -> policy replacing the
    default)."""
    missing = [c for c in ("model_path", "system", "isl", "osl", "batch_size", "tp_size") if c not in rows]
    if missing:
        raise UserError(f"serving rows need columns {', '.join(missing)} (the serving.csv schema)")
    keys = [c for c in _KEY if c in rows]
    groups = rows.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    first = pd.Series(np.arange(len(rows))).groupby(groups).first().to_numpy()
    n = len(first)
    plan = ServingPlan(groups, [None] * n, [None] * n, np.full(n, None, dtype=object), np.full(n, None, dtype=object),
                       np.full(n, "", dtype=object), np.full(n, None, dtype=object), np.full(n, np.inf))
    todo: dict[tuple, list[tuple[int, str]]] = {}
    for j, i in enumerate(first):  # one workload per distinct configuration
        try:
            sw, gpu, plan.note[j] = serve_row_workload(rows.iloc[i])
            engine, version = _engine(rows.iloc[i])
            plan.engine[j] = engine
            check_gpu_dtype(get_gpu(gpu), sw.dtype)
            plan.workload[j] = sw
            todo.setdefault((sw.model, sw.dtype, sw.parallel, engine, version), []).append((j, gpu))
        except (SpecError, UnknownSpecError, ValueError, KeyError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            plan.error[j] = str(message).split("; all known:")[0]
    for (spec, dtype, parallel, engine, version), items in todo.items():
        policy = (policies or {}).get(engine) or engine_policy(engine)
        gpus = list(dict.fromkeys(g for _, g in items))
        costs, failed = {}, {}
        try:
            costs = step_costs(spec, dtype, parallel, [get_gpu(g) for g in gpus], predict, policy, version)
        except (SpecError, ValueError, KeyError) as exc:
            for g in gpus:  # one GPU's failure (a wide-EP layout its nodes cannot split) is not the others'
                try:
                    costs.update(step_costs(spec, dtype, parallel, [get_gpu(g)], predict, policy, version))
                except (SpecError, ValueError, KeyError) as one:
                    failed[g] = str(one if len(gpus) > 1 else exc)
        for j, gpu in items:
            if gpu in failed:
                plan.error[j] = failed[gpu]
                continue
            plan.cost[j] = costs[gpu]
            memory = serve_memory(plan.workload[j], get_gpu(gpu), policy.kv_memory_fraction)
            plan.fits[j] = memory.fits
            plan.kv_tokens[j] = kv_capacity_tokens(memory, plan.workload[j].dtype)
    return plan


def evaluate_serving(rows: pd.DataFrame, predict: Callable | None = None,
                     policies: dict[str, EnginePolicy] | None = None) -> pd.DataFrame:
    """``rows`` plus ``pred_ttft_ms``, ``pred_tpot_ms``, ``fits``, ``engine``, ``error``, ``note`` and, where
    measured, the APEs: each row forecast as its ``backend`` runs it (:func:`plan_serving`), the steady state
    vectorised over the rows sharing a step cost."""
    plan = plan_serving(rows, predict, policies)
    return with_disaggregated(with_forecasts(rows, plan, *plan.steady()), predict)


def with_disaggregated(out: pd.DataFrame, predict: Callable | None = None) -> pd.DataFrame:
    """``out`` with its ``mode=disagg`` rows forecast by :func:`tilecast.serving.disagg.evaluate_disagg` (their
    forecasts, fit, error and APEs replaced)."""
    disagg = (out["mode"].astype(str) == "disagg").to_numpy() if "mode" in out else np.zeros(len(out), bool)
    if not disagg.any():
        return out
    dis = evaluate_disagg(out.loc[disagg], predict)
    for col in ("pred_ttft_ms", "pred_tpot_ms", "fits", "error"):
        out.loc[disagg, col] = dis[col].to_numpy()
    out.loc[disagg, "note"] = None
    for measured, pred in (("silicon_ttft_ms", "pred_ttft_ms"), ("silicon_tpot_ms", "pred_tpot_ms")):
        if measured in out:
            out[pred.replace("pred_", "ape_").replace("_ms", "_pct")] = ape_pct(
                out[pred].to_numpy(float), pd.to_numeric(out[measured], errors="coerce").to_numpy(float))
    return out


def with_forecasts(rows: pd.DataFrame, plan: ServingPlan, ttft: np.ndarray, tpot: np.ndarray) -> pd.DataFrame:
    """``rows`` with the plan's per-configuration forecasts (:data:`SERVE_COLUMNS`) and the APEs."""
    out = rows.copy()
    g = plan.groups
    out["pred_ttft_ms"], out["pred_tpot_ms"] = ttft[g], tpot[g]
    out["fits"], out["engine"], out["error"], out["note"] = plan.fits[g], plan.engine[g], plan.error[g], plan.note[g]
    for measured, pred in (("silicon_ttft_ms", "pred_ttft_ms"), ("silicon_tpot_ms", "pred_tpot_ms")):
        if measured in out:
            out[pred.replace("pred_", "ape_").replace("_ms", "_pct")] = ape_pct(
                out[pred].to_numpy(float), pd.to_numeric(out[measured], errors="coerce").to_numpy(float))
    return out


def serving_summary(table: pd.DataFrame, by: str = "system") -> pd.DataFrame:
    """MAPE of TTFT and TPOT over the answered rows, per ``by`` (and ``all``)."""
    ok = table.loc[table["error"].fillna("") == ""]
    if ok.empty:
        return pd.DataFrame(columns=[by, "rows", "ttft_mape_pct", "tpot_mape_pct"])
    parts = [(str(k), g) for k, g in ok.groupby(by)] + [("all", ok)]
    return pd.DataFrame([{by: k, "rows": len(g), "ttft_mape_pct": float(g["ape_ttft_pct"].mean()),
                          "tpot_mape_pct": float(g["ape_tpot_pct"].mean())} for k, g in parts])
