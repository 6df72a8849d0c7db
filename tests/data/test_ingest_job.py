"""The Hydra job: config defaults, a real run through the entry point, exit 1 on a schema failure."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from tests.data.measured_tree import write_vidur
from tests.data.neusight_tree import FILES, write_tree
from tilecast.data.ingest_config import ingest_targets
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


def test_dataset_defaults_and_all() -> None:
    assert ingest_targets(_cfg("dataset=vidur")) == [("vidur", "../shared/data/external/vidur", "data/vidur")]
    targets = ingest_targets(_cfg("dataset=all"))
    assert [t[0] for t in targets] == ["neusight", "neusight_amd", "aiconfigurator", "aiconfigurator_engines", "vidur",
                                       "aiconfigurator_moe", "llm_foundry"]
    assert all(output == f"data/{name}" for name, _, output in targets)
    with pytest.raises(ValueError, match="dataset=all uses each dataset's own source and output; drop output="):
        ingest_targets(_cfg("dataset=all", "output=elsewhere"))
    with pytest.raises(ValueError, match="unknown dataset 'vidurr'; known: .*aiconfigurator_moe, llm_foundry, all"):
        ingest_targets(_cfg("dataset=vidurr"))


def test_job_makes_a_named_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, out = write_vidur(tmp_path / "external"), tmp_path / "out"
    _job().main(_cfg("dataset=vidur", f"source={source}", f"output={out}"))
    provenance = (out / "PROVENANCE.md").read_text()
    assert f"Made by `python jobs/ingest.py dataset=vidur source={source} output={out}`" in provenance
    assert (out / "mlp.parquet").is_file() and "Microsoft Corporation" in provenance
    with pytest.raises(SystemExit) as exc:
        _job().main(_cfg("dataset=all", f"source={source}"))
    assert exc.value.code == 2 and "drop source=" in capsys.readouterr().err
