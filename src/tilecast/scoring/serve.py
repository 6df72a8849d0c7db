"""Serve cells (a matrix's ``serve`` section) -> the graphs they need -> TTFT, TPOT, throughput, memory, cost.

A serve cell ``(model, gpu, dtype, tp, isl, osl, concurrency)`` needs four graphs, none of them depending
on the GPU: the one-request prefill over ``isl`` tokens, and the decode step of ``concurrency`` requests at
the three KV lengths of :func:`tilecast.forecast.serve.decode_lengths`. The engine builds the distinct
graphs of every cell once (decode steps are shared by every GPU, osl and cell that needs them, and by the
graph cache between runs), forecasts their distinct ops with the other cells' ops, and sums them per
(graph, GPU); :func:`assemble` then applies the same harness, memory and throughput formulas as
:func:`tilecast.forecast.serve.forecast_serve`, vectorised over cells (tests check the two agree).

A cell whose workload is invalid (tp not dividing the heads), whose GPU lacks the dtype, or whose graphs
or ops fail carries the error text; its numbers are then null. A cell that does not fit keeps its numbers
with ``fits`` false and the memory it needs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilecast.forecast.serve import (
    SERVE_RESERVE_GIB,
    SERVE_USABLE_FRACTION,
    SIMPSON,
    ServeWorkload,
    capacity_bytes,
    decode_lengths,
    fitting_concurrency,
    harness,
    request_latency_ms,
    serve_memory_terms,
    tokens_per_s_per_gpu,
)
from tilecast.scoring.matrix import BUILD_KEYS, NO_PARALLEL, SERVE_KEYS
from tilecast.scoring.metrics import GIB, S_PER_HOUR
from tilecast.scoring.pricing import Pricing
from tilecast.specs import SpecError, get_gpu, get_model

#: the graphs of a serve cell: the prefill, then the decode step at each of the three KV lengths
ROLES = ("prefill", "decode_0", "decode_1", "decode_2")


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


def component_keys(cells: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per role, the :data:`BUILD_KEYS` of each cell's graph (index aligned with ``cells``)."""
    parallel = np.where(cells["tp"].to_numpy() > 1, "tp" + cells["tp"].astype(str), NO_PARALLEL)
    base = {"model": cells["model"].to_numpy(), "mode": "inference", "parallel": parallel, "fused": False,
            "dtype": cells["dtype"].to_numpy(), "serving": True}
    isl, osl = cells["isl"].to_numpy(dtype=np.int64), cells["osl"].to_numpy(dtype=np.int64)
    out = {"prefill": pd.DataFrame({**base, "batch": 1, "seq_len": isl, "kv_len": 0}, index=cells.index)}
    conc = cells["concurrency"].to_numpy(dtype=np.int64)
    for i, kv in enumerate(decode_lengths(isl, osl)):
        out[f"decode_{i}"] = pd.DataFrame({**base, "batch": conc, "seq_len": 1, "kv_len": kv}, index=cells.index)
    return {role: frame[list(BUILD_KEYS)] for role, frame in out.items()}


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


def assemble(cells: pd.DataFrame, graph_ids: dict[str, np.ndarray], summary: pd.DataFrame,
             info: pd.DataFrame, forecast_errors: pd.DataFrame, unsupported: dict[tuple[str, str], str],
             pricing: Pricing) -> pd.DataFrame:
    """The serve table's numbers per cell (columns of :data:`tilecast.scoring.schema.SERVE_SCHEMA` except
    provenance). ``graph_ids[role]``: each cell's graph (-1 for an invalid workload); ``summary``:
    ``graph_id, gpu, e2e_ms, nan_ops`` per (graph, GPU); ``info``: ``graph_id, graph_error``;
    ``forecast_errors``: ``graph_id, gpu, forecast_error``; ``cells``: :data:`SERVE_KEYS`, ``n_gpus`` and
    ``workload_error``."""
    out = cells.reset_index(drop=True).copy()
    lookup = summary.set_index(["graph_id", "gpu"])
    gerr = info.set_index("graph_id")["graph_error"]
    ferr = forecast_errors.set_index(["graph_id", "gpu"])["forecast_error"]
    ms, errors = {}, [out["workload_error"]]
    pair = pd.Series(list(zip(out["gpu"], out["dtype"], strict=True)), index=out.index, dtype=object)
    errors.append(pair.map(unsupported) if unsupported else pd.Series(None, index=out.index, dtype=object))
    for role in ROLES:
        key = pd.MultiIndex.from_arrays([graph_ids[role], out["gpu"].to_numpy()])
        hit = lookup.reindex(key)
        e2e = hit["e2e_ms"].to_numpy(dtype=float)
        nan_ops = hit["nan_ops"].fillna(0).to_numpy() > 0
        ms[role] = np.where(nan_ops, np.nan, e2e)
        errors.append(pd.Series(gerr.reindex(graph_ids[role]).to_numpy(), index=out.index, dtype=object))
        errors.append(pd.Series(np.where(nan_ops, ferr.reindex(key).to_numpy(), None), index=out.index,
                                dtype=object))
    prefill = ms["prefill"]
    decode = sum(w * ms[f"decode_{i}"] for i, w in enumerate(SIMPSON))
    c, osl, tp = (out[k].to_numpy(dtype=float) for k in ("concurrency", "osl", "tp"))
    ttft, tpot = harness(prefill, decode, c, osl)
    ok = np.isfinite(ttft) & np.isfinite(tpot) & (tpot > 0) & (prefill > 0)
    errors.append(pd.Series(np.where(ok, None, "forecast is not a positive finite step time"), index=out.index,
                            dtype=object))
    out["error"] = _first_error(*errors)
    bad = out["error"].notna().to_numpy()
    nan = lambda a: np.where(bad, np.nan, a)  # noqa: E731 - a failed cell's numbers are null
    out["prefill_ms"], out["decode_step_ms"] = nan(prefill), nan(decode)
    out["ttft_ms"], out["tpot_ms"] = nan(ttft), nan(tpot)
    out["request_latency_ms"] = nan(request_latency_ms(ttft, tpot, osl))
    out["tokens_per_s_per_gpu"] = nan(tokens_per_s_per_gpu(ttft, tpot, c, osl, tp))
    out["tokens_per_s_per_user"] = nan(1e3 / tpot)

    gpus = list(pd.unique(out["gpu"]))
    mem = _memory(out)
    cap = out["gpu"].map({g: capacity_bytes(get_gpu(g), SERVE_USABLE_FRACTION, SERVE_RESERVE_GIB)
                          for g in gpus}).to_numpy(dtype=float)
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


__all__ = ["ROLES", "SERVE_KEYS", "assemble", "component_keys", "workload_errors"]
