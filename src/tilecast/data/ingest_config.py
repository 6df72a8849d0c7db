"""What ``jobs/ingest.py`` ingests: ``conf/ingest.yaml`` -> (dataset, source, output) targets, and the command line."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from tilecast.data.datasets import DATASETS
from tilecast.errors import UserError

ALL = "all"
#: the config's own defaults of ``source`` / ``output`` (the dataset's entry under ``datasets``).
_DEFAULTS = {"source": "${datasets.${dataset}.source}", "output": "${datasets.${dataset}.output}"}


def ingest_targets(cfg: DictConfig) -> list[tuple[str, str, str]]:
    """``[(dataset, source, output)]`` for ``cfg.dataset`` (every configured dataset for ``all``).

    ValueError for an unknown dataset (listing the known ones), a dataset without a ``datasets`` entry,
    or ``source=`` / ``output=`` given with ``dataset=all``.
    """
    name = str(cfg.dataset)
    known = [*DATASETS, ALL]
    if name not in known:
        raise UserError(f"unknown dataset {name!r}; known: {', '.join(known)}")
    names = list(DATASETS) if name == ALL else [name]
    missing = [n for n in names if n not in cfg.datasets]
    if missing:
        raise UserError(f"conf/ingest.yaml has no datasets entry for {missing}")
    if name != ALL:
        return [(name, str(cfg.source), str(cfg.output))]
    raw = OmegaConf.to_container(cfg, resolve=False)
    given = [key for key, default in _DEFAULTS.items() if raw.get(key) != default]
    if given:
        raise UserError(f"dataset=all uses each dataset's own source and output; drop {', '.join(given)}=")
    return [(n, str(cfg.datasets[n].source), str(cfg.datasets[n].output)) for n in names]


def ingest_command(dataset: str, source: str, output: str) -> str:
    """The command that makes ``output`` from ``source`` (recorded in PROVENANCE.md)."""
    prefix = "" if dataset == "neusight" else f"dataset={dataset} "  # neusight is the default dataset
    return f"python jobs/ingest.py {prefix}source={source} output={output}"
