"""Serving forecasts against measured runs (rows in the schema of AIConfigurator's ``serving.csv``).

Each row names its GPU by ``system`` (``b200_sxm``: catalog aliases), its model by ``model_path`` (a
Hugging Face id the catalog resolves), ``precision`` (bf16 | fp8 | fp4; int4: a release's own int4 experts,
:func:`tilecast.specs.model.workload_dtype_of`), ``tp_size`` / ``pp_size``, ``isl``,
``osl`` and ``batch_size`` (the concurrency); a mixture-of-experts model's layout from ``tp_size``,
``attention_dp_size``, ``moe_tp_size``, ``moe_ep_size`` (:func:`tilecast.specs.layout.layout_from_row`). A row
the forecaster cannot answer (a layout that cannot run the model, an unknown model, an unknown GPU, a
precision the checkpoint cannot run in, disaggregated serving, pipeline parallelism) gets its reason in
``error`` and empty forecasts; every other row is answered. Identical configurations are forecast once.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.forecast.serve import SERVE_DTYPES, ServeWorkload, forecast_serve
from tilecast.metrics import ape_pct
from tilecast.specs import SpecError, UnknownSpecError, get_gpu, get_model
from tilecast.specs.layout import layout_from_row
from tilecast.specs.model import workload_dtype_of

SERVE_COLUMNS = ("pred_ttft_ms", "pred_tpot_ms", "fits", "error")
_KEY = ("model_path", "system", "precision", "tp_size", "pp_size", "isl", "osl", "batch_size", "mode",
        "attention_dp_size", "moe_tp_size", "moe_ep_size")


def _int(value: object, name: str) -> int:
    number = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    if not np.isfinite(number) or number != int(number):
        raise UserError(f"{name}={value!r} is not an integer")
    return int(number)


def serve_row_workload(row: pd.Series) -> tuple[ServeWorkload, str]:
    """The serve workload and GPU key of one measured row (raises with the reason it cannot be forecast)."""
    if str(row.get("mode", "agg")) != "agg":
        raise UserError(f"mode={row.get('mode')!r}: disaggregated serving (separate prefill and decode pools) "
                         "is not modelled")
    model = get_model(str(row["model_path"]))
    precision = workload_dtype_of(model, str(row.get("precision")))  # int4: Kimi-K2.5's own int4 experts
    if precision not in SERVE_DTYPES:
        raise UserError(f"precision={precision!r} is not modelled; serve dtypes: {', '.join(SERVE_DTYPES)}")
    gpu = get_gpu(str(row["system"]))
    pp = _int(row.get("pp_size", 1) if pd.notna(row.get("pp_size", 1)) else 1, "pp_size")
    layout = layout_from_row(row, model) if model.moe is not None else None  # tp, attention dp, ep
    tp = layout.tp if layout is not None else _int(row["tp_size"], "tp_size")  # a wide-EP row's tp is its dp
    sw = ServeWorkload(model, precision, tp, _int(row["isl"], "isl"),
                       _int(row["osl"], "osl"), _int(row["batch_size"], "batch_size"), pp, layout)
    return sw, gpu.key


def evaluate_serving(rows: pd.DataFrame, predict: Callable | None = None) -> pd.DataFrame:
    """``rows`` plus ``pred_ttft_ms``, ``pred_tpot_ms``, ``fits``, ``error`` and, where measured, the APEs."""
    missing = [c for c in ("model_path", "system", "isl", "osl", "batch_size", "tp_size") if c not in rows]
    if missing:
        raise UserError(f"serving rows need columns {', '.join(missing)} (the serving.csv schema)")
    out = rows.copy()
    keys = [c for c in _KEY if c in rows]
    groups = rows.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    first = pd.Series(np.arange(len(rows))).groupby(groups).first().to_numpy()
    results = []
    for i in first:  # one forecast per distinct configuration
        try:
            sw, gpu = serve_row_workload(rows.iloc[i])
            fc = forecast_serve(sw, gpu, predict)
            results.append((fc.ttft_ms, fc.tpot_ms, fc.memory.fits, ""))
        except (SpecError, UnknownSpecError, ValueError, KeyError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            results.append((np.nan, np.nan, None, str(message).split("; all known:")[0]))
    for j, col in enumerate(SERVE_COLUMNS):
        out[col] = [results[g][j] for g in groups]
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
