"""GPU prices (``conf/pricing/<name>.yaml``, or a file of your own with ``pricing=<path>.yaml``): $/GPU-hour per
catalog GPU, each with where it comes from.

Every price has a **basis**, shown beside it in every table that uses it (``price_basis``, and
``price_estimate`` = not ``listed``):

- ``listed``: the part's own public on-demand list price; ``source`` names the offer, ``date`` when it was read;
- ``proxy``: another part's list price stands in (``estimate: true``; ``source`` names the part);
- ``formula``: derived from another GPU's price (``derived: {from: <gpu>, scale_by: <GpuSpec field>, factor: x}``):
  ``price(from) x spec(gpu)/spec(from) x factor``, rounded to cents, the base's own price being its rounded
  figure. The loader computes it (one source of truth) and refuses a stated ``usd_per_gpu_hour`` that differs.

Every GPU a matrix uses must be priced: a missing one is an error before any work starts, so no cost column is
ever silently empty. A what-if GPU (``l4+mem_bw_gbs=600``) is priced as its catalog base, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from tilecast.errors import UserError
from tilecast.specs import UnknownSpecError, get_gpu
from tilecast.specs.catalog import positive

#: how a price was arrived at (see the module docstring)
BASES = ("listed", "proxy", "formula")
#: decimals a derived price is rounded to (cents)
CENTS = 2


class PricingError(UserError):
    """A pricing config that is invalid or misses a GPU (names the config, the GPU and the field)."""


@dataclass(frozen=True)
class GpuPrice:
    """One GPU's on-demand price and where it comes from."""

    gpu: str
    usd_per_gpu_hour: float
    source: str
    date: str
    basis: str = "listed"  # listed | proxy | formula
    formula: str = ""  # the derivation of a formula price, as text

    @property
    def estimate(self) -> bool:
        """Not the part's own list price (a proxy's or a formula's)."""
        return self.basis != "listed"


@dataclass(frozen=True)
class Pricing:
    """Prices by catalog GPU key."""

    name: str
    currency: str
    prices: Mapping[str, GpuPrice]
    origin: str = ""  # the file the prices were read from, when not conf/pricing/<name>.yaml

    def require(self, gpus: Iterable[str]) -> None:
        """Raise :class:`PricingError` naming every GPU in ``gpus`` without a price (a what-if GPU: its base's)."""
        missing = [g for g in dict.fromkeys(gpus) if base_gpu(g) not in self.prices]
        if missing:
            where = self.origin or f"conf/pricing/{self.name}.yaml"
            raise PricingError(f"pricing {self.name!r} has no price for GPU(s) {', '.join(missing)}; add "
                               f"`<key>: {{usd_per_gpu_hour: ..., source: ..., date: ...}}` under gpus: in {where}")

    def price(self, gpu: str) -> GpuPrice:
        """The price of ``gpu``; a what-if GPU (``<key>+<field>=<value>``) gets its catalog base's."""
        self.require([gpu])
        return self.prices[base_gpu(gpu)]

    def usd_per_gpu_hour(self, gpu: str) -> float:
        return self.price(gpu).usd_per_gpu_hour

    def note(self, gpu: str) -> str:
        """What a reader must know about ``gpu``'s price: its basis when not listed, and a what-if's inheritance."""
        p = self.price(gpu)
        parts = []
        if base_gpu(gpu) != gpu:
            parts.append(f"what-if GPU {gpu} priced as its base {p.gpu}")
        if p.basis == "formula":
            parts.append(f"derived price: {p.formula}")
        elif p.basis == "proxy":
            parts.append(f"proxy price: {p.source}")
        return "; ".join(parts)

    def table(self) -> pd.DataFrame:
        """One row per priced GPU: gpu, usd_per_gpu_hour, basis, source, date, estimate."""
        rows = [{"gpu": p.gpu, "usd_per_gpu_hour": p.usd_per_gpu_hour, "basis": p.basis, "source": p.source,
                 "date": p.date, "estimate": p.estimate} for p in self.prices.values()]
        return pd.DataFrame(rows, columns=["gpu", "usd_per_gpu_hour", "basis", "source", "date", "estimate"])


def base_gpu(key: str) -> str:
    """The catalog GPU a what-if key (``l4+mem_bw_gbs=600``) is built on; a catalog key itself otherwise."""
    return str(key).split("+", 1)[0]


def _spec_value(gpu: str, field: str, name: str) -> float:
    value = getattr(get_gpu(gpu), field, None)
    if not positive(value):
        raise PricingError(f"pricing {name!r}: a formula scales by {field}, which GPU {gpu!r} does not have")
    return float(value)


