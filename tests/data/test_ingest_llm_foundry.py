"""The llm-foundry ingest: mpt_training.csv -> a checked table, the csv and yamls verbatim; the shipped copy."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tilecast.data import load_llm_foundry, run_ingest
from tilecast.data.llm_foundry import TYPES
from tilecast.paths import LLM_FOUNDRY_DIR

HEADER = ",".join(TYPES)
GOOD = ("A100 80GB with 1600 Gbps node-node interconnect (RoCE),7b,2048,8,a100_80gb,64.23,64.23,200,6,2,96,18,"
        "37130,4641,196608,amp_bf16,DEFAULT,FULL_SHARD,False,False,6658859008")
YAML = "model:\n  d_model: 4096\n  n_heads: 32\n  n_layers: 32\n"


def _tree(root: Path, rows: list[str]) -> Path:
    src = root / "llm_foundry"
    (src / "yamls").mkdir(parents=True)
    (src / "mpt_training.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    (src / "yamls" / "mpt-7b.yaml").write_text(YAML)
    (src / "LICENSE-llm-foundry-Apache-2.0.txt").write_text("Apache License\nVersion 2.0\n")
    return src


def test_rows_checked_csv_and_yamls_copied(tmp_path: Path) -> None:
    bad_split = GOOD.replace(",6,2,96,", ",6,2,95,")
    bad_shard = GOOD.replace("FULL_SHARD", "SOMETIMES")
    src = _tree(tmp_path, [GOOD, bad_split, bad_shard])
    out = tmp_path / "out"
    report = run_ingest(src, out, dataset="llm_foundry")
    assert report.ok and report.kept == 1 and report.rejected == 2
    reasons = " ".join(r.reason for r in report.table("mpt_training").rejects)
    assert "is not GlobalBatchSize 95" in reasons and "SOMETIMES" in reasons
    table = load_llm_foundry(root=out)
    assert list(table.columns) == list(TYPES) and table["NumParams"].tolist() == [6658859008]
    assert (out / "mpt_training.csv").read_text() == (src / "mpt_training.csv").read_text()
    assert (out / "yamls" / "mpt-7b.yaml").read_text() == YAML
    assert "Apache License" in (out / "LICENSE").read_text()


def test_a_csv_missing_a_column_writes_nothing(tmp_path: Path) -> None:
    src = _tree(tmp_path, [GOOD])
    (src / "mpt_training.csv").write_text(HEADER.replace(",NumParams", "") + "\n" + GOOD.rsplit(",", 1)[0] + "\n")
    report = run_ingest(src, tmp_path / "out", dataset="llm_foundry")
    assert not report.ok and not (tmp_path / "out").exists()


def test_shipped_table_matches_its_csv() -> None:
    table = load_llm_foundry()
    raw = pd.read_csv(LLM_FOUNDRY_DIR / "mpt_training.csv")
    assert len(table) == len(raw) == 139
    assert set(table["GPU"]) == {"a100_40gb", "a100_80gb"}
    assert (table["MicroBatchSize"] * table["GradAccum"] * table["# GPUs"] == table["GlobalBatchSize"]).all()
    provenance = (LLM_FOUNDRY_DIR / "PROVENANCE.md").read_text()
    assert "Made by `python jobs/ingest.py dataset=llm_foundry " in provenance


@pytest.mark.parametrize("size", ["125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b"])
def test_shipped_yamls_are_the_catalog_architectures(size: str) -> None:
    import yaml

    from tilecast.specs import get_model

    arch = yaml.safe_load((LLM_FOUNDRY_DIR / "yamls" / f"mpt-{size}.yaml").read_text())["model"]
    spec = get_model(f"mpt_{size}")
    assert (spec.hidden_size, spec.num_heads, spec.num_layers, spec.vocab_size) == (
        arch["d_model"], arch["n_heads"], arch["n_layers"], arch["vocab_size"])
    assert spec.intermediate_size == arch["expansion_ratio"] * arch["d_model"]
