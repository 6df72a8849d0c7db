"""Serve cells (a matrix's ``serve`` section) -> the graphs they need -> TTFT, TPOT, throughput, memory, cost.

A serve cell ``(model, gpu, dtype, tp, isl, osl, concurrency)`` runs on an engine (``engine``: the default one,
:data:`tilecast.forecast.serve.DEFAULT_ENGINE`) whose steps cost what :mod:`tilecast.serving.step`'s grid says: the
grid's graphs depend on (model, dtype, tp) only, so the cells of one such configuration share them, and the engine
builds each distinct graph once, forecasts their distinct ops with the other cells' ops and sums them per (graph,
GPU), the all-reduces through the serving engine's own kernel (eager for the token graphs, CUDA-graph for the decode
graphs: :func:`engine_summaries`). :func:`assemble` turns each (configuration, GPU)'s grid into a
:class:`~tilecast.serving.step.StepCost` and runs :func:`tilecast.serving.steady.steady_state` vectorised over its
cells, with the memory and throughput formulas of :func:`tilecast.forecast.serve.forecast_serve` (tests check the
two agree).

A cell whose workload is invalid (tp not dividing the heads), whose GPU lacks the dtype, or whose graphs
or ops fail carries the error text; its numbers are then null. A cell that does not fit keeps its numbers
with ``fits`` false and the memory it needs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.forecast.serve import (
    DEFAULT_ENGINE,
    KV_CACHE_SCALE,
    SERVE_RESERVE_GIB,
    ServeWorkload,
    capacity_bytes,
    fitting_concurrency,
    request_latency_ms,
    serve_memory_terms,
    tokens_per_s_per_gpu,
)
from tilecast.scoring.aggregate import summarise_cells
from tilecast.scoring.matrix import BUILD_KEYS, NO_PARALLEL, SERVE_KEYS
from tilecast.scoring.metrics import GIB, S_PER_HOUR
from tilecast.scoring.pricing import Pricing
from tilecast.serving.engine_allreduce import engine_comm
from tilecast.serving.policy import engine_policy
from tilecast.serving.steady import steady_state
from tilecast.serving.step import DECODE_ATTN, PREFILL_ATTN, config_fp8_gemms, costs_from_arrays, grid_keys
from tilecast.specs import SpecError, get_gpu, get_model

#: the grid's graphs, one role each (:func:`tilecast.serving.step.grid_keys`)
GRID = grid_keys()
ROLES = tuple(f"{r}_{i}" for i, r in zip(GRID.index, GRID["role"], strict=True))


def workload_errors(cells: pd.DataFrame) -> pd.Series:
    """Why a cell's serve workload is invalid (:class:`ServeWorkload`'s named error), None where it is valid;
    checked once per distinct (model, dtype, tp, isl, osl, concurrency)."""
    keys = ["model", "dtype", "tp", "isl", "osl", "concurrency"]
    distinct = cells[keys].drop_duplicates()
    text = {}
    for row in distinct.itertuples(index=False):
        try:
            ServeWorkload(get_model(row.model), row.dtype, int(row.tp), int(row.isl), int(row.osl),
                          int(row.concurrency))
        except SpecError as exc:
            text[tuple(row)] = str(exc)
    if not text:
        return pd.Series(None, index=cells.index, dtype=object)
    return pd.Series([text.get(k) for k in cells[keys].itertuples(index=False, name=None)], index=cells.index,
                     dtype=object)


def component_keys(cells: pd.DataFrame) -> tuple[np.ndarray, dict[str, pd.DataFrame]]:
    """Each cell's configuration code (its (model, dtype, tp)), and per role the :data:`BUILD_KEYS` of each
    configuration's graph (index: the code)."""
    keys = ["model", "dtype", "tp"]
    codes = cells.groupby(keys, sort=False).ngroup().to_numpy()  # numbered in order of first appearance
    conf = cells[keys].drop_duplicates().reset_index(drop=True)
    parallel = np.where(conf["tp"].to_numpy() > 1, "tp" + conf["tp"].astype(str), NO_PARALLEL)
    base = {"model": conf["model"].to_numpy(), "mode": "inference", "parallel": parallel, "fused": False,
            "dtype": conf["dtype"].to_numpy(), "serving": True}
    grids = [grid_keys(get_model(m).max_positions) for m in conf["model"]]
    out = {role: pd.DataFrame({**base, "batch": [g.at[i, "batch"] for g in grids],
                               "seq_len": [g.at[i, "seq_len"] for g in grids],
                               "kv_len": [g.at[i, "kv_len"] for g in grids]}, index=conf.index)[list(BUILD_KEYS)]
           for i, role in enumerate(ROLES)}
    return codes, out


