"""Issue 27 item 10: every price states a source or a formula; every formula is recomputed here (independently of
the loader); the loader refuses a stated price its formula contradicts; derived prices are flagged where used;
``pricing=<path>.yaml`` reads a user's own file."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tilecast.paths import CONF_DIR, ROOT
from tilecast.reports.tables import cost_per_1m_tokens, price_label
from tilecast.scoring.pricing import PricingError, load_pricing
from tilecast.specs import get_gpu

DEFAULT = yaml.safe_load((CONF_DIR / "pricing" / "default.yaml").read_text())
GPUS = DEFAULT["gpus"]


def _recompute(key: str) -> float:
    entry = GPUS[key]
    if "derived" not in entry:
        return float(entry["usd_per_gpu_hour"])
    d = entry["derived"]
    base = _recompute(d["from"])
    ratio = getattr(get_gpu(key), d["scale_by"]) / getattr(get_gpu(d["from"]), d["scale_by"]) if "scale_by" in d else 1
    return round(base * ratio * float(d.get("factor", 1.0)), 2)


@pytest.mark.parametrize("key", sorted(GPUS))
def test_every_price_states_a_source_and_every_formula_holds(key):
    entry = GPUS[key]
    assert str(entry.get("source", "")).strip() and str(entry.get("date", "")).strip(), key
    assert "derived" in entry or "usd_per_gpu_hour" in entry, key
    if "derived" in entry:
        assert entry["usd_per_gpu_hour"] == pytest.approx(_recompute(key), abs=0.005), (key, _recompute(key))
        assert not entry.get("estimate"), "a formula price is flagged by its formula, not by estimate: true"


def test_the_loader_computes_the_same_prices_and_flags_every_non_listed_one():
    pricing = load_pricing(DEFAULT)
    for key in GPUS:
        assert pricing.prices[key].usd_per_gpu_hour == pytest.approx(_recompute(key), abs=0.005), key
    table = pricing.table().set_index("gpu")
    assert (table.loc[[k for k in GPUS if "derived" in GPUS[k]], "basis"] == "formula").all()
    assert (table.loc[[k for k in GPUS if GPUS[k].get("estimate")], "basis"] == "proxy").all()
    assert (table["estimate"] == (table["basis"] != "listed")).all()


def test_the_contradictions_the_issue_found_are_gone():
    p = load_pricing(DEFAULT).prices
    for newer in ("b300", "gb200", "gb300"):  # derived from the B200: never cheaper than it
        assert p[newer].usd_per_gpu_hour >= p["b200"].usd_per_gpu_hour, newer
    assert p["h100_sxm_80gb"].date >= "2025-06"  # the price after AWS's June 2025 cut
    assert get_gpu("a10g").bf16_tflops == pytest.approx(125.0 * (80 * 1710) / (72 * 1695), rel=1e-3)
    assert get_gpu("a10g").fp16_tflops == get_gpu("a10g").bf16_tflops


def test_a_stated_price_its_formula_contradicts_is_refused():
    bad = {"name": "t", "gpus": {"b200": GPUS["b200"], "b300": {**GPUS["b300"], "usd_per_gpu_hour": 7.0}}}
    with pytest.raises(PricingError, match=r"b300.usd_per_gpu_hour is 7.0, but its formula .* gives 17.09"):
        load_pricing(bad)
    cycle = {"name": "t", "gpus": {"l4": {"derived": {"from": "a10"}, "source": "x", "date": "x"},
                                   "a10": {"derived": {"from": "l4"}, "source": "x", "date": "x"}}}
    with pytest.raises(PricingError, match="cycle"):
        load_pricing(cycle)


def test_cost_tables_mark_an_estimated_price(smoke_scores_for_prices):
    scores = smoke_scores_for_prices
    labels = price_label(scores)
    assert set(labels) <= {"list", "estimate"} and (labels == "estimate").sum() == scores["price_estimate"].sum()


@pytest.fixture
def smoke_scores_for_prices():
    import pandas as pd

    return pd.DataFrame({"gpu": ["l4", "l40", "l40"], "price_estimate": [False, True, True], "model": "m",
                         "dtype": "fp32", "seq_len": 8, "mode": "inference", "parallel": "none", "fused": False,
                         "fits": True, "error": None, "cost_per_1m_tokens_usd": [1.0, 2.0, 3.0], "batch": [1, 1, 2],
                         "e2e_ms": 1.0})


def test_the_cost_grid_stars_an_estimated_gpu(smoke_scores_for_prices):
    from tilecast.reports.tables import Slice

    grid = cost_per_1m_tokens(smoke_scores_for_prices, "inference", Slice(seq_len=8))
    assert "l40*" in grid.columns and "l4" in grid.columns


def test_pricing_path_reads_the_users_own_file(tmp_path):
    mine = tmp_path / "contract.yaml"
    l4 = {"usd_per_gpu_hour": 0.31, "source": "our contract", "date": "2026"}
    mine.write_text(yaml.safe_dump({"name": "contract", "currency": "USD", "gpus": {"l4": l4}}))
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "model=gpt2_large", "gpu=l4", "batch=2",
                           "seq_len=128", "forecaster=roofline", f"pricing={mine}", f"hydra.run.dir={tmp_path / 'h'}"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0.31 USD per GPU-hour" in proc.stdout
    missing = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "model=gpt2_large", "gpu=l4",
                              "batch=2", "seq_len=128", "forecaster=roofline", f"pricing={tmp_path / 'nope.yaml'}",
                              f"hydra.run.dir={tmp_path / 'h2'}"], capture_output=True, text=True, cwd=tmp_path,
                             timeout=240)
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr and "Traceback" not in missing.stderr
