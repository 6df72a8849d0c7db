"""Expert-parallel all-to-all (DeepEP dispatch / combine) time: a closed form fitted on the DeepEP tables
(docs/method.md §18).

Per GPU, a row sends the bytes of :func:`tilecast.tiles.a2a.a2a_bytes` (NVLink share and network share). The time
is a fixed cost plus the bytes over the bandwidth the kernel reaches:

- ``ll`` (low-latency, decode): ``t0 + nvlink_bytes / (eff x link_gbs)``;
- ``normal`` (prefill): the kernel streams through ``sms`` SMs, each moving at most ``per_sm_gbs``, so the
  bandwidth is ``1 / (1 / (eff x link_gbs) + 1 / (sms x per_sm_gbs))`` (the two limits in series);

plus, across nodes, the network share over ``network_gbs`` at the same efficiency (the data measures one node
only: unchecked). ``t0`` (us), ``eff`` and ``per_sm_gbs`` per (mode, direction) are :data:`A2A_CONSTANTS`, the
fit of :func:`fit_a2a` on the shipped tables (``data/aiconfigurator_moe/deepep_*``; a test refits them); the
link is the spec sheet's (:attr:`GpuSpec.link_gbs`), so a GPU with another NVLink generation scales by it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from tilecast.errors import UserError
from tilecast.specs import GpuSpec, get_gpu
from tilecast.tiles.a2a import A2A_MODES, A2A_OPS, a2a_row_errors
from tilecast.tiles.roofline import a2a_rows_bytes, a2a_sms

GB_SI = 1e9


@dataclass(frozen=True)
class A2AConstants:
    """Fitted constants of one (mode, direction): fixed cost (us), link efficiency, per-SM bandwidth (GB/s;
    normal mode only, ``inf`` for ll)."""

    t0_us: float
    eff: float
    per_sm_gbs: float = float("inf")


#: (a2a_mode, OPName) -> constants: :func:`fit_a2a` on the shipped DeepEP tables, rounded
A2A_CONSTANTS: dict[tuple[str, str], A2AConstants] = {
    ("ll", "a2a_combine"): A2AConstants(17.09, 0.610),
    ("ll", "a2a_dispatch"): A2AConstants(19.29, 0.382),
    ("normal", "a2a_combine"): A2AConstants(44.71, 1.0, 14.84),
    ("normal", "a2a_dispatch"): A2AConstants(34.69, 1.0, 11.58),
}


def _link_gbs(rows: pd.DataFrame, gpu: GpuSpec | None, attr: str) -> np.ndarray:
    if gpu is not None:
        return np.full(len(rows), float(getattr(gpu, attr) or np.nan))
    lut = {d: float(getattr(get_gpu(str(d)), attr) or np.nan) for d in pd.unique(rows["Device"])}
    return rows["Device"].map(lut).to_numpy(dtype=float)


def _model_us(nv_bytes: np.ndarray, net_bytes: np.ndarray, link: np.ndarray, network: np.ndarray, sms: np.ndarray,
              t0_us: float, eff: float, per_sm_gbs: float) -> np.ndarray:
    sm_limit = 1.0 / (sms * per_sm_gbs) if np.isfinite(per_sm_gbs) else 0.0
    nv_s = nv_bytes / GB_SI * (1.0 / (eff * link) + sm_limit)
    with np.errstate(divide="ignore", invalid="ignore"):
        net_s = np.where(net_bytes > 0, net_bytes / GB_SI / (eff * network), 0.0)
    return t0_us + 1e6 * np.maximum(nv_s, net_s)


def _check(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    ops = rows["OPName"].astype(str).to_numpy()
    modes = rows["a2a_mode"].astype(str).to_numpy() if "a2a_mode" in rows else np.full(len(rows), "normal")
    if not np.isin(ops, list(A2A_OPS)).all():
        raise ValueError(f"not all-to-all rows: OPName must be one of {', '.join(sorted(A2A_OPS))}")
    if not np.isin(modes, A2A_MODES).all():
        raise UserError(f"unknown a2a_mode {modes[~np.isin(modes, A2A_MODES)][0]!r}; known: {', '.join(A2A_MODES)}")
    return ops, modes


def a2a_ms(rows: pd.DataFrame, gpu: GpuSpec | None = None,
           constants: dict[tuple[str, str], A2AConstants] = A2A_CONSTANTS) -> np.ndarray:
    """Time (ms) of each all-to-all row on ``gpu`` (or its ``Device``)."""
    if len(rows) == 0:
        return np.zeros(0)
    ops, modes = _check(rows)
    nv, net = a2a_rows_bytes(rows)
    link, network, sms = _link_gbs(rows, gpu, "link_gbs"), _link_gbs(rows, gpu, "network_gbs"), a2a_sms(rows)
    out = np.full(len(rows), np.nan)
    for (mode, op), c in constants.items():
        sel = (modes == mode) & (ops == op)
        if sel.any():
            out[sel] = _model_us(nv[sel], net[sel], link[sel], network[sel], sms[sel], c.t0_us, c.eff,
                                 c.per_sm_gbs) / 1e3
    return out


def fit_a2a(rows: pd.DataFrame) -> dict[tuple[str, str], A2AConstants]:
    """Constants per (mode, direction) minimising the squared log error on measured all-to-all rows (``Latency``
    in ms, each row's ``Device``; :func:`tilecast.tiles.moe_sources.deepep_rows` makes them from the tables)."""
    ops, modes = _check(rows)
    nv, net = a2a_rows_bytes(rows)
    link, network, sms = _link_gbs(rows, None, "link_gbs"), _link_gbs(rows, None, "network_gbs"), a2a_sms(rows)
    measured_us = rows["Latency"].to_numpy(dtype=float) * 1e3
    out = {}
    for mode, op in sorted(set(zip(modes, ops, strict=True))):
        sel = (modes == mode) & (ops == op)
        normal = mode == "normal"

        def resid(x, sel=sel, normal=normal):
            t0, eff, per_sm = np.exp(x[0]), 1.0 / (1.0 + np.exp(-x[1])), np.exp(x[2]) if normal else np.inf
            pred = _model_us(nv[sel], net[sel], link[sel], network[sel], sms[sel], t0, eff, per_sm)
            return np.log(pred) - np.log(measured_us[sel])

        x = least_squares(resid, np.array([np.log(20.0), 0.0, np.log(30.0)][:3 if normal else 2])).x
        out[(mode, op)] = A2AConstants(float(np.exp(x[0])), float(1.0 / (1.0 + np.exp(-x[1]))),
                                       float(np.exp(x[2])) if normal else float("inf"))
    return out


def deepep_measured_rows() -> pd.DataFrame:
    """Both directions of the shipped DeepEP tables as all-to-all rows with ``Latency`` (ms) and ``Source`` (the
    table)."""
    from tilecast.data import load_aiconfigurator_moe
    from tilecast.tiles.moe_sources import deepep_rows

    parts = []
    for table in ("deepep_ll", "deepep_normal"):
        frame = load_aiconfigurator_moe(table)
        for op in sorted(A2A_OPS, reverse=True):
            parts.append(deepep_rows(frame, f"aiconfigurator_{table}", op).assign(Source=table))
    return pd.concat(parts, ignore_index=True)


def a2a_errors(rows: pd.DataFrame) -> np.ndarray:
    """Per all-to-all row, why it cannot be costed (empty where it can; :func:`tilecast.tiles.a2a.a2a_row_errors`)."""
    def col(name: str, default: object = np.nan) -> np.ndarray:
        return (pd.to_numeric(rows[name], errors="coerce").to_numpy(float) if name in rows
                else np.full(len(rows), default, dtype=float))

    modes = rows["a2a_mode"].astype(object).where(rows["a2a_mode"].notna(), "normal") if "a2a_mode" in rows \
        else pd.Series("normal", index=rows.index)
    return a2a_row_errors(col("tokens"), col("hidden"), col("topk"), col("experts"), col("ep"),
                          np.where(np.isfinite(col("nodes")), col("nodes"), 1.0), modes.to_numpy(dtype=object))


def forecast_deepep(frame: pd.DataFrame, schema: str, gpu: GpuSpec | None = None) -> pd.DataFrame:
    """A DeepEP table (``deepep_ll`` / ``deepep_normal`` schema) with ``pred_dispatch_ms``, ``pred_combine_ms`` and
    ``pred_ms`` (their sum: one MoE layer's round trip) per row; a row that cannot be answered gets ``error``."""
    from tilecast.specs import SpecError, UnknownSpecError
    from tilecast.tiles.moe_sources import deepep_rows

    out = frame.copy()
    error = pd.Series("", index=frame.index, dtype=object)
    names = (pd.Series(gpu.device_name, index=frame.index) if gpu is not None
             else frame[[c for c in ("device", "Device", "system") if c in frame][0]].astype(str))
    for name in pd.unique(names):
        try:
            get_gpu(str(name))
        except (SpecError, UnknownSpecError) as exc:
            error[names == name] = str(exc).split("; all known:")[0]
    preds = {}
    for op in ("a2a_dispatch", "a2a_combine"):
        rows = deepep_rows(frame, schema, op)
        rows["Device"] = names
        error = error.where(error != "", a2a_errors(rows))
        ok = (error == "").to_numpy()
        pred = np.full(len(rows), np.nan)
        if ok.any():
            pred[ok] = a2a_ms(rows.loc[ok], gpu)
        preds[op] = pred
    out["pred_dispatch_ms"] = preds["a2a_dispatch"]
    out["pred_combine_ms"] = preds["a2a_combine"]
    out["pred_ms"] = out["pred_dispatch_ms"] + out["pred_combine_ms"]
    if (error != "").any():
        out["error"] = error.to_numpy()
    return out
