"""Money for people: ``$0.66``, ``$1.2k``, ``$3.4M``; never ``6.66e-04``. Tables hold the raw numbers (CSV,
Parquet); what a person reads goes through :func:`usd`. A report column is money when its name says so
(:func:`is_money_column`)."""

from __future__ import annotations

import math

#: (threshold, divisor, suffix) from the largest
_SCALES = ((1e9, 1e9, "B"), (1e6, 1e6, "M"), (1e3, 1e3, "k"))


def usd(value: float | None, unit: str = "") -> str:
    """``value`` US dollars as a person reads them: two significant figures at least, thousands as ``k``,
    millions as ``M``, billions as ``B``, cents and below with as many decimals as two significant figures need
    (``$0.66``, ``$0.0012``), never in exponent notation; ``unit`` appended (``usd(1234, "/ month")`` ->
    ``$1.2k / month``). Missing or non-finite: an empty string."""
    if value is None:
        return ""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(v):
        return ""
    sign, v = ("-" if v < 0 else ""), abs(v)
    text = None
    for threshold, divisor, suffix in _SCALES:
        if v >= threshold * 0.9995:
            scaled = v / divisor
            text = f"{scaled:.1f}{suffix}" if scaled < 9.95 else f"{scaled:.0f}{suffix}"
            break
    if text is None:
        if v == 0:
            text = "0"
        elif v >= 100:
            text = f"{v:.0f}"
        elif v >= 1:
            text = f"{v:.2f}"
        else:
            decimals = max(2, 1 - math.floor(math.log10(v)))
            text = f"{v:.{decimals}f}"
    return f"{sign}${text}" + (f" {unit}" if unit else "")


def is_money_column(name: str) -> bool:
    """A column of US dollars: its name starts or ends with ``usd``, or holds ``_usd_`` or ``cost``
    (``usd_per_month``, ``cost_per_1m_tokens_usd``, ``usd_to_train``)."""
    n = str(name).lower()
    return n.startswith("usd") or n.endswith("usd") or "_usd_" in n or "cost" in n


__all__ = ["is_money_column", "usd"]
