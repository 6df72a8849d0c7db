"""GPU prices (``conf/pricing/<name>.yaml``): $/GPU-hour per catalog GPU, with source and date.

Every GPU a matrix uses must be priced: a missing one is an error before any work starts, so no
cost column is ever silently empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tilecast.specs import UnknownSpecError, get_gpu
from tilecast.specs.catalog import positive


class PricingError(ValueError):
    """A pricing config that is invalid or misses a GPU (names the config, the GPU and the field)."""


@dataclass(frozen=True)
class GpuPrice:
    """One GPU's on-demand price and where it comes from."""

    gpu: str
    usd_per_gpu_hour: float
    source: str
    date: str
    estimate: bool = False


@dataclass(frozen=True)
class Pricing:
    """Prices by catalog GPU key."""

    name: str
    currency: str
    prices: Mapping[str, GpuPrice]

    def require(self, gpus: Iterable[str]) -> None:
        """Raise :class:`PricingError` naming every GPU in ``gpus`` without a price."""
        missing = [g for g in dict.fromkeys(gpus) if g not in self.prices]
        if missing:
            raise PricingError(f"pricing {self.name!r} has no price for GPU(s) {', '.join(missing)}; add "
                               f"`<key>: {{usd_per_gpu_hour: ..., source: ..., date: ...}}` under gpus: in "
                               f"conf/pricing/{self.name}.yaml")

    def usd_per_gpu_hour(self, gpu: str) -> float:
        self.require([gpu])
        return self.prices[gpu].usd_per_gpu_hour

    def table(self) -> pd.DataFrame:
        """One row per priced GPU: gpu, usd_per_gpu_hour, source, date, estimate."""
        return pd.DataFrame([vars(p) for p in self.prices.values()],
                            columns=["gpu", "usd_per_gpu_hour", "source", "date", "estimate"])


def load_pricing(config: Mapping[str, Any]) -> Pricing:
    """Validate a pricing mapping (a composed ``pricing`` node as a dict); GPU names may be any catalog name."""
    name = str(config.get("name") or "pricing")
    gpus = config.get("gpus")
    if not isinstance(gpus, Mapping) or not gpus:
        raise PricingError(f"pricing {name!r}: field 'gpus' must map GPU keys to prices")
    prices: dict[str, GpuPrice] = {}
    for raw, entry in gpus.items():
        try:
            key = get_gpu(str(raw)).key
        except UnknownSpecError as exc:
            raise PricingError(f"pricing {name!r}: {exc}") from None
        if not isinstance(entry, Mapping):
            raise PricingError(f"pricing {name!r}: gpus.{raw} must be a mapping with usd_per_gpu_hour, source, date")
        price = entry.get("usd_per_gpu_hour")
        if not positive(price):
            raise PricingError(f"pricing {name!r}: gpus.{raw}.usd_per_gpu_hour has invalid value {price!r} "
                               f"(expected a positive number)")
        for field in ("source", "date"):
            if not str(entry.get(field) or "").strip():
                raise PricingError(f"pricing {name!r}: gpus.{raw}.{field} is missing (every price names "
                                   f"where it comes from and when)")
        estimate = entry.get("estimate", False)
        if not isinstance(estimate, bool):
            raise PricingError(f"pricing {name!r}: gpus.{raw}.estimate has invalid value {estimate!r}")
        if key in prices:
            raise PricingError(f"pricing {name!r}: GPU {key!r} is priced twice")
        prices[key] = GpuPrice(key, float(price), str(entry["source"]), str(entry["date"]), estimate)
    return Pricing(name, str(config.get("currency") or "USD"), prices)
