"""Loaders over an ingested miniature tree: contract columns, order, aliases, errors, data hash."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.data.neusight_tree import FILES, write_tree
from tilecast.data import (
    data_hash,
    graph_tags,
    kernel_names,
    load_e2e_labels,
    load_graph,
    load_kernels,
    load_node_labels,
    load_paper,
    run_ingest,
)
from tilecast.specs import UnknownSpecError


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("load")
    source = write_tree(base / "src", FILES)
    assert run_ingest(source, base / "out").ok
    return base / "out"


def test_train_kernels_keep_source_columns_sorted_by_device(root: Path) -> None:
    bmm = load_kernels("train", "bmm", root)
    assert list(bmm.columns) == FILES["kernels/train/bmm/Tesla T4.csv"].splitlines()[0].split(",")
    assert list(bmm["Device"]) == ["NVIDIA A100-PCIE-40GB", "Tesla T4", "Tesla T4"]
    assert list(bmm["B"]) == [6, 13, 22]  # T4 rows keep their source order
    assert bmm["Latency"].iloc[1] == 0.035466667264699936  # exact round trip of the source text
    assert bmm["K"].dtype == "int64" and bmm["Latency"].dtype == "float64"
    assert kernel_names("train", root) == ["add", "bmm"]


def test_test_processed_and_dims_tables(root: Path) -> None:
    linear = load_kernels("test", "linear", root)
    assert list(linear["Device"]) == ["NVIDIA L4", "NVIDIA A100 80GB PCIe"]
    assert linear["Kernels"].isna().tolist() == [False, True]
    elem = load_kernels("train_processed", "elem", root)
    assert elem["large"].tolist() == [True, False]
    cnn = load_kernels("dims", "test_cnn", root)
    assert list(cnn.columns) == ["B", "Input_Channel", "Output_Channel", "Kernel_Size", "Input_Size", "Stride",
                                 "Padding"]
    assert cnn.iloc[1].tolist() == [4, 1024, 256, 1, 14, 1, 0]
    assert list(load_kernels("dims", "train_bmm", root).columns) == ["B", "M", "N", "K"]


def test_unknown_kernel_split_or_name(root: Path) -> None:
    with pytest.raises(ValueError, match="unknown kernel split 'val'"):
        load_kernels("val", "bmm", root)
    with pytest.raises(UnknownSpecError, match="'bmn'.*bmm"):
        load_kernels("train", "bmn", root)


def test_e2e_labels_parse_tags_and_map_aliases(root: Path) -> None:
    raw = load_e2e_labels(root)
    e2e = raw.set_index("tag")
    assert list(raw.columns) == ["device_dir", "device", "tag", "model", "model_raw", "mode",
                                 "seq_len", "batch", "variant", "num_layer", "e2e_latency", "fw_latency",
                                 "bwall_latency"]
    switch = e2e.loc["switch4-inf-512-1"]
    assert (switch["model"], switch["model_raw"], switch["device"]) == ("switch4", "switch4", "NVIDIA L4")
    pp = e2e.loc["gpt2_large-train-1024-4-pp4_1"]
    assert (pp["mode"], pp["seq_len"], pp["batch"], pp["variant"]) == ("training", 1024, 4, "pp4_1")
    assert pp["device"] == "NVIDIA A100-SXM4-40GB"
    assert e2e.loc["bert_large-inf-512-8", "variant"] == "plain"
    assert e2e["num_layer"].dtype == "Int64" and pd.isna(e2e.loc["switchxl4-inf-2048-1", "num_layer"])
    assert e2e.loc["bert_large-inf-512-8", "e2e_latency"] == 330.5


def test_node_labels_unite_columns(root: Path) -> None:
    nodes = load_node_labels(root)
    assert list(nodes.columns[:14]) == ["device_dir", "device", "tag", "row", "Name", "op", "target",
                                        "input_shapes", "output_shape", "latency", "fw_latency", "bw_latency",
                                        "acc_latency", "dtype"]
    assert len(nodes) == 3 and {"e2e_latency", "bwall_latency", "meta"} <= set(nodes.columns)
    switch = nodes[nodes["tag"] == "switch4-inf-512-1"]
    assert pd.isna(switch["latency"]).all() and switch["e2e_latency"].tolist() == [0.5]
    assert nodes["contiguous"].dtype == bool


def test_graph_in_source_order_and_unknown_tag(root: Path) -> None:
    assert graph_tags(root) == ["bert_large-inf-512-8", "gpt3_xl-train-2048-4-pp4_4"]
    g = load_graph("bert_large-inf-512-8", root)
    assert g["Name"].tolist() == ["input_ids", "size", "getitem"] and g["row"].tolist() == [0, 1, 2]
    assert g.loc[2, "FwOps"] == "[['MEM', ((1,), (1,))]]" and g.loc[0, "Prev"] == "set()"
    with pytest.raises(UnknownSpecError, match="bert_large-inf-512-8"):
        load_graph("bert_large-inf-512-4", root)


def test_paper_tables_in_long_form(root: Path) -> None:
    inf = load_paper("nvidia_inf", root)
    assert list(inf.columns) == ["device_dir", "device", "mode", "model", "model_paper", "batch", "method",
                                 "ape_pct"]
    assert len(inf) == 4 + 3 + 1  # blank cells are not results
    row = inf[(inf["method"] == "NeuSight") & (inf["model"] == "switchxl4")].iloc[0]
    assert (row["device"], row["batch"], row["ape_pct"], row["model_paper"]) == (
        "NVIDIA A100-PCIE-40GB", 1, 6.3, "SwitchTrans")
    assert inf.loc[inf["device"] == "Tesla P4", "ape_pct"].tolist() == [11.3]
    perop = load_paper("perop", root)
    assert perop[perop["method"] == "NeuSight"][["distribution", "category", "family", "ape_pct"]].values.tolist() == [
        ["in", "BMM", "bmm", 25.96], ["in", "LN", "layernorm", 20.05], ["out", "BMM", "bmm", 13.78],
        ["out", "LN", "layernorm", 56.69]]
    with pytest.raises(UnknownSpecError):
        load_paper("amd_inf", root)


def test_data_hash_is_stable_and_tracks_content(root: Path, tmp_path: Path) -> None:
    h = data_hash(root)
    assert h == data_hash(root) and len(h) == 64
    copy = tmp_path / "copy"
    for p in root.rglob("*.parquet"):
        (copy / p.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        (copy / p.relative_to(root)).write_bytes(p.read_bytes())
    assert data_hash(copy) == h  # independent of where the tree lives
    (copy / "paper/perop.parquet").unlink()
    assert data_hash(copy) != h
    with pytest.raises(FileNotFoundError, match="jobs/ingest.py"):
        data_hash(tmp_path / "empty")
