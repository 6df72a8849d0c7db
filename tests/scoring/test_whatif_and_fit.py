"""Issue 27 items 9 and 11, through ``jobs/predict.py``'s main: a what-if GPU inherits its base's price (and says
so) in every mode, a what-if model is answered in every mode; a configuration that does not fit gets no throughput
and no cost, anywhere (predict's text and JSON, the score table)."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest

from tilecast.scoring.metrics import UNFIT_NULLS, FitPolicy, derive
from tilecast.scoring.pricing import load_pricing

CASES = {
    "whatif_gpu_serve": ["model=llama31_8b", "gpu=h100_sxm_80gb", "gpu.mem_bw_gbs=4800", "mode=serve", "isl=128",
                         "osl=64", "dtype=bf16"],
    "whatif_gpu_inference": ["model=gpt2_large", "gpu=l4", "gpu.mem_bw_gbs=600", "batch=2", "seq_len=128"],
    "whatif_model_training": ["model=gpt3_13", "gpu=a100_sxm4_80gb", "model.config.n_layer=12", "batch=1",
                              "seq_len=128", "mode=training"],
    "whatif_model_inference": ["model=gpt3_13", "gpu=a100_sxm4_80gb", "model.config.n_layer=12", "batch=1",
                               "seq_len=128"],
    "whatif_model_serve": ["model=llama31_8b", "gpu=h100_sxm_80gb", "model.config.num_hidden_layers=16",
                           "mode=serve", "isl=128", "osl=64", "dtype=bf16"],
    "unfit_serve": ["model=llama31_70b", "gpu=rtx_4090", "mode=serve", "isl=1024", "osl=1024", "dtype=bf16"],
    "unfit_inference": ["model=gpt3_67", "gpu=l4", "batch=8", "seq_len=2048"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every case through the predict job's main, in this process (the job's own checks and printing; what-if
    arguments rewritten as the command line does, ``tilecast.cli.catalog_argv``): {name: (stdout, record)}."""
    from tests.registry.helpers import compose_job, job_main
    from tilecast.cli import catalog_argv

    tmp = tmp_path_factory.mktemp("predict")
    main = job_main("predict")
    out = {}
    for name, args in CASES.items():
        path = tmp / f"{name}.json"
        cfg = compose_job("predict", catalog_argv([*args, "forecaster=roofline", f"output={path}"],
                                                  what_if=("gpu", "model")))
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            main(cfg)
        out[name] = (buffer.getvalue(), json.loads(path.read_text()))
    return out


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("whatif")])
def test_a_what_if_is_answered_in_every_mode(runs, name):
    stdout, record = runs[name]
    assert record is not None and "+" in (record["gpu"] if "gpu." in " ".join(CASES[name]) else record["model"])
    cost = record.get("usd_per_1m_output_tokens", record.get("cost_per_1m_tokens_usd"))
    assert cost is not None and cost > 0
    if "gpu." in " ".join(CASES[name]):
        assert any("priced as its base" in n for n in record["notes"]), record["notes"]
        assert "priced as its base" in stdout


@pytest.mark.parametrize("name", ["unfit_serve", "unfit_inference"])
def test_a_configuration_that_does_not_fit_has_no_cost(runs, name):
    stdout, record = runs[name]
    assert record["fits"] is False
    assert "DOES NOT FIT" in stdout and "USD per 1M" not in stdout
    for key in ("usd_per_1m_output_tokens", "cost_per_1m_tokens_usd", "cost_per_step_usd", "tokens_per_s",
                "tokens_per_s_per_gpu"):
        assert record.get(key) is None, (key, record.get(key))


def test_the_score_table_has_no_cost_where_a_cell_does_not_fit(compose_cfg):
    pricing = load_pricing(compose_cfg("score")["pricing"])
    cells = pd.DataFrame({"gpu": ["l4", "l4"], "batch": [1, 1], "seq_len": [128, 128], "n_gpus": [1, 1],
                          "e2e_ms": [10.0, 10.0], "mem_required_bytes": [1e9, 1e12]})
    out = derive(cells, pricing, FitPolicy())
    assert out["fits"].tolist() == [True, False]
    assert np.isfinite(out.loc[0, list(UNFIT_NULLS)].to_numpy(float)).all()
    assert out.loc[1, list(UNFIT_NULLS)].isna().all()
