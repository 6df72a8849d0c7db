"""MPT as llm-foundry trains it: parameter counts equal every public run's NumParams; the config's options."""

from __future__ import annotations

import pytest

from tilecast.data import load_llm_foundry
from tilecast.evaluation.training_runs import row_model
from tilecast.forecast.train_run import model_params
from tilecast.graph import build_graph
from tilecast.graph.build import recorded
from tilecast.specs import Workload, get_model
from tilecast.specs.train_run import TrainRun
from tilecast.specs.whatif import model_with_config


def _params(spec) -> float:
    return model_params(TrainRun(spec, 8, 1, 1, grad_accum=1))


def test_parameter_counts_equal_every_public_runs():
    runs = load_llm_foundry()[["Model", "SeqLen (T)", "NumParams"]].drop_duplicates()
    for row in runs.itertuples(index=False):
        spec = row_model({"Model": row.Model}, int(row._1))
        assert _params(spec) == row.NumParams, (row.Model, row._1)


def test_alibi_and_no_bias_drop_the_position_table_and_biases():
    base = get_model("mpt_125m")
    h, layers = base.hidden_size, base.num_layers
    alibi = model_with_config(base, {"attn_config": {"attn_impl": "flash", "alibi": True}})
    assert _params(base) - _params(alibi) == 2048 * h
    no_bias = model_with_config(base, {"no_bias": True})
    assert _params(base) - _params(no_bias) == layers * 11 * h + h  # 9 h of linear biases, 2 h of norm biases
    assert "wpe" not in {n.name for n in recorded(Workload(alibi, 1, 16, "training")).nodes}


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_eager_and_flash_paths(dtype):
    g = build_graph("mpt_125m", 2, 64, "training", dtype=dtype)
    kinds = set(g.to_frame()["kind"])
    assert ("attn" in kinds) == (dtype == "bf16")
    assert ("bmm" in kinds)  # eager scores / context, or the flash backward's GEMMs
    # 6 N flops per token for the parameters' GEMMs, plus attention: the graph's GEMM flops are at least 6 N T
    spec = get_model("mpt_125m")
    linear = g.total_flops(kind="linear")
    assert linear >= 6 * (_params(spec) - 2048 * spec.hidden_size) * 128 * 0.99
