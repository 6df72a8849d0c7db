"""The benchmark page: paper-shaped tables and the rendered Markdown (evaluation/tables.py, benchmark.py)."""

import numpy as np
import pandas as pd
import pytest

from tilecast.data import load_paper
from tilecast.evaluation.benchmark import headline_table, render, with_roofline
from tilecast.evaluation.labels import shipped_labels
from tilecast.evaluation.paper import with_paper
from tilecast.evaluation.perop import perop_summary
from tilecast.evaluation.suite import ape_summary, forecast_labels, headline
from tilecast.evaluation.tables import markdown, paper_layout, paper_shaped
from tilecast.forecast import roofline_predictor
from tilecast.pipelines.evaluate import EvaluationResult


@pytest.fixture(scope="module")
def result():
    labels = shipped_labels()
    table = with_paper(forecast_labels(labels.labels, roofline_predictor))
    perop = pd.DataFrame({"device": "x", "gpu": ["l4", "tesla_t4"], "tag": "t", "name": "n",
                          "family": ["bmm", "bmm"], "label_ms": 1.0, "pred_ms": 1.5, "ape_pct": [50.0, 10.0]})
    return EvaluationResult(table, ape_summary(table), headline(table), labels, {"bmm": "3"}, perop,
                            perop_summary(perop, ("l4",)))


def test_paper_shaped_blocks_follow_the_paper(result):
    assert paper_layout("inference")["model_paper"].tolist()[:2] == ["BERT-Large", "BERT-Large"]
    blocks = paper_shaped(result.table, "inference", {"NeuSight": "neusight_ape_pct", "ours": "ape_pct"})
    assert set(blocks) == {"NVIDIA A100-PCIE-40GB", "NVIDIA L4", "Tesla P100-PCIE-16GB", "Tesla P4", "Tesla T4",
                           "Tesla V100-PCIE-32GB"}
    l4 = blocks["NVIDIA L4"]
    # every device shows the paper's full row of cells; a cell the GPU has no label for stays blank
    assert list(l4.columns) == list(blocks["NVIDIA A100-PCIE-40GB"].columns)
    measured = ["BERT-Large 8", "BERT-Large 16", "GPT2-Large 4", "GPT2-Large 8", "GPT3-XL 2", "OPT-1.3B 2",
                "GPT3-2.7B 2"]
    assert l4.loc["ours", measured].notna().all()
    assert l4.loc["ours"].drop(measured + ["mean"]).isna().all() and "GPT3-XL 8" in l4.columns
    assert l4.loc["NeuSight", "GPT2-Large 4"] == 11.0
    assert l4.loc["ours", "mean"] == pytest.approx(l4.loc["ours"].iloc[:-1].mean())
    # our roofline reproduces the paper's roofline column for every published inference cell
    paper = paper_shaped(result.table, "inference", {"paper": "roofline_paper_ape_pct", "ours": "ape_pct"})
    for block in paper.values():
        assert np.allclose(block.loc["paper"], block.loc["ours"], atol=0.15, equal_nan=True)


def test_rendered_page(result):
    text = render(result, result.table, {"date": "today"}, ("l4",), load_paper("perop"))
    for heading in ("## Headline", "## Inference: published cells", "## Training: published cells",
                    "## Fused inference", "## 4-GPU data / tensor / pipeline parallel", "## Per-op category error",
                    "## Worst cells", "### NVIDIA L4", "switch4"):
        assert heading in text
    head = headline_table(with_roofline(result.table, result.table))
    assert head.loc["inference (published cells)", "labels"] == 42
    assert head.loc["inference (published cells)", "NeuSight (paper)"] == pytest.approx(10.68, abs=0.01)
    assert head.loc["training (published cells)", "NeuSight (paper)"] == pytest.approx(7.775, abs=0.01)
    assert "| inference (published cells) | 42 |" in markdown(head)
