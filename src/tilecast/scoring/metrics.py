"""Per-cell numbers derived from a step time: throughput, memory fit and cost (vectorised over cells).

- throughput: ``samples_per_s = batch / step_s`` and ``tokens_per_s = batch * seq_len / step_s``
  (``batch`` is the step's global batch, spread over ``n_gpus`` for parallel cells);
- fit: the memory one GPU of the cell needs against the GPU's listed memory, read as GiB (an
  "80 GB" A100 has 80 GiB; an "16 GB" T4 is listed as 15), less a reserve for the CUDA context and
  allocator slack: ``fits = mem_required_gib <= gpu_mem_gib * usable_fraction - reserve_gib``;
- cost: ``cost_per_step_usd = usd_per_gpu_hour * n_gpus * step_s / 3600`` and per 1M tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.scoring.pricing import Pricing
from tilecast.specs import get_gpu

GIB = float(2**30)
S_PER_HOUR = 3600.0


@dataclass(frozen=True)
class FitPolicy:
    """How much of a GPU's listed memory a run may use."""

    usable_fraction: float = 1.0
    reserve_gib: float = 0.5
    optimizer: str | None = "adamw"  # optimizer state training cells hold (None: forward + backward only)

    def __post_init__(self) -> None:
        if not 0.0 < self.usable_fraction <= 1.0:
            raise UserError(f"fit.usable_fraction must be in (0, 1], got {self.usable_fraction!r}")
        if self.reserve_gib < 0:
            raise UserError(f"fit.reserve_gib must be >= 0, got {self.reserve_gib!r}")

    def capacity_gib(self, gpu_mem_gib: np.ndarray) -> np.ndarray:
        return np.asarray(gpu_mem_gib, dtype=float) * self.usable_fraction - self.reserve_gib


#: the numbers a cell that does not fit in memory has none of (it cannot run): throughput and cost
UNFIT_NULLS = ("samples_per_s", "tokens_per_s", "cost_per_step_usd", "cost_per_1m_tokens_usd")


def derive(cells: pd.DataFrame, pricing: Pricing, policy: FitPolicy) -> pd.DataFrame:
    """Add throughput, fit and cost columns to cells holding keys, ``e2e_ms`` and ``mem_required_bytes``.

    Cells without a step time (failed) get null numbers; ``fits`` is null where memory is unknown.
    """
    out = cells.copy()
    gpus = list(pd.unique(out["gpu"]))
    pricing.require(gpus)
    step_s = out["e2e_ms"].to_numpy(dtype=float) / 1e3
    ok = np.isfinite(step_s) & (step_s > 0)
    step_s = np.where(ok, step_s, np.nan)
    batch = out["batch"].to_numpy(dtype=float)
    tokens = batch * out["seq_len"].to_numpy(dtype=float)
    out["samples_per_s"] = batch / step_s
    out["tokens_per_s"] = tokens / step_s
    mem_gib = out["gpu"].map({g: get_gpu(g).mem_gb for g in gpus}).to_numpy(dtype=float)
    need_gib = out["mem_required_bytes"].to_numpy(dtype=float) / GIB
    out["mem_required_gib"] = need_gib
    out["gpu_mem_gib"] = mem_gib
    fits = pd.array(need_gib <= policy.capacity_gib(mem_gib), dtype="boolean")
    fits[~np.isfinite(need_gib)] = pd.NA
    out["fits"] = fits
    price = out["gpu"].map({g: pricing.prices[g].usd_per_gpu_hour for g in gpus}).to_numpy(dtype=float)
    out["usd_per_gpu_hour"] = price
    out["price_estimate"] = out["gpu"].map({g: pricing.prices[g].estimate for g in gpus}).astype(bool)
    out["cost_per_step_usd"] = price * out["n_gpus"].to_numpy(dtype=float) * step_s / S_PER_HOUR
    out["cost_per_1m_tokens_usd"] = out["cost_per_step_usd"].to_numpy(dtype=float) / tokens * 1e6
    out.loc[~fits.fillna(True).to_numpy(bool), list(UNFIT_NULLS)] = np.nan  # a cell that does not fit cannot run
    return out


def one_cell(fc, gpu, pricing: Pricing, policy: FitPolicy, mem_required_bytes: float, n_gpus: int) -> dict:
    """:func:`derive`'s numbers for one forecast (``predict``'s answer): throughput, memory fit and cost.
    A what-if GPU (``l4+mem_bw_gbs=600``) is priced as its catalog GPU and fits in its own memory."""
    step_s = fc.e2e_ms / 1e3
    tokens = fc.batch * fc.seq_len
    price = pricing.usd_per_gpu_hour(gpu.key)
    need_gib = mem_required_bytes / GIB
    capacity = float(policy.capacity_gib(np.array([gpu.mem_gb]))[0])
    fits = bool(need_gib <= capacity)
    cost_step = price * n_gpus * step_s / S_PER_HOUR
    out = {"tokens_per_s": tokens / step_s, "samples_per_s": fc.batch / step_s, "mem_required_gib": need_gib,
           "mem_capacity_gib": capacity, "fits": fits, "n_gpus": n_gpus, "usd_per_gpu_hour": price,
           "price_estimate": pricing.price(gpu.key).estimate, "cost_per_step_usd": cost_step,
           "cost_per_1m_tokens_usd": cost_step / tokens * 1e6, "price_note": pricing.note(gpu.key)}
    return out if fits else {**out, **dict.fromkeys(UNFIT_NULLS)}  # a cell that does not fit cannot run
