"""The Hydra job: config defaults, a real run through the entry point, exit 1 on a schema failure."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from tests.data.neusight_tree import FILES, write_tree
from tilecast.paths import CONF_DIR, ROOT


def _cfg(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("ingest", overrides=list(overrides))


def _job():
    spec = importlib.util.spec_from_file_location("ingest_job", ROOT / "jobs" / "ingest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_defaults() -> None:
    cfg = _cfg()
    assert (cfg.source, cfg.output) == ("../shared/data/neusight", "data/neusight")


def test_job_runs_and_fails_on_schema(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _job().main(_cfg(f"source={source}", f"output={out}"))
    provenance = (out / "PROVENANCE.md").read_text()
    assert f"Made by `python jobs/ingest.py source={source} output={out}`" in provenance
    assert "Copyright (c) 2025 Georgia Institute of Technology and Microsoft Corporation" in provenance
    header = FILES["graphs/bert_large-inf-512-8.csv"].splitlines()[0]
    write_tree(source, {"graphs/bert_large-inf-512-8.csv": header.replace("OpName,", "") + "\n"})
    with pytest.raises(SystemExit) as exc:
        _job().main(_cfg(f"source={source}", f"output={out}"))
    assert exc.value.code == 1
