"""The one place that knows where the project's files live."""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Repository root (``src/tilecast/paths.py`` -> two levels up from ``src``).
ROOT = Path(os.environ.get("TILECAST_ROOT", Path(__file__).resolve().parents[2]))
CONF_DIR = ROOT / "conf"
DATA_DIR = ROOT / "data"
NEUSIGHT_DIR = DATA_DIR / "neusight"
NEUSIGHT_AMD_DIR = DATA_DIR / "neusight_amd"
AICONFIGURATOR_DIR = DATA_DIR / "aiconfigurator"
VIDUR_DIR = DATA_DIR / "vidur"
MLRUNS_DIR = ROOT / "mlruns"


def resolve(path: str | os.PathLike) -> Path:
    """Resolve a user path: absolute as given, relative to the repository root otherwise.

    Hydra jobs do not chdir (``hydra.job.chdir=False``), but resolving against the root makes
    ``input=data/...`` work from any working directory.
    """
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    cwd_p = Path.cwd() / p
    return cwd_p if cwd_p.exists() else ROOT / p


def is_writable(path: str | os.PathLike) -> bool:
    """Whether this process may write ``path`` (a file or a directory that exists): ``os.access`` says so (a
    read-only mount never does) and not every write bit is cleared (root passes ``os.access`` on a ``chmod a-w``
    directory, but a cleared mode still means "published, read-only")."""
    p = Path(path)
    return os.access(p, os.W_OK) and bool(p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
