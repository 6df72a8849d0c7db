"""Training-run forecasts against measured runs (rows in the schema of llm-foundry's ``mpt_training.csv``).

Each row names its GPU by ``GPU`` (``a100_80gb``: catalog aliases; else the ``section``'s text), its model by
``Model`` (an MPT size: ``7b`` -> ``mpt_7b``; or any catalog name), and its run by ``SeqLen (T)``, ``# GPUs``,
``MicroBatchSize``, ``GradAccum`` (or ``GlobalBatchSize``), ``Precision``, ``MP Mode``, ``Sharding Strategy``
and ``Activation Checkpointing``. How each column becomes a :class:`~tilecast.specs.train_run.TrainRun`:

- llm-foundry sizes MPT's learned position table to the run (``max_seq_len`` = the row's sequence length: the
  rows' ``NumParams`` grow with it), so the model is the catalog's with ``max_seq_len`` set to ``SeqLen``;
- ``Precision`` ``amp_bf16`` / ``bf16`` train with fp32 sharded weights under FSDP mixed precision either way
  (``amp_bf16``); ``*fp8*`` is ``fp8``;
- ``MP Mode`` (Composer's FSDP mixed precision): ``PURE`` reduces gradients in bf16, ``DEFAULT`` and ``FULL`` in
  fp32;
- ``Sharding Strategy``: FSDP's names (``FULL_SHARD`` -> zero3, ``SHARD_GRAD_OP`` -> zero2, ``NO_SHARD``,
  ``HYBRID_SHARD``);
- the network from the ``section``'s ``<n> Gbps node-node interconnect (<fabric>)``: ``n`` per node of 8
  GPUs (absent: the GPU's catalog network);
- ``Activation CPUOffload`` true is not modelled: that row gets an ``error``.

A row that cannot be forecast gets its reason in ``error``; the others are answered. Identical
configurations are forecast once; the micro-batch graph of one (model, sequence, micro-batch, layout) is
built once and priced once per GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.forecast.train_run import forecast_train_run
from tilecast.metrics import ape_pct
from tilecast.specs import SpecError, UnknownSpecError, get_gpu, get_model
from tilecast.specs.train_run import Network, TrainRun
from tilecast.specs.whatif import model_with_config

#: the columns a row needs
REQUIRED = ("Model", "SeqLen (T)", "# GPUs", "MicroBatchSize", "Sharding Strategy")
#: what the evaluation adds to every row
TRAIN_COLUMNS = ("gpu_key", "model_key", "pred_step_s", "pred_tokens_per_s_per_gpu", "pred_mfu_pct", "pred_hfu_pct",
                 "pred_mem_gib", "pred_fits", "error")
#: measured column -> (forecast column, its APE column)
MEASURED = {"Throughput (T/s/GPU)": ("pred_tokens_per_s_per_gpu", "ape_tokens_per_s_per_gpu_pct"),
            "MFU": ("pred_mfu_pct", "ape_mfu_pct")}
GPUS_PER_NODE = 8
_NETWORK = re.compile(r"(?P<gbps>[0-9.]+)\s*Gbps\s+node-node\s+interconnect\s*\((?P<fabric>[A-Za-z]+)\)", re.I)
_GPU_IN_SECTION = re.compile(r"^\s*(?P<name>[A-Za-z]+\d+)\s+(?P<mem>\d+)\s*GB", re.I)
_FABRICS = {"roce": "roce", "ib": "infiniband", "infiniband": "infiniband", "ethernet": "ethernet"}


def _flag(value: object) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "", "nan", "none"):
        return False
    raise UserError(f"expected True or False, got {value!r}")


def _int(row: pd.Series, col: str) -> int:
    value = pd.to_numeric(pd.Series([row.get(col)]), errors="coerce").iloc[0]
    if not np.isfinite(value) or value != int(value):
        raise UserError(f"{col}={row.get(col)!r} is not an integer")
    return int(value)


def row_gpu(row: pd.Series) -> str:
    """Catalog key of a row's GPU: its ``GPU`` column, else the ``section``'s leading ``<name> <n>GB``."""
    names = [str(row["GPU"])] if pd.notna(row.get("GPU")) else []
    m = _GPU_IN_SECTION.match(str(row.get("section") or ""))
    if m:
        names.append(f"{m['name'].lower()}_{m['mem']}gb")
    for name in names:
        try:
            return get_gpu(name).key
        except UnknownSpecError:
            continue
    raise UnknownSpecError(f"GPU {names[0] if names else row.get('section')!r} of this row is not in the catalog")


def row_model(row: pd.Series, seq_len: int):
    """The row's model: ``Model`` as a catalog name, else ``mpt_<Model>``; an MPT's positions sized to the run."""
    name = str(row["Model"]).strip()
    try:
        spec = get_model(name)
    except UnknownSpecError:
        spec = get_model(f"mpt_{name.lower()}")
    if spec.family == "mpt":
        spec = model_with_config(spec, {"max_seq_len": seq_len})
    return spec


def row_network(row: pd.Series, gpus_per_node: int = GPUS_PER_NODE) -> Network | None:
    """The scale-out network the ``section`` names (Gb/s per node -> per GPU), None when it names none."""
    m = _NETWORK.search(str(row.get("section") or ""))
    if not m:
        return None
    fabric = _FABRICS.get(m["fabric"].lower(), "ethernet")
    return Network(fabric, float(m["gbps"]) / gpus_per_node)


def row_run(row: pd.Series) -> tuple[TrainRun, str]:
    """The training run and GPU key of one measured row (raises with the reason it cannot be forecast)."""
    if "Activation CPUOffload" in row and _flag(row["Activation CPUOffload"]):
        raise UserError("Activation CPUOffload=True: offloading activations to the host is not modelled")
    seq = _int(row, "SeqLen (T)")
    precision = str(row.get("Precision") or "amp_bf16").lower()
    mode = str(row.get("MP Mode") or "DEFAULT").upper()
    grad_accum = _int(row, "GradAccum") if pd.notna(row.get("GradAccum")) else None
    global_batch = _int(row, "GlobalBatchSize") if grad_accum is None else None
    run = TrainRun(
        model=row_model(row, seq), seq_len=seq, micro_batch=_int(row, "MicroBatchSize"), n_gpus=_int(row, "# GPUs"),
        grad_accum=grad_accum, global_batch=global_batch, gpus_per_node=GPUS_PER_NODE,
        dtype="fp8" if "fp8" in precision else "amp_bf16", sharding=str(row["Sharding Strategy"]),
        activation_checkpointing=_flag(row.get("Activation Checkpointing", False)),
        grad_reduce_dtype="bf16" if mode == "PURE" else "fp32", network=row_network(row))
    return run, row_gpu(row)


def _run_key(row: pd.Series) -> tuple:
    return tuple(str(row.get(c)) for c in ("section", "GPU", "Model", "SeqLen (T)", "# GPUs", "MicroBatchSize",
                                             "GradAccum", "GlobalBatchSize", "Precision", "MP Mode",
                                             "Sharding Strategy", "Activation Checkpointing",
                                             "Activation CPUOffload"))


def evaluate_training_runs(rows: pd.DataFrame, predict: Callable | None = None, **options) -> pd.DataFrame:
    """``rows`` plus :data:`TRAIN_COLUMNS` and, where measured, ``ape_tokens_per_s_per_gpu_pct`` and
    ``ape_mfu_pct`` (the forecast MFU against the row's)."""
    missing = [c for c in REQUIRED if c not in rows]
    if missing:
        raise UserError(f"training-run rows need columns {', '.join(missing)} (the mpt_training.csv schema)")
    if "GPU" not in rows and "section" not in rows:
        raise UserError("training-run rows need a GPU or a section column (the mpt_training.csv schema)")
    out = rows.reset_index(drop=True).copy()
    results: dict[tuple, tuple] = {}
    keys = [_run_key(r) for _, r in out.iterrows()]
    for i, key in enumerate(keys):
        if key in results:
            continue
        try:
            run, gpu = row_run(out.iloc[i])
            fc = forecast_train_run(run, gpu, predict, **options)
            results[key] = (gpu, run.model.key, fc.step_s, fc.tokens_per_s_per_gpu, fc.mfu_pct, fc.hfu_pct,
                            fc.memory.total_bytes / 2**30, fc.fits, "")
        except (SpecError, UnknownSpecError, ValueError, KeyError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            results[key] = (None, None, np.nan, np.nan, np.nan, np.nan, np.nan, None,
                            str(message).split("; all known:")[0])
    for j, col in enumerate(TRAIN_COLUMNS):
        out[col] = [results[k][j] for k in keys]
    for measured, (pred, ape) in MEASURED.items():
        if measured in out:
            got = pd.to_numeric(out[measured], errors="coerce").to_numpy(float)
            out[ape] = ape_pct(out[pred].to_numpy(float), got)
    return out


def training_summary(table: pd.DataFrame, by: str = "gpu_key") -> pd.DataFrame:
    """MAPE (and worst APE) of tokens/s per GPU over the answered rows, per ``by`` (and ``all``)."""
    ok = table.loc[table["error"].fillna("") == ""]
    cols = [by, "rows", "tokens_mape_pct", "tokens_worst_ape_pct", "mfu_mape_pct", "mfu_bias_pts"]
    if ok.empty or "ape_tokens_per_s_per_gpu_pct" not in ok:
        return pd.DataFrame(columns=cols)
    parts = [(str(k), g) for k, g in ok.groupby(by, sort=True)] + [("all", ok)]
    return pd.DataFrame([{by: k, "rows": len(g), "tokens_mape_pct": float(g["ape_tokens_per_s_per_gpu_pct"].mean()),
                          "tokens_worst_ape_pct": float(g["ape_tokens_per_s_per_gpu_pct"].max()),
                          "mfu_mape_pct": float(g["ape_mfu_pct"].mean()) if "ape_mfu_pct" in g else np.nan,
                          "mfu_bias_pts": float((g["pred_mfu_pct"] - pd.to_numeric(g["MFU"], errors="coerce")).mean())
                          if "MFU" in g else np.nan} for k, g in parts], columns=cols)


__all__ = ["MEASURED", "REQUIRED", "TRAIN_COLUMNS", "evaluate_training_runs", "row_gpu", "row_model", "row_network",
           "row_run", "training_summary"]
