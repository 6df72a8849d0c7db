"""Training-run cells (a matrix's ``train_runs`` section) -> step time, tokens/s, MFU, memory, fit, cost per run.

A cell is ``(model, gpu, n_gpus, seq_len, micro_batch, global_batch, dtype, sharding, activation_checkpointing)``
(:data:`~tilecast.scoring.matrix.TRAIN_KEYS`). Its micro-batch graph does not depend on the GPU, the GPU count or
the sharding, so each distinct (model, seq_len, micro_batch, dtype) graph is built once and its ops priced on
every GPU of the section in one :func:`~tilecast.forecast.ops.op_latency_matrix` call; each cell is then
assembled (:func:`tilecast.forecast.train_run.assemble`: collectives, overlap, optimizer, memory, the change that
fits). Priced per run: ``usd_per_1b_tokens`` and the days and USD to train the section's ``train_tokens``.

A cell whose run cannot be built (a global batch that does not split) or whose GPU lacks the dtype carries the
reason in ``error`` and null numbers; a cell that does not fit keeps its numbers with ``fits`` false, the memory
it needs and ``fits_with``, the smallest change that fits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.ops import op_latency_matrix
from tilecast.forecast.train_run import assemble, attention_backward_ms, micro_batch_frame, micro_batch_times
from tilecast.forecast.workload import check_gpu_dtype
from tilecast.scoring.engine import unsupported_text
from tilecast.scoring.matrix import TRAIN_KEYS, TrainMatrix
from tilecast.scoring.pricing import Pricing
from tilecast.specs import SpecError, UnsupportedDtypeError, get_gpu, get_model
from tilecast.specs.train_run import TrainRun

GIB = float(2**30)

#: the training-run table (``train_scores.parquet``): keys, layout, step and throughput, utilisation, the
#: collectives' exposed and hidden time per step, memory and fit, cost, provenance, error
_INT_KEYS = ("n_gpus", "seq_len", "micro_batch", "global_batch")
TRAIN_SCHEMA = pa.schema([
    *((k, pa.int64() if k in _INT_KEYS else pa.string()) for k in TRAIN_KEYS),
    ("gpus_per_node", pa.int64()), ("nodes", pa.int64()), ("grad_accum", pa.int64()),
    ("step_s", pa.float64()), ("tokens_per_s", pa.float64()), ("tokens_per_s_per_gpu", pa.float64()),
    ("mfu_pct", pa.float64()), ("hfu_pct", pa.float64()), ("compute_ms", pa.float64()),
    ("comm_exposed_ms", pa.float64()), ("comm_hidden_ms", pa.float64()),
    ("mem_required_gib", pa.float64()), ("gpu_mem_gib", pa.float64()), ("fits", pa.bool_()), ("fits_with", pa.string()),
    ("usd_per_gpu_hour", pa.float64()), ("usd_per_1b_tokens", pa.float64()), ("train_tokens", pa.float64()),
    ("days_to_train", pa.float64()), ("usd_to_train", pa.float64()), ("price_estimate", pa.bool_()),
    ("predictor", pa.string()), ("versions", pa.string()), ("run_date", pa.string()), ("error", pa.string()),
])
TRAIN_COLUMNS = tuple(TRAIN_SCHEMA.names)


def conform_train(df: pd.DataFrame) -> pa.Table:
    """The training-run table as Arrow with exactly :data:`TRAIN_SCHEMA`."""
    missing = [c for c in TRAIN_COLUMNS if c not in df]
    if missing:
        raise ValueError(f"training-run table misses columns {missing}")
    return pa.Table.from_pandas(df[list(TRAIN_COLUMNS)], schema=TRAIN_SCHEMA, preserve_index=False)


def _run(cell: pd.Series, section: TrainMatrix) -> TrainRun:
    return TrainRun(get_model(str(cell["model"])), int(cell["seq_len"]), int(cell["micro_batch"]),
                    int(cell["n_gpus"]), global_batch=int(cell["global_batch"]), gpus_per_node=section.gpus_per_node,
                    dtype=str(cell["dtype"]), sharding=str(cell["sharding"]),
                    activation_checkpointing=str(cell["activation_checkpointing"]))


def score_train_runs(cells: pd.DataFrame, section: TrainMatrix, predict: FamilyPredictor | None,
                     pricing: Pricing) -> pd.DataFrame:
    """One row per cell (in order) with :data:`TRAIN_SCHEMA`'s numbers (provenance columns left to the caller)."""
    out = cells.reset_index(drop=True).copy()
    gpu_keys = list(pd.unique(out["gpu"]))
    pricing.require(gpu_keys)
    gpus = {k: get_gpu(k) for k in gpu_keys}
    price = {k: pricing.prices[k].usd_per_gpu_hour for k in gpu_keys}
    records: list[dict] = []
    times: dict[tuple, dict[str, object]] = {}  # graph key -> GPU key -> MicroBatchTimes or error text
    for _, cell in out.iterrows():
        rec: dict = {"gpus_per_node": section.gpus_per_node, "train_tokens": section.train_tokens}
        try:
            run = _run(cell, section)
            gpu = gpus[str(cell["gpu"])]
            check_gpu_dtype(gpu, run.dtype)
            key = (run.model.key, run.seq_len, run.micro_batch, run.dtype)
            if key not in times:
                times[key] = _graph_times(run, [g for g in gpus.values() if _supports(g, run.dtype)], predict)
            mb = times[key].get(gpu.key)
            if isinstance(mb, str) or mb is None:
                raise ValueError(mb or f"no forecast for {gpu.key}")
            fc = assemble(run, gpu, mb, pricing=price)
        except UnsupportedDtypeError as exc:  # "not supported", not "failed" (the report counts them apart)
            rec["error"] = unsupported_text(str(cell["gpu"]), str(cell["dtype"]), exc)
            records.append(rec)
            continue
        except (SpecError, ValueError, KeyError) as exc:
            rec["error"] = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
            records.append(rec)
            continue
        p = fc.parts
        waited = sum(p.comm_exposed_ms.values())
        exposed = waited + sum(p.comm_contention_ms.values())  # what the collectives add to the step
        rec.update(nodes=run.nodes, grad_accum=run.grad_accum, step_s=fc.step_s, tokens_per_s=fc.tokens_per_s,
                   tokens_per_s_per_gpu=fc.tokens_per_s_per_gpu, mfu_pct=fc.mfu_pct, hfu_pct=fc.hfu_pct,
                   compute_ms=p.compute_ms, comm_exposed_ms=exposed,
                   comm_hidden_ms=sum(p.comm_total_ms.values()) - waited,
                   mem_required_gib=fc.memory.total_bytes / GIB, gpu_mem_gib=gpu.mem_gb, fits=fc.fits,
                   fits_with=fc.advice.change if fc.advice else None, usd_per_gpu_hour=fc.usd_per_gpu_hour,
                   usd_per_1b_tokens=fc.usd_per_1b_tokens, days_to_train=fc.days_to_train(section.train_tokens),
                   usd_to_train=fc.usd_per_1b_tokens * section.train_tokens / 1e9,
                   price_estimate=pricing.prices[gpu.key].estimate, error=None)
        records.append(rec)
    table = pd.DataFrame.from_records(records, columns=[c for c in TRAIN_COLUMNS if c not in TRAIN_KEYS])
    table["fits"] = table["fits"].astype("boolean")
    table["price_estimate"] = out["gpu"].map({k: pricing.prices[k].estimate for k in gpu_keys}).astype(bool)
    for col in ("nodes", "grad_accum"):
        table[col] = table[col].astype("Int64")
    return pd.concat([out[list(TRAIN_KEYS)], table.drop(columns=[c for c in TRAIN_KEYS if c in table])], axis=1)


def _supports(gpu, dtype: str) -> bool:
    try:
        check_gpu_dtype(gpu, dtype)
    except SpecError:
        return False
    return True


def _graph_times(run: TrainRun, gpus: list, predict: FamilyPredictor | None) -> dict[str, object]:
    """Per GPU key, the micro-batch's kernel times of ``run`` (or the error text of that GPU's forecast)."""
    frame = micro_batch_frame(run)
    ms, errors = op_latency_matrix(frame, gpus, predict)
    layers = int(frame.attrs["num_layers"])
    out: dict[str, object] = {}
    for j, gpu in enumerate(gpus):
        col = ms[:, j]
        if gpu.key in errors or not np.isfinite(col).all():
            out[gpu.key] = f"forecast failed: {errors.get(gpu.key, 'some ops have no forecast')}"
        else:
            out[gpu.key] = micro_batch_times(frame, attention_backward_ms(frame, col), layers)
    return out


__all__ = ["TRAIN_COLUMNS", "TRAIN_SCHEMA", "conform_train", "score_train_runs"]
