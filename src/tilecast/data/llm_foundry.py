"""llm-foundry's published MPT training runs: ``mpt_training.csv`` -> ``mpt_training`` (checked, typed).

One row per measured configuration of ``scripts/train/benchmarking/README.md``: the cluster (``section``),
model size, sequence length, GPUs, batch split, sharding, checkpointing, precision and the measured
throughput and utilisation. A row is rejected when a number does not parse or is not positive, when
``MicroBatchSize x GradAccum x # GPUs`` is not ``GlobalBatchSize``, or when its sharding strategy is not one
of FSDP's. The csv itself and the architecture yamls ship verbatim beside the table (the csv is what
``python jobs/evaluate.py training_runs=<csv>`` reads).
"""

from __future__ import annotations

import csv
from pathlib import Path

from tilecast.data.columns import BOOL, FLOAT, POSITIVE_INT, REQUIRED_STRING, ColumnType, one_of
from tilecast.data.rows import Reject, SchemaError, arrow_table, read_rows, require_columns, type_rows
from tilecast.data.tables import TableJob, TableResult

SOURCE = "mpt_training.csv"
#: FSDP's sharding strategies as the tables spell them
FSDP_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2")
TYPES: dict[str, ColumnType] = {
    "section": REQUIRED_STRING, "Model": REQUIRED_STRING, "SeqLen (T)": POSITIVE_INT, "# GPUs": POSITIVE_INT,
    "GPU": REQUIRED_STRING, "MFU": FLOAT, "HFU": FLOAT, "Model TFLOP": FLOAT, "MicroBatchSize": POSITIVE_INT,
    "GradAccum": POSITIVE_INT, "GlobalBatchSize": POSITIVE_INT, "Throughput (S/s)": FLOAT,
    "Throughput (T/s)": FLOAT, "Throughput (T/s/GPU)": FLOAT, "GlobalBatchSize (T)": POSITIVE_INT,
    "Precision": REQUIRED_STRING, "MP Mode": REQUIRED_STRING, "Sharding Strategy": one_of(FSDP_STRATEGIES),
    "Activation Checkpointing": BOOL, "Activation CPUOffload": BOOL, "NumParams": POSITIVE_INT,
}
#: columns whose value must be > 0 (measured throughput and utilisation)
POSITIVE = ("MFU", "HFU", "Model TFLOP", "Throughput (T/s)", "Throughput (T/s/GPU)")


def _table(source: Path) -> TableResult:
    path = source / SOURCE
    if not path.is_file():
        raise SchemaError(f"{SOURCE}: missing")
    src = read_rows(path, SOURCE)
    require_columns(src.header, TYPES, SOURCE)
    values, lines, rejects = type_rows(src, SOURCE, TYPES, list(TYPES))
    keep = []
    for i, line in enumerate(lines):
        bad = [c for c in POSITIVE if not values[c][i] > 0]
        split = values["MicroBatchSize"][i] * values["GradAccum"][i] * values["# GPUs"][i]
        if bad:
            rejects.append(Reject(SOURCE, line, f"{bad[0]}={values[bad[0]][i]} is not positive"))
        elif split != values["GlobalBatchSize"][i]:
            rejects.append(Reject(SOURCE, line, f"MicroBatchSize x GradAccum x # GPUs = {split} is not "
                                                f"GlobalBatchSize {values['GlobalBatchSize'][i]}"))
        else:
            keep.append(i)
    kept = {c: [v[i] for i in keep] for c, v in values.items()}
    return TableResult("mpt_training", arrow_table(kept, TYPES), rejects, [SOURCE])


def check_csv(path: Path, shown: str) -> None:
    """The verbatim csv has every column of :data:`TYPES` (its rows are checked by the table's build)."""
    with open(path, newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh), [])
    require_columns(header, TYPES, shown)


def check_yaml(path: Path, shown: str) -> None:
    """An architecture yaml parses and has a ``model:`` mapping with ``d_model``, ``n_heads``, ``n_layers``."""
    import yaml

    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{shown}: not YAML ({' '.join(str(exc).split())})") from None
    model = spec.get("model") if isinstance(spec, dict) else None
    if not isinstance(model, dict) or not all(k in model for k in ("d_model", "n_heads", "n_layers")):
        raise SchemaError(f"{shown}: no 'model:' mapping with d_model, n_heads and n_layers")


def plan_llm_foundry(source: Path) -> list[TableJob]:
    """The one table: ``mpt_training``."""
    return [TableJob("mpt_training", _table)]
