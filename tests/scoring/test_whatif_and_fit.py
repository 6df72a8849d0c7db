"""Issue 27 items 9 and 11, as a user runs ``jobs/predict.py``: a what-if GPU inherits its base's price (and says
so) in every mode, a what-if model is answered in every mode; a configuration that does not fit gets no throughput
and no cost, anywhere (predict's text and JSON, the score table)."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from tilecast.paths import ROOT
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
    tmp = tmp_path_factory.mktemp("predict")

    def run(name):
        out = tmp / f"{name}.json"
        proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), *CASES[name], "forecaster=roofline",
                               f"output={out}", f"hydra.run.dir={tmp / name}"], capture_output=True, text=True,
                              cwd=tmp, timeout=240)
        return name, proc, json.loads(out.read_text()) if out.exists() else None

    with ThreadPoolExecutor(2) as pool:
        return {name: (proc, record) for name, proc, record in pool.map(run, CASES)}


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("whatif")])
def test_a_what_if_is_answered_in_every_mode(runs, name):
    proc, record = runs[name]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert record is not None and "+" in (record["gpu"] if "gpu." in " ".join(CASES[name]) else record["model"])
    cost = record.get("usd_per_1m_output_tokens", record.get("cost_per_1m_tokens_usd"))
    assert cost is not None and cost > 0
    if "gpu." in " ".join(CASES[name]):
        assert any("priced as its base" in n for n in record["notes"]), record["notes"]
        assert "priced as its base" in proc.stdout


@pytest.mark.parametrize("name", ["unfit_serve", "unfit_inference"])
def test_a_configuration_that_does_not_fit_has_no_cost(runs, name):
    proc, record = runs[name]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert record["fits"] is False
    assert "DOES NOT FIT" in proc.stdout and "USD per 1M" not in proc.stdout
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
