"""The paper's per-op-category error from per-node labels (evaluation/perop.py)."""

import numpy as np
import pandas as pd
import pytest

from tilecast.data import load_node_labels
from tilecast.evaluation.perop import PEROP_COLUMNS, category, perop_errors, perop_summary
from tilecast.forecast import roofline_predictor
from tilecast.specs import get_gpu
from tilecast.tiles.roofline import roofline_ms


@pytest.mark.parametrize("opname, family", [("BMM", "bmm"), ("Linear", "linear"), ("VECsoftmax", "softmax"),
                                            ("VECln", "layernorm"), ("VECadd", "elementwise"),
                                            ("VECmulu", "elementwise"), ("misc", None), ("EMBEDDING", None),
                                            ("getitem", None)])
def test_category(opname, family):
    assert category(opname) == family


@pytest.fixture(scope="module")
def nodes():
    n = load_node_labels()
    return n[(n["tag"] == "gpt2_large-inf-1024-4") & n["device"].isin(["NVIDIA L4", "Tesla T4"])]


def test_node_forecasts_match_their_kernels(nodes):
    table = perop_errors(roofline_predictor, nodes)
    assert list(table.columns) == PEROP_COLUMNS
    assert set(table["gpu"]) == {"l4", "tesla_t4"}
    assert set(table["family"]) == {"bmm", "linear", "elementwise", "softmax", "layernorm"}
    addmm = table[(table["gpu"] == "l4") & (table["name"] == "addmm")].iloc[0]  # Linear (4096, 1280, 3840)
    kernel = pd.DataFrame({"OPName": ["linear"], "B": [1], "M": [4096], "N": [1280], "K": [3840], "H": [0]})
    assert addmm["pred_ms"] == pytest.approx(roofline_ms(kernel, get_gpu("l4"))[0])
    measured = nodes[(nodes["device"] == "NVIDIA L4") & (nodes["Name"] == "addmm")]["fw_latency"].iloc[0]
    assert addmm["label_ms"] == measured
    assert np.allclose(table["ape_pct"], 100 * np.abs(table["pred_ms"] - table["label_ms"]) / table["label_ms"])


def test_summary_splits_training_and_unseen_gpus(nodes):
    s = perop_summary(perop_errors(roofline_predictor, nodes), unseen_gpus=("l4",))
    assert set(s["distribution"]) == {"in", "out"}
    assert s.groupby("distribution")["nodes"].sum().to_dict() == {"in": 23, "out": 23}


def test_a_label_under_another_models_name_is_skipped():
    n = load_node_labels()
    table = perop_errors(roofline_predictor, n[n["tag"] == "switch4-inf-512-1"])
    assert table.empty
