"""A real serve table for the report tests, made with the serving forecaster itself (roofline kernels).

Until the nightly scorer writes ``serve_scores.parquet`` from a matrix's ``serve`` section, the tests build
the same table cell by cell: :func:`tilecast.forecast.serve.forecast_serve` per (model, GPU, dtype, tp, isl,
osl, concurrency), cost per 1M output tokens from the default pricing, an error row where the workload or
the GPU refuses the cell, conformed to :data:`tilecast.scoring.schema.SERVE_SCHEMA`.
"""

from __future__ import annotations

import itertools

import pandas as pd
import yaml

from tilecast.forecast.serve import ServeWorkload, forecast_serve
from tilecast.paths import CONF_DIR
from tilecast.scoring.engine import unsupported_text, with_intervals
from tilecast.scoring.metrics import S_PER_HOUR
from tilecast.scoring.pricing import load_pricing
from tilecast.scoring.schema import SERVE_COLUMNS, SERVE_KEYS, conform_serve
from tilecast.specs import SpecError, UnsupportedDtypeError, get_gpu

GPUS = ("l4", "a100_sxm4_80gb", "h100_sxm_80gb")  # the A100 has no fp8 peak: those cells carry an error
#: (dtype, isl, osl, tps): three serve workloads of Llama-3.1-8B
WORKLOADS = (("bf16", 1024, 256, (1, 2)), ("fp8", 1024, 256, (1,)), ("bf16", 4096, 1024, (1,)))
CONCURRENCY = (1, 16, 128)  # 128 x 1280 tokens of bf16 KV cache does not fit beside the weights on an L4


def serve_cell(model: str, gpu: str, dtype: str, tp: int, isl: int, osl: int, concurrency: int, pricing) -> dict:
    keys = dict(zip(SERVE_KEYS, (model, gpu, dtype, tp, isl, osl, concurrency), strict=True))
    price = pricing.prices[gpu]
    base = {**keys, "n_gpus": tp, "gpu_mem_gib": get_gpu(gpu).mem_gb, "usd_per_gpu_hour": price.usd_per_gpu_hour,
            "price_estimate": price.estimate, "predictor": "roofline", "versions": "{}", "run_date": None,
            "error": None}
    try:
        f = forecast_serve(ServeWorkload(model, dtype, tp, isl, osl, concurrency), gpu).to_dict()
    except UnsupportedDtypeError as exc:  # as the scorer words it: not supported, not failed
        return {**base, "error": unsupported_text(gpu, dtype, exc)}
    except (SpecError, ValueError) as exc:
        return {**base, "error": str(exc)}
    # no cost (nor throughput) where the configuration does not fit, as the scorer has it
    cost = price.usd_per_gpu_hour / (f["tokens_per_s_per_gpu"] * S_PER_HOUR) * 1e6 if f["fits"] else None
    return {**base, **{c: f[c] for c in SERVE_COLUMNS if c in f and c not in base},
            "cost_per_1m_output_tokens_usd": cost}


def serve_frame(model: str = "llama31_8b", date: str = "2026-01-01") -> pd.DataFrame:
    """The serve table of :data:`WORKLOADS` x :data:`GPUS` x :data:`CONCURRENCY`, as the scorer writes it."""
    pricing = load_pricing(yaml.safe_load((CONF_DIR / "pricing" / "default.yaml").read_text()))
    rows = [serve_cell(model, gpu, dtype, tp, isl, osl, c, pricing)
            for (dtype, isl, osl, tps), gpu in itertools.product(WORKLOADS, GPUS)
            for tp, c in itertools.product(tps, CONCURRENCY)]
    df = pd.DataFrame(rows).assign(run_date=date)
    df = with_intervals(df, {"ttft_ms": "ttft", "tpot_ms": "tpot"}, mode="serve")  # as the scorer adds them
    return conform_serve(df).to_pandas()
