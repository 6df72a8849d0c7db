"""The one place that knows where the project's files live."""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: a source checkout: ``src/tilecast/paths.py`` -> two levels up from ``src`` holds ``conf/``, ``jobs/``, ``data/``
_CHECKOUT = Path(__file__).resolve().parents[2]
#: an installed package (``pip install tilecast``, not editable) carries them inside itself
_INSTALLED = Path(__file__).resolve().parent / "_project"
#: True when running from an installed package rather than a source checkout (``TILECAST_ROOT`` names one)
INSTALLED = "TILECAST_ROOT" not in os.environ and not (_CHECKOUT / "conf").is_dir() and (_INSTALLED / "conf").is_dir()

#: Where ``conf/``, ``jobs/`` and ``data/`` are: ``TILECAST_ROOT``, else the checkout, else the installed package.
ROOT = Path(os.environ.get("TILECAST_ROOT") or (_INSTALLED if INSTALLED else _CHECKOUT))
CONF_DIR = ROOT / "conf"
DATA_DIR = ROOT / "data"
NEUSIGHT_DIR = DATA_DIR / "neusight"
NEUSIGHT_AMD_DIR = DATA_DIR / "neusight_amd"
AICONFIGURATOR_DIR = DATA_DIR / "aiconfigurator"
AICONFIGURATOR_ENGINES_DIR = DATA_DIR / "aiconfigurator_engines"
AICONFIGURATOR_MOE_DIR = DATA_DIR / "aiconfigurator_moe"
VIDUR_DIR = DATA_DIR / "vidur"
LLM_FOUNDRY_DIR = DATA_DIR / "llm_foundry"
#: Where what the jobs write lives by default (the MLflow store ``mlruns/``, ``reports/``): the checkout; for an
#: installed package ``TILECAST_HOME``, else the working directory (never inside the installed package).
STATE_ROOT = ROOT if not INSTALLED else Path(os.environ.get("TILECAST_HOME") or Path.cwd()).expanduser().resolve()
MLRUNS_DIR = STATE_ROOT / "mlruns"


def resolve(path: str | os.PathLike) -> Path:
    """Resolve a user path: absolute as given, relative to the repository root otherwise.

    Hydra jobs do not chdir (``hydra.job.chdir=False``), but resolving against the root makes
    ``input=data/...`` work from any working directory. An installed package resolves a path that is not in it
    (an output) against :data:`STATE_ROOT`.
    """
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    cwd_p = Path.cwd() / p
    if cwd_p.exists():
        return cwd_p
    return ROOT / p if not INSTALLED or (ROOT / p).exists() else STATE_ROOT / p


def is_writable(path: str | os.PathLike) -> bool:
    """Whether this process may write ``path`` (a file or a directory that exists): ``os.access`` says so (a
    read-only mount never does) and not every write bit is cleared (root passes ``os.access`` on a ``chmod a-w``
    directory, but a cleared mode still means "published, read-only")."""
    p = Path(path)
    return os.access(p, os.W_OK) and bool(p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