def formula_price(gpu: str, derived: Mapping[str, Any], base_usd: float, name: str = "pricing") -> tuple[float, str]:
    """``(usd_per_gpu_hour, text)`` of a ``derived: {from, scale_by, factor}`` entry given its base's price:
    ``base_usd x spec(gpu)/spec(from) x factor``, rounded to cents."""
    base = get_gpu(str(derived["from"])).key
    value, text = base_usd, f"{base} {base_usd:g} $/h"
    field = derived.get("scale_by")
    if field:
        mine, theirs = _spec_value(gpu, str(field), name), _spec_value(base, str(field), name)
        value *= mine / theirs
        text += f" x {field} {mine:g}/{theirs:g}"
    factor = derived.get("factor", 1.0)
    if not positive(factor):
        raise PricingError(f"pricing {name!r}: gpus.{gpu}.derived.factor has invalid value {factor!r}")
    if float(factor) != 1.0:
        value *= float(factor)
        text += f" x {float(factor):g}"
    return round(value, CENTS), text


def _read_file(path: str) -> Mapping[str, Any]:
    file = Path(path).expanduser()
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PricingError(f"pricing={path}: cannot be read ({' '.join(str(exc).split())})") from None
    if not isinstance(data, Mapping):
        raise PricingError(f"pricing={path}: expected a mapping with name, currency and gpus (like "
                           f"conf/pricing/default.yaml)")
    return {"name": file.stem, **data, "origin": str(file)}


def load_pricing(config: Mapping[str, Any]) -> Pricing:
    """Validate a pricing mapping (a composed ``pricing`` node as a dict, or one whose ``file`` names a YAML file
    of the same layout: ``pricing=<path>.yaml``); GPU names may be any catalog name; formulas are computed."""
    if config.get("file"):
        config = _read_file(str(config["file"]))
    name = str(config.get("name") or "pricing")
    gpus = config.get("gpus")
    if not isinstance(gpus, Mapping) or not gpus:
        raise PricingError(f"pricing {name!r}: field 'gpus' must map GPU keys to prices")
    entries: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for raw, entry in gpus.items():
        try:
            key = get_gpu(str(raw)).key
        except UnknownSpecError as exc:
            raise PricingError(f"pricing {name!r}: {exc}") from None
        if not isinstance(entry, Mapping):
            raise PricingError(f"pricing {name!r}: gpus.{raw} must be a mapping with usd_per_gpu_hour, source, date")
        if key in entries:
            raise PricingError(f"pricing {name!r}: GPU {key!r} is priced twice")
        entries[key] = (str(raw), entry)
    prices: dict[str, GpuPrice] = {}
    for key in entries:
        _resolve(key, entries, prices, name, ())
    return Pricing(name, str(config.get("currency") or "USD"), {k: prices[k] for k in entries},
                   str(config.get("origin") or ""))


def _resolve(key: str, entries: Mapping[str, tuple[str, Mapping[str, Any]]], prices: dict[str, GpuPrice],
             name: str, chain: tuple[str, ...]) -> GpuPrice:
    """The price of ``key``, resolving its formula's base first (a cycle is an error)."""
    if key in prices:
        return prices[key]
    if key in chain:
        raise PricingError(f"pricing {name!r}: formulas form a cycle: {' -> '.join((*chain, key))}")
    raw, entry = entries[key]
    for field in ("source", "date"):
        if not str(entry.get(field) or "").strip():
            raise PricingError(f"pricing {name!r}: gpus.{raw}.{field} is missing (every price names where it comes "
                               f"from and when)")
    estimate = entry.get("estimate", False)
    if not isinstance(estimate, bool):
        raise PricingError(f"pricing {name!r}: gpus.{raw}.estimate has invalid value {estimate!r}")
    stated = entry.get("usd_per_gpu_hour")
    derived = entry.get("derived")
    if derived is not None:
        if not isinstance(derived, Mapping) or "from" not in derived:
            raise PricingError(f"pricing {name!r}: gpus.{raw}.derived must be a mapping {{from: <gpu>, scale_by: "
                               f"<spec field>, factor: <number>}}")
        try:
            base = get_gpu(str(derived["from"])).key
        except UnknownSpecError as exc:
            raise PricingError(f"pricing {name!r}: gpus.{raw}.derived.from: {exc}") from None
        if base not in entries:
            raise PricingError(f"pricing {name!r}: gpus.{raw} is derived from {base}, which has no price here")
        base_price = _resolve(base, entries, prices, name, (*chain, key))
        value, text = formula_price(key, derived, base_price.usd_per_gpu_hour, name)
        if stated is not None and (not positive(stated) or abs(float(stated) - value) > 0.5 * 10**-CENTS):
            raise PricingError(f"pricing {name!r}: gpus.{raw}.usd_per_gpu_hour is {stated!r}, but its formula "
                               f"({text}) gives {value:.2f}; state the formula's value or drop the formula")
        prices[key] = GpuPrice(key, value, str(entry["source"]), str(entry["date"]), "formula", f"{text} = {value:.2f}")
        return prices[key]
    if not positive(stated):
        raise PricingError(f"pricing {name!r}: gpus.{raw}.usd_per_gpu_hour has invalid value {stated!r} "
                           f"(expected a positive number)")
    prices[key] = GpuPrice(key, float(stated), str(entry["source"]), str(entry["date"]),
                           "proxy" if estimate else "listed")
    return prices[key]