def engine_summaries(rows: pd.DataFrame, distinct: pd.DataFrame, op_ms: np.ndarray, info: pd.DataFrame,
                     gpu_keys: list[str], token_ids: np.ndarray, decode_ids: np.ndarray,
                     engine: str = DEFAULT_ENGINE) -> pd.DataFrame:
    """Summaries (as :func:`tilecast.scoring.aggregate.summarise_cells`) of the grid graphs with their all-reduces
    through ``engine``'s own kernel: eager in the token graphs, CUDA-graph in the decode graphs."""
    ar = np.flatnonzero(distinct["kind"].to_numpy(dtype=object) == "allreduce")
    nbytes = distinct["bytes"].to_numpy(dtype=float)[ar]
    group = distinct["degree"].to_numpy(dtype=float)[ar]
    parts = []
    for mode, ids in (("eager", token_ids), ("graph", decode_ids)):
        ids = np.unique(ids[ids >= 0])
        sub_info = info.loc[info["graph_id"].isin(ids)]
        if sub_info.empty:
            continue
        ms = op_ms.copy()
        comm = engine_comm(engine, None, mode)
        for j, g in enumerate(gpu_keys):
            ms[ar, j] = np.where(np.isnan(op_ms[ar, j]), np.nan, comm.allreduce_ms(nbytes, get_gpu(g), group))
        parts.append(summarise_cells(rows.loc[rows["graph_id"].isin(ids)], ms, sub_info, gpu_keys))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["graph_id", "gpu", "e2e_ms"])


def _first_error(*columns: pd.Series) -> pd.Series:
    """Per row, the first non-null text of ``columns`` (in order), else None."""
    out = pd.Series(None, index=columns[0].index, dtype=object)
    for col in reversed(columns):
        out = col.where(col.notna(), out)
    return out.astype(object).where(out.notna(), None)


def _memory(cells: pd.DataFrame) -> pd.DataFrame:
    """Weights, KV cache, workspace and KV bytes per token per GPU, per cell (one formula per (model, dtype,
    isl) group, vectorised over tp, osl and concurrency)."""
    parts = []
    for (model, dtype, isl), g in cells.groupby(["model", "dtype", "isl"], sort=False):
        try:
            w, kv, ws, per_token = serve_memory_terms(get_model(model), str(dtype), int(isl), g["tp"].to_numpy(),
                                                      g["osl"].to_numpy(), g["concurrency"].to_numpy())
        except Exception:  # noqa: BLE001 - memory unknown: fits stays null, the latency stands
            w = kv = ws = per_token = np.full(len(g), np.nan)
        parts.append(pd.DataFrame({"weights_b": w, "kv_b": kv, "workspace_b": ws, "per_token_b": per_token},
                                  index=g.index))
    return pd.concat(parts).reindex(cells.index)


