"""Serve report tables from a serve table (``serve_scores.parquet``, :data:`tilecast.scoring.schema.SERVE_SCHEMA`).

A serve workload is ``model, dtype, isl, osl`` (:data:`SERVE_WORKLOAD`); the fleet owner chooses the GPU,
the tensor parallelism ``tp`` and how many requests run at once (``concurrency``). A cell is *usable* when it
was forecast (no error, finite TTFT / TPOT / throughput), fits in memory and meets both targets of
:class:`ServeTargets` (TPOT: the decode time per output token a user sees; TTFT: time to the first token).

- :func:`serve_cost`: per workload and GPU, the usable (tp, concurrency) with the lowest cost per 1M output
  tokens, cheapest GPU first;
- :func:`serve_recommendations`: per workload, the cheapest GPU of :func:`serve_cost` with its margin, the
  confidence of its TPOT forecast and what changed since the previous run;
- :func:`serve_capacity`: per workload, GPU and tp, the largest concurrency whose KV cache fits;
- :func:`serve_failed`: cells that could not be forecast, by error.

A report without a serve table (or with an empty one) has no serve section.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.reports.tables import confidence, price_label, since_previous
from tilecast.specs.catalog import positive

#: what a serve decision is made for
SERVE_WORKLOAD = ("model", "dtype", "isl", "osl")
#: optional columns of a serve table holding a forecast interval of ``tpot_ms`` (low, high)
TPOT_INTERVAL_COLUMNS = ("tpot_lo_ms", "tpot_hi_ms")


class ServeConfigError(UserError):
    """An invalid ``serve`` node of the report config (names the key and the value)."""


@dataclass(frozen=True)
class ServeTargets:
    """What a serve cell must meet (``conf/report.yaml`` ``serve:``), and which workloads the Pareto plot shows."""

    tpot_ms: float = 50.0  # 20 output tokens/s per user
    ttft_ms: float = 2000.0
    pareto: tuple[tuple[str, str, int, int], ...] = ()  # (model, dtype, isl, osl) panels; empty: every workload

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> ServeTargets:
        """From the ``serve`` node (a plain dict); a missing or null key takes the default above."""
        cfg = cfg or {}
        known = {"tpot_target_ms", "ttft_target_ms", "pareto"}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ServeConfigError(f"serve: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        default = cls()
        values = {}
        for key, attr in (("tpot_target_ms", "tpot_ms"), ("ttft_target_ms", "ttft_ms")):
            v = cfg.get(key)
            if v is None:
                values[attr] = getattr(default, attr)
            elif not positive(v):
                raise ServeConfigError(f"serve.{key} has invalid value {v!r} (expected a positive number of ms)")
            else:
                values[attr] = float(v)
        panels = []
        for i, p in enumerate(cfg.get("pareto") or []):
            if not isinstance(p, Mapping) or any(p.get(k) is None for k in SERVE_WORKLOAD):
                raise ServeConfigError(f"serve.pareto[{i}] has invalid value {p!r} (expected a mapping with "
                                       f"{', '.join(SERVE_WORKLOAD)})")
            panels.append((str(p["model"]), str(p["dtype"]), int(p["isl"]), int(p["osl"])))
        return cls(values["tpot_ms"], values["ttft_ms"], tuple(panels))

    def describe(self) -> str:
        return f"TPOT <= {self.tpot_ms:g} ms ({1e3 / self.tpot_ms:.3g} tokens/s per user), TTFT <= {self.ttft_ms:g} ms"


def forecast_cells(serve: pd.DataFrame) -> pd.DataFrame:
    """Serve cells with a forecast (no error, finite TTFT, TPOT and throughput)."""
    finite = np.ones(len(serve), dtype=bool)
    for col in ("ttft_ms", "tpot_ms", "tokens_per_s_per_gpu"):
        finite &= np.isfinite(serve[col].to_numpy(dtype=float))
    return serve.loc[serve["error"].isna().to_numpy() & finite]


def fitting_cells(serve: pd.DataFrame) -> pd.DataFrame:
    ok = forecast_cells(serve)
    return ok.loc[ok["fits"].fillna(False).astype(bool)]


def usable(serve: pd.DataFrame, targets: ServeTargets) -> pd.DataFrame:
    """Cells that fit and meet both targets, with a cost."""
    fit = fitting_cells(serve)
    cost = fit["cost_per_1m_output_tokens_usd"].to_numpy(dtype=float)
    return fit.loc[(fit["tpot_ms"] <= targets.tpot_ms).to_numpy() & (fit["ttft_ms"] <= targets.ttft_ms).to_numpy()
                   & np.isfinite(cost)]


def _margin_pct(rows: pd.DataFrame, targets: ServeTargets) -> pd.Series:
    """How far under the tighter of the two targets (negative: over it)."""
    tpot = (targets.tpot_ms - rows["tpot_ms"]) / targets.tpot_ms
    ttft = (targets.ttft_ms - rows["ttft_ms"]) / targets.ttft_ms
    return 100 * np.minimum(tpot, ttft)


_COST_COLS = ["gpu", "tp", "concurrency", "tpot_ms", "ttft_ms", "tokens_per_s_per_user", "tokens_per_s_per_gpu",
              "cost_per_1m_output_tokens_usd"]


def serve_cost(serve: pd.DataFrame, targets: ServeTargets) -> pd.DataFrame:
    """Per workload and GPU: the (tp, concurrency) meeting the targets at the lowest cost per 1M output tokens.

    Rows per workload cheapest GPU first; a GPU with fitting cells but none meeting the targets comes last,
    cost blank, with its lowest TPOT in ``tpot_ms`` and ``meets`` false. Columns: :data:`SERVE_WORKLOAD`,
    ``gpu, tp, concurrency, tpot_ms, ttft_ms, tokens_per_s_per_user, tokens_per_s_per_gpu,
    cost_per_1m_output_tokens_usd, meets``.
    """
    keys = [*SERVE_WORKLOAD, "gpu"]
    fit = fitting_cells(serve)
    if fit.empty:
        return pd.DataFrame(columns=[*SERVE_WORKLOAD, *_COST_COLS, "meets", "price"])
    ok = usable(serve, targets)
    best = ok.loc[ok.groupby(keys)["cost_per_1m_output_tokens_usd"].idxmin()].assign(meets=True)
    rest = fit.loc[~fit.set_index(keys).index.isin(best.set_index(keys).index)]
    fastest = rest.loc[rest.groupby(keys)["tpot_ms"].idxmin()].assign(meets=False) if len(rest) else rest
    if len(fastest):
        fastest = fastest.assign(cost_per_1m_output_tokens_usd=np.nan)
    both = pd.concat([best, fastest])
    out = both[[*SERVE_WORKLOAD, *_COST_COLS, "meets"]].assign(price=price_label(both, both["meets"].astype(bool)))
    out = out.assign(_miss=~out["meets"].astype(bool))
    return (out.sort_values([*SERVE_WORKLOAD, "_miss", "cost_per_1m_output_tokens_usd", "tpot_ms", "gpu"])
            .drop(columns="_miss").reset_index(drop=True))


def serve_recommendations(serve: pd.DataFrame, targets: ServeTargets, previous: pd.DataFrame | None = None,
                          threshold: float = 0.05) -> pd.DataFrame:
    """Per serve workload: the cheapest GPU (with tp and concurrency) meeting the targets.

    Columns: :data:`SERVE_WORKLOAD`, ``gpu, tp, concurrency, tpot_ms, ttft_ms, margin_pct`` (under the tighter
    target), ``usd_per_1m_output_tokens, tokens_per_s_per_gpu, meeting`` (GPUs meeting the
    targets), ``confidence`` (the TPOT interval, :data:`TPOT_INTERVAL_COLUMNS`) and, with ``previous`` (the
    previous run's serve table), ``since_previous``. Where no GPU meets them, ``gpu`` says so and the numbers
    are those of the lowest-TPOT fitting cell.
    """
    cur = _serve_pick(serve, targets)
    if cur.empty or previous is None:
        return cur
    prev = _serve_pick(previous, targets)
    keys = list(SERVE_WORKLOAD)
    cols = [*keys, "gpu", "tp", "concurrency", "tpot_ms"]
    prev = prev[cols] if len(prev) else pd.DataFrame(columns=cols)
    both = cur[keys].merge(prev, on=keys, how="left")
    cur["since_previous"] = [since_previous(c, p, ("gpu", "tp", "concurrency"), "tpot_ms", "TPOT", threshold)
                             for c, p in zip(cur.to_dict("records"), both.to_dict("records"), strict=True)]
    return cur


def _serve_pick(serve: pd.DataFrame, targets: ServeTargets) -> pd.DataFrame:
    keys = list(SERVE_WORKLOAD)
    fit = fitting_cells(serve)
    if fit.empty:
        return pd.DataFrame()
    ok = usable(serve, targets)
    best = ok.loc[ok.groupby(keys)["cost_per_1m_output_tokens_usd"].idxmin()]
    fastest = fit.loc[fit.groupby(keys)["tpot_ms"].idxmin()]
    fastest = fastest.loc[~fastest.set_index(keys).index.isin(best.set_index(keys).index)]
    rows = pd.concat([best.assign(_meets=True), fastest.assign(_meets=False)])
    counts = ok.groupby(keys)["gpu"].nunique().rename("meeting")
    lo, hi = TPOT_INTERVAL_COLUMNS
    has_interval = lo in rows and hi in rows
    out = pd.DataFrame({
        **{k: rows[k] for k in keys},
        "gpu": np.where(rows["_meets"], rows["gpu"], "none meets the targets; lowest TPOT " + rows["gpu"]),
        "tp": rows["tp"], "concurrency": rows["concurrency"], "tpot_ms": rows["tpot_ms"], "ttft_ms": rows["ttft_ms"],
        "margin_pct": _margin_pct(rows, targets),
        "usd_per_1m_output_tokens": rows["cost_per_1m_output_tokens_usd"].where(rows["_meets"]),
        "price": price_label(rows, rows["_meets"]),
        "tokens_per_s_per_gpu": rows["tokens_per_s_per_gpu"],
        "confidence": confidence(rows["tpot_ms"], rows[lo] if has_interval else None,
                                 rows[hi] if has_interval else None,
                                 pd.Series(targets.tpot_ms, index=rows.index)),
    })
    out = out.merge(counts.reset_index(), on=keys, how="left")
    out["meeting"] = out["meeting"].fillna(0).astype(int)
    out = out[[*out.columns.drop(["meeting", "confidence"]), "meeting", "confidence"]]
    return out.sort_values(keys).reset_index(drop=True)


def serve_capacity(serve: pd.DataFrame) -> pd.DataFrame:
    """Per workload, GPU and tp: the largest concurrency whose KV cache fits (``max_concurrency``), the largest
    scored concurrency that fits, and the memory it is bounded by (weights and capacity per GPU, GiB)."""
    keys = [*SERVE_WORKLOAD, "gpu", "tp"]
    ok = forecast_cells(serve)
    if ok.empty:
        return pd.DataFrame(columns=[*keys, "max_concurrency", "largest_scored_fitting", "weights_gib",
                                     "gpu_mem_gib"])
    fit_conc = ok["concurrency"].where(ok["fits"].fillna(False).astype(bool))
    out = (ok.assign(_fit=fit_conc).groupby(keys)
           .agg(max_concurrency=("max_concurrency", "max"), largest_scored_fitting=("_fit", "max"),
                weights_gib=("weights_gib", "first"), gpu_mem_gib=("gpu_mem_gib", "first"))
           .reset_index())
    out["largest_scored_fitting"] = out["largest_scored_fitting"].astype("Int64")
    out["max_concurrency"] = out["max_concurrency"].astype("Int64")
    return out.sort_values([*SERVE_WORKLOAD, "gpu", "tp"]).reset_index(drop=True)


def serve_failed(serve: pd.DataFrame) -> pd.DataFrame:
    """Serve cells that could not be forecast, grouped by error text (how many cells, an example); a cell whose
    GPU has no peak for its dtype is not supported, not failed (not listed)."""
    from tilecast.scoring.engine import not_supported

    bad = serve.loc[serve["error"].notna().to_numpy() & ~not_supported(serve["error"])]
    if bad.empty:
        return pd.DataFrame(columns=["error", "cells", "example"])
    ex = (bad["model"] + " " + bad["gpu"] + " " + bad["dtype"] + " tp" + bad["tp"].astype(str) + " isl"
          + bad["isl"].astype(str) + " osl" + bad["osl"].astype(str) + " c" + bad["concurrency"].astype(str))
    return (bad.assign(example=ex).groupby("error").agg(cells=("example", "size"), example=("example", "first"))
            .reset_index().sort_values("cells", ascending=False).reset_index(drop=True))


def serve_workloads(serve: pd.DataFrame, targets: ServeTargets) -> list[tuple[str, str, int, int]]:
    """The workloads the report's serving chart lists: the configured ones present in the table; by default one per
    (model, dtype), at the input / output lengths most models were scored at (ties: the shortest)."""
    fit = fitting_cells(serve)
    have = sorted(set(zip(fit["model"], fit["dtype"], fit["isl"].astype(int), fit["osl"].astype(int), strict=True)))
    if targets.pareto:
        return [w for w in targets.pareto if w in set(have)]
    models_at: dict[tuple[int, int], set[str]] = {}
    for model, _, isl, osl in have:
        models_at.setdefault((isl, osl), set()).add(model)
    rank = {lens: (-len(m), sum(lens), lens) for lens, m in models_at.items()}
    best: dict[tuple[str, str], tuple[int, int]] = {}
    for model, dtype, isl, osl in have:
        cur = best.get((model, dtype))
        if cur is None or rank[(isl, osl)] < rank[cur]:
            best[(model, dtype)] = (isl, osl)
    return [(m, d, *lens) for (m, d), lens in sorted(best.items())]
