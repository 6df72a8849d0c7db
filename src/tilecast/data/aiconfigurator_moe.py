"""AIConfigurator's mixture-of-experts era tables (``moe``, ``context_mla``, ``generation_mla``, ``deepep_ll``,
``deepep_normal`` Parquet) -> ``data/aiconfigurator_moe``.

Rows are checked like the other AIConfigurator tables (known system and its device string, known dtypes and
frameworks, positive dims and times); a bad row is rejected with its 1-based row number. Repeated measurements
of one configuration (every column equal but the time) are averaged into one row. The ``moe`` table (1.4M rows)
ships a seeded stratified sample (:data:`MOE_SAMPLE_FRACTION` of every system x framework x dtype x
distribution stratum, all of a stratum below :data:`MOE_MIN_STRATUM` rows): the learned ``moe`` family trains
and is evaluated on exactly these rows.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa

from tilecast.data.aiconfigurator import SYSTEM_DEVICES, _device_matches_system
from tilecast.data.frames import (
    Rule,
    check_table,
    choice,
    drop_constant,
    non_negative,
    positive,
    read_parquet_source,
    text,
)
from tilecast.data.provenance import ProvenanceText
from tilecast.data.rows import SchemaError
from tilecast.data.tables import TableJob, TableResult

FRAMEWORKS = ("sglang", "trtllm", "vllm")
MOE_DTYPES = ("bfloat16", "fp8", "fp8_block", "int4_wo", "nvfp4", "w4a16_mxfp4", "w4a8_mxfp4_mxfp8")
MLA_DTYPES = ("bfloat16",)
KV_CACHE_DTYPES = ("bfloat16", "fp8")
#: share of each stratum of the ``moe`` table shipped, the seed, and the stratum size shipped whole
MOE_SAMPLE_FRACTION = 0.1
MOE_SAMPLE_SEED = 0
MOE_MIN_STRATUM = 500
MOE_STRATA = ("system", "framework", "moe_dtype", "distribution")

_HEAD = {"system": choice(tuple(SYSTEM_DEVICES)), "framework": choice(FRAMEWORKS), "version": text(),
         "device": text(), "op_name": text(), "kernel_source": text()}
_MLA = {**_HEAD, "mla_dtype": choice(MLA_DTYPES), "kv_cache_dtype": choice(KV_CACHE_DTYPES),
        "num_heads": positive("int"), "batch_size": positive("int"), "isl": positive("int"),
        "tp_size": positive("int"), "step": non_negative("int"), "latency_ms": positive()}
_DEEPEP = {**_HEAD, "node_num": positive("int"), "hidden_size": positive("int"), "num_token": positive("int"),
           "num_topk": positive("int"), "num_experts": positive("int")}
#: column rules of each table, in output order
RULES: dict[str, dict[str, Rule]] = {
    "moe": {**_HEAD, "moe_dtype": choice(MOE_DTYPES), "num_tokens": positive("int"), "hidden_size": positive("int"),
            "inter_size": positive("int"), "topk": positive("int"), "num_experts": positive("int"),
            "moe_tp_size": positive("int"), "moe_ep_size": positive("int"), "distribution": text(),
            "latency_ms": positive()},
    "context_mla": _MLA,
    "generation_mla": _MLA,
    "deepep_ll": {**_DEEPEP, "combine_avg_t_us": positive(), "combine_bandwidth_gbps": positive(),
                  "dispatch_avg_t_us": positive(), "dispatch_bandwidth_gbps": positive()},
    "deepep_normal": {**_DEEPEP, "dispatch_sms": positive("int"), "dispatch_transmit_us": positive(),
                      "dispatch_notify_us": Rule("float", lambda v: ~(v >= 0), lambda x: f"must be >= 0, got {x!r}"),
                      "combine_sms": positive("int"), "combine_transmit_us": positive(),
                      "combine_notify_us": Rule("float", lambda v: ~(v >= 0), lambda x: f"must be >= 0, got {x!r}")},
}
#: measured columns of each table (averaged over repeats); every other column names the configuration
MEASURED: dict[str, tuple[str, ...]] = {
    "moe": ("latency_ms",), "context_mla": ("latency_ms",), "generation_mla": ("latency_ms",),
    "deepep_ll": ("combine_avg_t_us", "combine_bandwidth_gbps", "dispatch_avg_t_us", "dispatch_bandwidth_gbps"),
    "deepep_normal": ("dispatch_transmit_us", "dispatch_notify_us", "combine_transmit_us", "combine_notify_us"),
}
DROP_CONSTANT: dict[str, tuple[str, ...]] = {"moe": ("op_name",), "deepep_ll": ("op_name", "kernel_source"),
                                             "deepep_normal": ("op_name", "kernel_source")}
TABLES = tuple(RULES)


def average_repeats(table: pa.Table, measured: tuple[str, ...]) -> tuple[pa.Table, int]:
    """One row per configuration (every column but ``measured``), the measured columns averaged; first-seen
    order. Returns the table and how many repeated rows were folded in."""
    frame = table.to_pandas()
    keys = [c for c in frame.columns if c not in measured]
    grouped = frame.groupby(keys, sort=False, dropna=False)[list(measured)].mean().reset_index()
    grouped = grouped[list(frame.columns)]
    return pa.Table.from_pandas(grouped, schema=table.schema, preserve_index=False), len(frame) - len(grouped)


def sample_strata(table: pa.Table, strata: tuple[str, ...] = MOE_STRATA, fraction: float = MOE_SAMPLE_FRACTION,
                  seed: int = MOE_SAMPLE_SEED, min_stratum: int = MOE_MIN_STRATUM) -> pa.Table:
    """A seeded sample: ``fraction`` of every stratum's rows (at least ``min_stratum``; all of a smaller
    stratum), rows kept in table order."""
    frame = table.select(list(strata)).to_pandas()
    rng = np.random.default_rng(seed)
    keep = np.zeros(len(frame), dtype=bool)
    for _, idx in sorted(frame.groupby(list(strata), sort=True).indices.items()):
        n = len(idx) if len(idx) <= min_stratum else max(min_stratum, int(round(fraction * len(idx))))
        keep[rng.choice(idx, size=n, replace=False)] = True
    return table.filter(pa.array(keep))


def _table(name: str, source: Path) -> TableResult:
    shown = f"{name}.parquet"
    path = source / shown
    if not path.is_file():
        raise SchemaError(f"{shown}: missing")
    kept, rejects = check_table(read_parquet_source(path), shown, RULES[name], row_checks=[_device_matches_system])
    kept, notes = drop_constant(kept, DROP_CONSTANT.get(name, ()), shown)
    kept, folded = average_repeats(kept, MEASURED[name])
    if folded:
        notes.append(f"{folded} repeated measurements averaged into their configuration's row")
    if name == "moe":
        before = kept.num_rows
        kept = sample_strata(kept)
        notes.append(f"stratified sample: {kept.num_rows} of {before} configurations (see Left out)")
    return TableResult(name, kept, rejects, [shown], notes)


def plan_aiconfigurator_moe(source: Path) -> list[TableJob]:
    """One job per table of :data:`TABLES`."""
    return [TableJob(name, partial(_table, name)) for name in TABLES]


AICONFIGURATOR_MOE_TEXT = ProvenanceText(
    title="AIConfigurator mixture-of-experts data",
    about="NVIDIA AIConfigurator's performance database\n"
          "(ai-dynamo/aiconfigurator @095f58a): fused MoE layers, multi-head latent attention (prefill and decode)\n"
          "and DeepEP expert-parallel all-to-all, measured by its collector under SGLang, TensorRT-LLM and vLLM.",
    licence_title="Apache License 2.0",
    copyright="Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES\n(the SPDX header of the source files)",
    conventions="""## Conventions