def assemble(cells: pd.DataFrame, graph_ids: tuple[np.ndarray, dict[str, np.ndarray]], summary: pd.DataFrame,
             info: pd.DataFrame, forecast_errors: pd.DataFrame, unsupported: dict[tuple[str, str], str],
             pricing: Pricing, learned: bool = True) -> pd.DataFrame:
    """The serve table's numbers per cell (columns of :data:`tilecast.scoring.schema.SERVE_SCHEMA` except
    provenance). ``graph_ids``: each cell's configuration code (-1 for an invalid workload) and per role each
    configuration's graph; ``summary``: :func:`engine_summaries`; ``info``: ``graph_id, graph_error``;
    ``forecast_errors``: ``graph_id, gpu, forecast_error``; ``cells``: :data:`SERVE_KEYS`, ``n_gpus`` and
    ``workload_error``; ``learned``: the kernels come from learned predictors (their fp8 GEMMs give back the fused
    activation quantisation, :data:`tilecast.serving.step.FUSED_QUANT_MS`), not the roofline."""
    out = cells.reset_index(drop=True).copy()
    codes, ids = graph_ids
    gerr = info.set_index("graph_id")["graph_error"]
    ferr = forecast_errors.set_index(["graph_id", "gpu"])["forecast_error"]
    errors = [out["workload_error"]]
    pair = pd.Series(list(zip(out["gpu"], out["dtype"], strict=True)), index=out.index, dtype=object)
    errors.append(pair.map(unsupported) if unsupported else pd.Series(None, index=out.index, dtype=object))
    policy = engine_policy(DEFAULT_ENGINE)
    n = len(out)
    res = {k: np.full(n, np.nan) for k in ("ttft_ms", "tpot_ms", "prefill_ms", "decode_step_ms", "kv_tokens")}
    grid_error = np.full(n, None, dtype=object)
    token_roles = [r for r in ROLES if r.startswith("token")]
    decode_roles = [r for r in ROLES if r.startswith("decode")]
    mem = _memory(out)
    cap = out["gpu"].map({g: capacity_bytes(get_gpu(g), policy.kv_memory_fraction, SERVE_RESERVE_GIB)
                          for g in pd.unique(out["gpu"])}).to_numpy(dtype=float)
    kv_scale = out["dtype"].map(lambda d: KV_CACHE_SCALE.get(str(d), 1.0)).to_numpy(dtype=float)
    kv_tokens = np.maximum(cap - mem["weights_b"].to_numpy() - mem["workspace_b"].to_numpy(), 0.0) \
        / (mem["per_token_b"].to_numpy() * kv_scale)
    kv_tokens = np.where(np.isfinite(kv_tokens), kv_tokens, np.inf)
    valid = codes >= 0
    # the summaries as dense (graph, GPU) arrays: one gather per (configuration, GPU)
    gpu_list = list(pd.unique(out["gpu"]))
    gcode = {g: j for j, g in enumerate(gpu_list)}
    n_graph = int(summary["graph_id"].max()) + 1 if len(summary) else 1
    dense = {k: np.full((n_graph, len(gpu_list)), np.nan) for k in ("e2e", "ap", "ad")}
    bad_ops = np.zeros((n_graph, len(gpu_list)), dtype=bool)
    known = summary["gpu"].isin(gcode).to_numpy()
    s_g = summary["graph_id"].to_numpy(dtype=np.int64)[known]
    s_j = summary["gpu"].map(gcode).to_numpy()[known].astype(np.int64)
    cols = {"e2e": ("e2e_ms",), "ap": PREFILL_ATTN, "ad": DECODE_ATTN}
    for k, names in cols.items():
        vals = summary["e2e_ms"].to_numpy(float) if k == "e2e" else sum(
            (summary[c].fillna(0.0).to_numpy(float) for c in names if c in summary), np.zeros(len(summary)))
        dense[k][s_g, s_j] = vals[known]
    bad_ops[s_g, s_j] = summary["nan_ops"].fillna(0).to_numpy()[known] > 0
    role_ids = np.stack([ids[r] for r in ROLES], axis=1) if len(ROLES) else np.zeros((0, 0), int)
    n_tok = len(token_roles)
    model_a, dtype_a, tp_a = (out[k].to_numpy() for k in ("model", "dtype", "tp"))
    isl_a, osl_a, conc_a = (out[k].to_numpy() for k in ("isl", "osl", "concurrency"))
    cell_gpu = out["gpu"].map(gcode).to_numpy()
    frame = pd.DataFrame({"code": codes, "gpu": cell_gpu})[valid]
    for (code, j), idx in frame.groupby(["code", "gpu"], sort=False).indices.items():
        idx = frame.index.to_numpy()[idx]
        gids = role_ids[code]
        e2e, ap, ad = dense["e2e"][gids, j], dense["ap"][gids, j], dense["ad"][gids, j]
        bad = np.isnan(e2e) | bad_ops[gids, j]
        if bad.any():
            k = int(gids[np.flatnonzero(bad)[0]])
            grid_error[idx] = gerr.get(k) or ferr.get((k, gpu_list[j])) or "a step-cost graph has no forecast"
            continue
        i0 = idx[0]
        spec = get_model(model_a[i0])
        parallel = f"tp{int(tp_a[i0])}" if int(tp_a[i0]) > 1 else None
        cost = costs_from_arrays(e2e[:n_tok], ap[:n_tok], e2e[n_tok:], ad[n_tok:], spec.num_layers, policy,
                                 config_fp8_gemms(spec, str(dtype_a[i0]), parallel) if learned else 0.0)
        st = steady_state(cost, isl_a[idx], osl_a[idx], conc_a[idx], kv_tokens=kv_tokens[idx])
        res["ttft_ms"][idx], res["tpot_ms"][idx] = st["ttft_ms"], st["tpot_ms"]
        res["prefill_ms"][idx], res["decode_step_ms"][idx] = st["prefill_step_ms"], st["decode_step_ms"]
    assert len(decode_roles) + len(token_roles) == len(ROLES)
    errors.append(pd.Series(grid_error, index=out.index, dtype=object))
    ttft, tpot = res["ttft_ms"], res["tpot_ms"]
    c, osl, tp = (out[k].to_numpy(dtype=float) for k in ("concurrency", "osl", "tp"))
    ok = np.isfinite(ttft) & np.isfinite(tpot) & (tpot > 0)
    errors.append(pd.Series(np.where(ok, None, "forecast is not a positive finite step time"), index=out.index,
                            dtype=object))
    out["error"] = _first_error(*errors)
    bad = out["error"].notna().to_numpy()
    nan = lambda a: np.where(bad, np.nan, a)  # noqa: E731 - a failed cell's numbers are null
    out["engine"] = DEFAULT_ENGINE
    out["prefill_ms"], out["decode_step_ms"] = nan(res["prefill_ms"]), nan(res["decode_step_ms"])
    out["ttft_ms"], out["tpot_ms"] = nan(ttft), nan(tpot)
    out["request_latency_ms"] = nan(request_latency_ms(ttft, tpot, osl))
    out["tokens_per_s_per_gpu"] = nan(tokens_per_s_per_gpu(ttft, tpot, c, osl, tp))
    out["tokens_per_s_per_user"] = nan(1e3 / tpot)

    gpus = list(pd.unique(out["gpu"]))
    need = (mem["weights_b"] + mem["kv_b"] + mem["workspace_b"]).to_numpy()
    known = np.isfinite(need)
    out["mem_required_gib"] = need / GIB
    out["gpu_mem_gib"] = out["gpu"].map({g: get_gpu(g).mem_gb for g in gpus}).to_numpy(dtype=float)
    out["weights_gib"] = mem["weights_b"].to_numpy() / GIB
    out["kv_cache_gib"] = mem["kv_b"].to_numpy() / GIB
    fits = pd.array(need <= cap, dtype="boolean")
    fits[~known] = pd.NA
    out["fits"] = fits
    fitting = fitting_concurrency(cap, mem["weights_b"].fillna(0).to_numpy(), mem["workspace_b"].fillna(0)
                                  .to_numpy(), mem["per_token_b"].fillna(1).to_numpy(),
                                  (out["isl"] + out["osl"]).to_numpy())
    out["max_concurrency"] = pd.array(np.where(known, fitting, 0), dtype="Int64")
    out.loc[~known, "max_concurrency"] = pd.NA

    pricing.require(gpus)
    price = out["gpu"].map({g: pricing.prices[g].usd_per_gpu_hour for g in gpus}).to_numpy(dtype=float)
    out["usd_per_gpu_hour"] = price
    out["price_estimate"] = out["gpu"].map({g: pricing.prices[g].estimate for g in gpus}).astype(bool)
    out["cost_per_1m_output_tokens_usd"] = price / (out["tokens_per_s_per_gpu"].to_numpy() * S_PER_HOUR) * 1e6
    unfit = ~fits.fillna(True).to_numpy(bool)  # a configuration that does not fit cannot run: no throughput, no cost
    out.loc[unfit, ["tokens_per_s_per_gpu", "tokens_per_s_per_user", "cost_per_1m_output_tokens_usd"]] = np.nan
    return out.drop(columns=["workload_error"])


__all__ = ["ROLES", "SERVE_KEYS", "assemble", "component_keys", "engine_summaries", "workload_errors"]
