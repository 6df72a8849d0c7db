"""The one place that knows where the project's files live."""

from __future__ import annotations

import os
from pathlib import Path

#: Repository root (``src/tilecast/paths.py`` -> two levels up from ``src``).
ROOT = Path(os.environ.get("TILECAST_ROOT", Path(__file__).resolve().parents[2]))
CONF_DIR = ROOT / "conf"
DATA_DIR = ROOT / "data"
NEUSIGHT_DIR = DATA_DIR / "neusight"
NEUSIGHT_AMD_DIR = DATA_DIR / "neusight_amd"
AICONFIGURATOR_DIR = DATA_DIR / "aiconfigurator"
AICONFIGURATOR_ENGINES_DIR = DATA_DIR / "aiconfigurator_engines"
AICONFIGURATOR_MOE_DIR = DATA_DIR / "aiconfigurator_moe"
VIDUR_DIR = DATA_DIR / "vidur"
LLM_FOUNDRY_DIR = DATA_DIR / "llm_foundry"
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