- Latencies in milliseconds (`latency_ms`), DeepEP times in microseconds (`*_us`), as measured (locked clocks,
  CUDA-graph capture, mean of the replays). `device` is the source's exact device string, `system`
  AIConfigurator's system name (spec sheets in `data/aiconfigurator/systems/`). Source column names, order and
  values are kept; the constant columns named in the table notes are dropped (their one value is given there).
- `moe`: one fused MoE layer (`kernel_source` names the engine's kernel) for `num_tokens` tokens entering the
  layer of the whole expert-parallel group; `inter_size` is the model's per-expert intermediate size before the
  `moe_tp_size` split; this GPU holds `num_experts / moe_ep_size` experts. `moe_dtype` is the expert format,
  `distribution` the routing the collector drew (`balanced`, `power_law_<alpha>`).
- `context_mla`: MLA prefill of `batch_size` x `isl` tokens (`step` = 0: no cached prefix); `generation_mla`: one
  decode step over `step` cached tokens (`isl` = 1). `num_heads` are this GPU's heads (`tp_size` recorded).
- `deepep_ll` / `deepep_normal`: DeepEP low-latency / normal dispatch and combine of `num_token` tokens per
  GPU over the GPUs of `node_num` node(s); `*_bandwidth_gbps` are the source's derived figures; normal mode
  records the SMs each kernel used (`dispatch_sms`, `combine_sms`).
- Rows are checked (columns present with their types, times > 0 and finite, dims > 0, known system and its
  device string, known framework and dtype strings); a failing row is logged as `<file>:<line>: <reason>`
  (`<line>` the 1-based row number), left out and listed below. Repeated measurements of one configuration
  (all columns equal but the times) are averaged into one row, in first-seen order.
""",
    left_out=f"""## Left out

- Rows that fail a check (listed below), the constant columns named in the table notes, and repeats (averaged).
- `moe` is a sample: of its configurations (after averaging repeats) a seeded random
  {MOE_SAMPLE_FRACTION:.0%} of every system x framework x `moe_dtype` x `distribution` stratum is kept (at
  least {MOE_MIN_STRATUM} rows; a smaller stratum whole; seed {MOE_SAMPLE_SEED}), so every GPU, engine, format and
  routing keeps its share and the table stays a few MB. The `moe` predictor is trained and evaluated on these
  rows. The other tables ship whole.
- The source holds no H100 SXM, H200 SXM or GB300 measurement (held back from this project).
""",
    files_note="The licence lies beside the source in `../LICENSES/`.",
)
