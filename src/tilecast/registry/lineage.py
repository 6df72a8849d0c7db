"""Lineage of a run: git commit, data hashes, the composed config, as MLflow tags and artifacts."""

from __future__ import annotations

import functools
import hashlib
import subprocess

import mlflow
import pandas as pd

from tilecast.paths import ROOT


@functools.cache
def git_commit() -> str:
    """``git rev-parse HEAD`` of the repository (``-dirty`` appended with local changes), or "unknown"."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}-dirty" if dirty else head


def frame_hash(df: pd.DataFrame) -> str:
    """Content hash (sha256, 16 hex) of a table's values, column names and row order."""
    h = hashlib.sha256(",".join(map(str, df.columns)).encode())
    h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
    return h.hexdigest()[:16]


@functools.cache
def dataset_hash() -> str:
    """Hash of the project's shipped data (``tilecast.data.data_hash``), computed once per process."""
    from tilecast.data import data_hash

    return str(data_hash())


def log_lineage(config_yaml: str | None = None, **tags: str) -> dict[str, str]:
    """Tag the active run with git commit, data hash and ``tags``; log the composed config as an artifact."""
    lineage = {"tilecast.git_commit": git_commit(), "tilecast.data_hash": dataset_hash(),
               **{f"tilecast.{k}": str(v) for k, v in tags.items()}}
    mlflow.set_tags(lineage)
    if config_yaml is not None:
        mlflow.log_text(config_yaml, "config/config.yaml")
    return lineage
