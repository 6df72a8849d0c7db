"""The Parquet tree committed under data/: complete, loadable, small, licensed (no ../shared needed)."""

from __future__ import annotations

from tilecast.data import data_hash, graph_tags, kernel_names, load_e2e_labels, load_kernels, load_paper
from tilecast.paths import DATA_DIR, NEUSIGHT_DIR

TRAIN_OPS = ["add", "addu", "bmm", "conv", "div", "divu", "gelu", "linear", "ln", "mul", "mulu", "pow", "powu",
             "relu", "softmax", "tanh"]


def test_data_folder_is_under_40_mb() -> None:
    size_bytes = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
    assert 0 < size_bytes < 40 * 2**20, f"data/ holds {size_bytes / 2**20:.1f} MiB"


def test_every_table_family_is_shipped_with_licence_and_provenance() -> None:
    assert kernel_names("train") == TRAIN_OPS
    assert kernel_names("test") == ["bmm", "elem", "linear", "ln", "softmax", "vec"]
    assert kernel_names("train_processed") == ["elem", "ln", "softmax"]
    assert len(kernel_names("dims")) == 9
    assert "MIT License" in (NEUSIGHT_DIR / "LICENSE").read_text()
    provenance = (NEUSIGHT_DIR / "PROVENANCE.md").read_text()
    assert "python jobs/ingest.py" in provenance and "sha256" in provenance
    assert len(graph_tags()) == 38
    assert len(data_hash()) == 64


def test_contract_columns() -> None:
    bmm = load_kernels("train", "bmm")
    assert list(bmm.columns[:3]) == ["OPName", "Latency", "Device"] and list(bmm.columns[-4:]) == ["B", "M", "N", "K"]
    assert bmm["Device"].is_monotonic_increasing and (bmm["Latency"] > 0).all()
    e2e = load_e2e_labels()
    assert len(e2e) == 72 and e2e.loc[e2e["model_raw"] == "switch4", "model"].tolist() == ["switch4"]
    assert set(load_paper("perop")["family"]) == {"bmm", "linear", "elementwise", "softmax", "layernorm"}
