"""Prices: every catalog GPU priced with a source and a date; errors name the GPU and the field."""

import pytest

from tilecast.scoring.pricing import PricingError, load_pricing
from tilecast.specs import all_gpus


def test_default_pricing_covers_the_catalog_with_sources(compose_cfg):
    pricing = load_pricing(compose_cfg("score")["pricing"])
    pricing.require(all_gpus())
    table = pricing.table()
    assert set(table["gpu"]) == set(all_gpus())
    assert (table["usd_per_gpu_hour"] > 0).all()
    assert table["source"].str.len().gt(10).all() and table["date"].str.match(r"^\d{4}-\d{2}").all()
    assert table["estimate"].any() and not table["estimate"].all()


def test_missing_and_invalid_prices():
    l4 = {"usd_per_gpu_hour": 0.8, "source": "x", "date": "2024"}
    pricing = load_pricing({"name": "p", "gpus": {"NVIDIA L4": l4}})
    assert pricing.usd_per_gpu_hour("l4") == 0.8
    with pytest.raises(PricingError, match="no price for GPU.*tesla_t4"):
        pricing.require(["l4", "tesla_t4"])
    with pytest.raises(PricingError, match="usd_per_gpu_hour has invalid value -1"):
        load_pricing({"gpus": {"l4": {"usd_per_gpu_hour": -1, "source": "x", "date": "2024"}}})
    with pytest.raises(PricingError, match="source is missing"):
        load_pricing({"gpus": {"l4": {"usd_per_gpu_hour": 1.0, "date": "2024"}}})
    with pytest.raises(PricingError, match="unknown GPU 'l44'"):
        load_pricing({"gpus": {"l44": {"usd_per_gpu_hour": 1.0, "source": "x", "date": "2024"}}})
