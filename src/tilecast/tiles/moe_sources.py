"""Kernel rows from AIConfigurator's mixture-of-experts era tables (frames in, frames out; row order and index
kept so forecasts align back to the input rows).

- ``moe`` -> ``moe`` rows: ``tokens = num_tokens`` (the layer's tokens over the whole EP group), ``hidden =
  hidden_size``, ``inter = inter_size`` (per expert, before the ``moe_tp`` split: the table's value is the
  model's ``moe_intermediate_size`` whatever ``moe_tp_size``), ``topk``, ``experts = num_experts``, ``moe_tp``,
  ``moe_ep``, ``dtype = moe_dtype`` (``bfloat16`` -> bf16, ``nvfp4`` -> fp4, the others as spelled),
  ``distribution``, ``gated`` (false for the ``*_nongated`` kernel sources) and ``framework``.
- ``context_mla`` -> ``mla_prefill``: ``B = batch_size``, ``M = isl``, ``N = step + isl`` (``step`` is a cached
  prefix; 0 in every shipped row), ``H = num_heads`` (per GPU); ``generation_mla`` -> ``mla_decode``: ``M = 1``,
  ``N = step`` (the KV length, as the GQA decode table's). ``dtype = mla_dtype``, ``kv_dtype = kv_cache_dtype``.
- ``deepep_ll`` / ``deepep_normal`` -> ``a2a_dispatch`` rows (:func:`deepep_rows` gives both directions):
  ``tokens = num_token`` (per GPU), ``topk = num_topk``, ``nodes = node_num``, ``ep`` = the GPUs of
  ``node_num`` nodes of the system (``systems/<system>.yaml``: 8 per B200 / B300 node, 4 per GB200 tray),
  ``a2a_mode`` ll | normal, ``sms`` = ``dispatch_sms`` / ``combine_sms`` (normal mode), ``Latency`` in ms.
"""

from __future__ import annotations

import functools

import pandas as pd

MOE_SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    ("aiconfigurator_moe", frozenset({"moe_dtype", "num_tokens", "inter_size", "num_experts"})),
    ("aiconfigurator_mla", frozenset({"mla_dtype", "num_heads", "isl", "step"})),
    ("aiconfigurator_deepep_ll", frozenset({"num_token", "num_topk", "dispatch_avg_t_us"})),
    ("aiconfigurator_deepep_normal", frozenset({"num_token", "num_topk", "dispatch_transmit_us"})),
)
DEEPEP_SCHEMAS = ("aiconfigurator_deepep_ll", "aiconfigurator_deepep_normal")
#: each DeepEP table's mode and, per direction, its time (us) and SM columns
_DEEPEP: dict[str, tuple[str, dict[str, tuple[str, str | None]]]] = {
    "aiconfigurator_deepep_ll": ("ll", {"a2a_dispatch": ("dispatch_avg_t_us", None),
                                        "a2a_combine": ("combine_avg_t_us", None)}),
    "aiconfigurator_deepep_normal": ("normal", {"a2a_dispatch": ("dispatch_transmit_us", "dispatch_sms"),
                                                "a2a_combine": ("combine_transmit_us", "combine_sms")}),
}


def _device(frame: pd.DataFrame) -> pd.Series:
    for col in ("device", "Device", "system"):
        if col in frame:
            return frame[col].astype(str)
    return pd.Series([None] * len(frame), index=frame.index, dtype=object)


def _text(frame: pd.DataFrame, col: str) -> pd.Series | None:
    return frame[col].astype(str) if col in frame else None


def _finish(frame: pd.DataFrame, cols: dict, latency: pd.Series | None) -> pd.DataFrame:
    out = pd.DataFrame({k: v for k, v in cols.items() if v is not None}, index=frame.index)
    out["Device"] = _device(frame)
    if latency is not None:
        out["Latency"] = pd.to_numeric(latency, errors="coerce")
    return out


def from_moe(frame: pd.DataFrame) -> pd.DataFrame:
    """AIConfigurator ``moe`` rows as ``moe`` kernel rows."""
    source = _text(frame, "kernel_source")
    gated = ~source.str.contains("nongated") if source is not None else True
    return _finish(frame, {
        "OPName": "moe", "tokens": frame["num_tokens"], "hidden": frame["hidden_size"], "inter": frame["inter_size"],
        "topk": frame["topk"], "experts": frame["num_experts"],
        "moe_tp": frame["moe_tp_size"] if "moe_tp_size" in frame else 1,
        "moe_ep": frame["moe_ep_size"] if "moe_ep_size" in frame else 1,
        "dtype": frame["moe_dtype"].astype(str), "distribution": _text(frame, "distribution"), "gated": gated,
        "framework": _text(frame, "framework"),
    }, frame.get("latency_ms"))


def from_mla(frame: pd.DataFrame) -> pd.DataFrame:
    """AIConfigurator ``context_mla`` / ``generation_mla`` rows as ``mla_prefill`` / ``mla_decode`` rows (a row
    is decode when its ``op_name`` says generation, or, without one, when it has one new token and a cache)."""
    isl, step = pd.to_numeric(frame["isl"]), pd.to_numeric(frame["step"])
    if "op_name" in frame:
        decode = frame["op_name"].astype(str).str.contains("generation").to_numpy()
    else:
        decode = ((isl == 1) & (step > 0)).to_numpy()
    return _finish(frame, {
        "OPName": pd.Series(decode, index=frame.index).map({True: "mla_decode", False: "mla_prefill"}),
        "B": frame["batch_size"], "M": isl.where(~decode, 1), "N": (step + isl).where(~decode, step),
        "H": frame["num_heads"], "dtype": frame["mla_dtype"].astype(str),
        "kv_dtype": _text(frame, "kv_cache_dtype"), "framework": _text(frame, "framework"),
    }, frame.get("latency_ms"))


@functools.cache
def gpus_per_node(system: str) -> int:
    """GPUs of one node of an AIConfigurator system (its shipped ``systems/<system>.yaml``; 8 where it has none)."""
    from tilecast.data import aiconfigurator_systems

    spec = aiconfigurator_systems().get(str(system), {})
    return int((spec.get("node") or {}).get("num_gpus_per_node", 8))


def deepep_rows(frame: pd.DataFrame, schema: str, op: str) -> pd.DataFrame:
    """One direction (``a2a_dispatch`` or ``a2a_combine``) of a DeepEP table as all-to-all rows."""
    mode, columns = _DEEPEP[schema]
    time_col, sms_col = columns[op]
    nodes = pd.to_numeric(frame["node_num"]) if "node_num" in frame else pd.Series(1, index=frame.index)
    if "ep" in frame:
        ep = pd.to_numeric(frame["ep"])
    else:
        ep = frame["system"].astype(str).map(gpus_per_node) * nodes
    latency = pd.to_numeric(frame[time_col], errors="coerce") / 1e3 if time_col in frame else None
    return _finish(frame, {
        "OPName": op, "tokens": frame["num_token"], "hidden": frame["hidden_size"], "topk": frame["num_topk"],
        "experts": frame["num_experts"], "ep": ep, "nodes": nodes, "a2a_mode": mode,
        "sms": frame[sms_col] if sms_col and sms_col in frame else None,
    }, latency)


MOE_CONVERTERS = {
    "aiconfigurator_moe": from_moe,
    "aiconfigurator_mla": from_mla,
    **{schema: functools.partial(deepep_rows, schema=schema, op="a2a_dispatch") for schema in DEEPEP_SCHEMAS},
}
