"""Throughput, memory fit and cost from a step time (hand-computed numbers)."""

import numpy as np
import pandas as pd
import pytest

from tilecast.scoring.metrics import GIB, FitPolicy, derive
from tilecast.scoring.pricing import load_pricing

PRICING = load_pricing({"name": "t", "gpus": {
    "l4": {"usd_per_gpu_hour": 0.72, "source": "test", "date": "2024"},
    "a100_sxm4_40gb": {"usd_per_gpu_hour": 3.6, "source": "test", "date": "2024", "estimate": True}}})


def test_derived_columns():
    cells = pd.DataFrame({"model": ["m", "m", "m"], "gpu": ["l4", "a100_sxm4_40gb", "l4"], "batch": [4, 8, 4],
                          "seq_len": [1000, 1000, 1000], "n_gpus": [1, 4, 1], "e2e_ms": [500.0, 2000.0, np.nan],
                          "mem_required_bytes": [23.0 * GIB, 39.6 * GIB, np.nan]})
    out = derive(cells, PRICING, FitPolicy(usable_fraction=1.0, reserve_gib=0.5))
    assert out.loc[0, "samples_per_s"] == pytest.approx(8.0) and out.loc[0, "tokens_per_s"] == pytest.approx(8000.0)
    # L4 24 GiB - 0.5 reserve: 23 fits; A100 40 - 0.5: 39.6 does not
    assert out["fits"].tolist()[:2] == [True, False] and out["fits"].isna().tolist() == [False, False, True]
    assert out["gpu_mem_gib"].tolist() == [24.0, 40.0, 24.0]
    # 0.5 s at 0.72 $/h = 1e-4 $; the A100 cell does not fit: it cannot run, so no throughput and no cost
    assert out.loc[0, "cost_per_step_usd"] == pytest.approx(1e-4)
    assert out.loc[0, "cost_per_1m_tokens_usd"] == pytest.approx(1e-4 / 4000 * 1e6)
    assert out.loc[1, ["samples_per_s", "tokens_per_s", "cost_per_step_usd", "cost_per_1m_tokens_usd"]].isna().all()
    assert out["price_estimate"].tolist() == [False, True, False]
    assert np.isnan(out.loc[2, "cost_per_step_usd"]) and np.isnan(out.loc[2, "tokens_per_s"])


def test_fit_policy_validation():
    with pytest.raises(ValueError, match="usable_fraction"):
        FitPolicy(usable_fraction=1.5)
    with pytest.raises(ValueError, match="reserve_gib"):
        FitPolicy(reserve_gib=-1)
