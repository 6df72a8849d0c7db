"""Issue 27 item 18: no table under data/ carries a row of a GPU held back from this project (H100 SXM, H200, GB300),
by device name, label directory, system name or catalog key, in any string column; the paper's per-cell errors of
the H100 (which with the roofline would give back its latencies) are dropped at ingest."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tilecast.data.columns import HELD_BACK_GPUS, is_held_back
from tilecast.paths import DATA_DIR
from tilecast.specs import get_gpu

TABLES = sorted(DATA_DIR.rglob("*.parquet"))


def test_every_table_is_checked():
    assert len(TABLES) > 20 and all(p.is_file() for p in TABLES)


@pytest.mark.parametrize("table", TABLES, ids=[str(p.relative_to(DATA_DIR)) for p in TABLES])
def test_no_table_names_a_held_back_gpu(table: Path):
    t = pq.read_table(table)
    for name in t.column_names:
        col = t.column(name)
        if not (str(col.type) in ("string", "large_string") or str(col.type).startswith("dictionary")):
            continue
        values = {str(v) for v in col.unique().to_pylist() if v is not None}
        held = sorted(v for v in values if is_held_back(v))
        assert not held, f"{table.relative_to(DATA_DIR)}:{name} names held-back GPUs {held[:3]}"


def test_the_names_of_a_held_back_gpu_are_all_caught():
    for key in HELD_BACK_GPUS:
        spec = get_gpu(key)
        for name in (key, spec.device_name, spec.label_dir, *spec.aliases):
            assert is_held_back(name), name
    assert not is_held_back("NVIDIA H100 PCIe") and not is_held_back("gpt2_large")


def test_ingest_drops_the_papers_h100_cells(tmp_path):
    from tilecast.data.paper import build_paper_e2e

    csv = tmp_path / "nvidia_inf.csv"
    csv.write_text("NVIDIA_H100_80GB_HBM3\nModel,GPT2-Large,GPT2-Large\nBatch,1,2\nNeuSight,5.1,6.2\n"
                   "NVIDIA_L4\nModel,GPT2-Large,GPT2-Large\nBatch,1,2\nNeuSight,3.0,4.0\n")
    result = build_paper_e2e("nvidia_inf", csv, tmp_path)
    devices = set(result.table.column("device").to_pylist())
    assert devices == {"NVIDIA L4"} and result.table.num_rows == 2
    assert any("2 cells of NVIDIA H100 80GB HBM3 dropped" in n for n in result.notes)
