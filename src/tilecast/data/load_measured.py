"""Read the shipped AIConfigurator, Vidur and NeuSight-AMD tables (``data/<dataset>``; every loader takes ``root``).

Layout: ``aiconfigurator/{gemm,context_attention,generation_attention,nccl,serving}.parquet`` and
``systems/*.yaml``; ``aiconfigurator_engines/{gemm_engines,context_attention_engines,generation_attention_engines,
custom_allreduce}.parquet``; ``vidur/{mlp,network}.parquet``; ``neusight_amd/kernels/<op>.parquet`` and
``devices/*.json``; ``llm_foundry/mpt_training.parquet``. Column meanings are in each folder's PROVENANCE.md.
Integer columns that may be empty come back as pandas ``Int64`` (nullable).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from tilecast.data.aiconfigurator import SERVING_TYPES
from tilecast.data.aiconfigurator import TABLES as AICONFIGURATOR_TABLES
from tilecast.data.aiconfigurator_engines import TABLES as ENGINE_TABLES
from tilecast.data.aiconfigurator_moe import TABLES as AICONFIGURATOR_MOE_TABLES
from tilecast.data.vidur import MLP_TYPES
from tilecast.errors import UserError
from tilecast.paths import (
    AICONFIGURATOR_DIR,
    AICONFIGURATOR_ENGINES_DIR,
    AICONFIGURATOR_MOE_DIR,
    LLM_FOUNDRY_DIR,
    NEUSIGHT_AMD_DIR,
    VIDUR_DIR,
)

VIDUR_TABLES = ("mlp", "network")
LLM_FOUNDRY_TABLES = ("mpt_training",)
#: (dataset, table or table folder) -> integer columns that may be null, returned as ``Int64``.
NULLABLE_INTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("vidur", "mlp"): tuple(c for c, t in MLP_TYPES.items() if t.nullable and pa.types.is_integer(t.arrow)),
    ("aiconfigurator", "serving"): tuple(c for c, t in SERVING_TYPES.items()
                                         if t.nullable and pa.types.is_integer(t.arrow)),
    ("neusight_amd", "kernels"): ("CUDNN Version",),  # absent from the AMD files: all null
}


def _read(dataset: str, root: Path, table: str) -> pd.DataFrame:
    path = root / f"{table}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; make it with `python jobs/ingest.py dataset={dataset}` "
                                f"(data root {root})")
    df = pq.read_table(path).to_pandas()
    for column in NULLABLE_INTS.get((dataset, table.split("/")[0]), ()):
        df[column] = df[column].astype("Int64")
    return df


def _known(kind: str, name: str, known: tuple[str, ...] | list[str]) -> None:
    if name not in known:
        raise UserError(f"unknown {kind} {name!r}; known: {', '.join(known)}")


def load_aiconfigurator(table: str, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """An AIConfigurator table: ``gemm``, ``context_attention``, ``generation_attention``, ``nccl`` or ``serving``.

    Source column names and values (``system, device, ..., latency_ms``); latencies in ms. ValueError
    for an unknown table lists the known ones.
    """
    _known("AIConfigurator table", table, AICONFIGURATOR_TABLES)
    return _read("aiconfigurator", AICONFIGURATOR_DIR if root is None else Path(root), table)


def load_aiconfigurator_moe(table: str, root: str | os.PathLike | None = None,
                            columns: list[str] | None = None) -> pd.DataFrame:
    """An AIConfigurator mixture-of-experts era table: ``moe`` (a stratified sample), ``context_mla``,
    ``generation_mla``, ``deepep_ll`` or ``deepep_normal`` (``data/aiconfigurator_moe``; ``columns`` reads only
    those). Source column names and values; latencies in ms, DeepEP times in us."""
    _known("AIConfigurator MoE table", table, AICONFIGURATOR_MOE_TABLES)
    base = AICONFIGURATOR_MOE_DIR if root is None else Path(root)
    path = base / f"{table}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; make it with `python jobs/ingest.py "
                                f"dataset=aiconfigurator_moe` (data root {base})")
    return pq.read_table(path, columns=columns).to_pandas()


def load_aiconfigurator_engines(table: str, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """An AIConfigurator engine table (``data/aiconfigurator_engines``): ``gemm_engines``,
    ``context_attention_engines``, ``generation_attention_engines`` (SGLang / TRT-LLM kernels, a shape sample) or
    ``custom_allreduce`` (the engines' own all-reduce). Source columns; latencies in ms."""
    _known("AIConfigurator engine table", table, ENGINE_TABLES)
    return _read("aiconfigurator_engines", AICONFIGURATOR_ENGINES_DIR if root is None else Path(root), table)


def aiconfigurator_systems(root: str | os.PathLike | None = None) -> dict[str, dict]:
    """The AIConfigurator spec sheets (``systems/<name>.yaml``, parsed), by system name, sorted."""
    folder = (AICONFIGURATOR_DIR if root is None else Path(root)) / "systems"
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"no system spec sheets under {folder}; make them with "
                                "`python jobs/ingest.py dataset=aiconfigurator`")
    return {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in files}


def load_vidur(table: str = "mlp", root: str | os.PathLike | None = None) -> pd.DataFrame:
    """A Vidur table: ``mlp`` (per-op times in long form, with kernel dims) or ``network`` (collectives)."""
    _known("Vidur table", table, VIDUR_TABLES)
    return _read("vidur", VIDUR_DIR if root is None else Path(root), table)


def load_llm_foundry(table: str = "mpt_training", root: str | os.PathLike | None = None) -> pd.DataFrame:
    """llm-foundry's published MPT training runs (``mpt_training``: the csv's columns, typed)."""
    _known("llm-foundry table", table, LLM_FOUNDRY_TABLES)
    return _read("llm_foundry", LLM_FOUNDRY_DIR if root is None else Path(root), table)


def amd_kernel_names(root: str | os.PathLike | None = None) -> list[str]:
    """Op names of the shipped AMD kernel tables (``add, addu, bmm, ...``), sorted."""
    folder = (NEUSIGHT_AMD_DIR if root is None else Path(root)) / "kernels"
    return sorted(p.stem for p in folder.glob("*.parquet"))


def load_amd_kernels(name: str, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """NeuSight's AMD MI100/MI210 rows of op ``name``, in the NVIDIA kernel tables' columns plus ``Source``.

    ``Source`` is ``test`` for the model-shaped bmm/linear rows and ``train`` for the vector ops;
    ``Latency`` in ms. ValueError for an unknown op lists the shipped ones.
    """
    _known("AMD kernel table", name, amd_kernel_names(root))
    return _read("neusight_amd", NEUSIGHT_AMD_DIR if root is None else Path(root), f"kernels/{name}")


def load_amd_devices(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """The AMD spec sheets (``devices/*.json``), one row per device, sorted by ``Device``."""
    folder = (NEUSIGHT_AMD_DIR if root is None else Path(root)) / "devices"
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no device configs under {folder}; make them with "
                                "`python jobs/ingest.py dataset=neusight_amd`")
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    return pd.DataFrame(rows).sort_values("Device", kind="stable").reset_index(drop=True)
