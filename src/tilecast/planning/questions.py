"""What a person asks the planner: a serving question (traffic and a service level) or a training question
(tokens and a deadline or a budget). Validated on construction; every problem is a named error naming the
value (a job exits 2 on it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tilecast.forecast.serve import SERVE_DTYPES
from tilecast.specs import ModelSpec, SpecError, all_gpus, get_gpu, get_model

#: hours a GPU is rented per month (365 x 24 / 12), the one figure every monthly cost uses
HOURS_PER_MONTH = 730.0
S_PER_DAY = 86400.0


class PlanError(SpecError):
    """A planning question that cannot be asked as given (names the key and the value)."""


class RateError(PlanError):
    """A traffic rate that is not a positive number of requests (or tokens) per second."""


class ServiceLevelError(PlanError):
    """A service level (TTFT / TPOT target) that is not a positive number of ms."""


class DeadlineError(PlanError):
    """A training deadline (or budget) that no run can meet even in principle: shorter than one step."""


def _positive(name: str, value: Any, error: type[PlanError] = PlanError, unit: str = "") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or value != value:
        raise error(f"{name} must be a positive number{unit}, got {value!r}")
    return float(value)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PlanError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def resolve_gpus(names: Iterable[str] | None, dtypes: Sequence[str] = ()) -> tuple[str, ...]:
    """Catalog keys of ``names`` (any name a GPU goes by; an unknown one raises
    :class:`~tilecast.specs.UnknownSpecError` listing the closest known ones); ``None``: the whole catalog."""
    if names is None:
        return tuple(all_gpus())
    if isinstance(names, str):
        names = [names]
    keys = tuple(dict.fromkeys(get_gpu(str(n)).key for n in names))
    if not keys:
        raise PlanError("gpus must name at least one GPU (or be null for the whole catalog)")
    return keys


def _spec(model: ModelSpec | str) -> ModelSpec:
    return get_model(model) if isinstance(model, str) else model


@dataclass(frozen=True)
class ServeQuestion:
    """Serve ``model`` to ``rate_rps`` requests per second of ``isl`` prompt and ``osl`` output tokens, each
    user seeing the first token within ``ttft_ms`` and then a token every ``tpot_ms`` at most."""

    model: ModelSpec
    isl: int
    osl: int
    ttft_ms: float
    tpot_ms: float
    rate_rps: float
    gpus: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("bf16", "fp8", "fp4")
    max_gpus: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", _spec(self.model))
        for key in ("isl", "osl"):
            _positive_int(key, getattr(self, key))
        for key in ("ttft_ms", "tpot_ms"):
            object.__setattr__(self, key, _positive(key, getattr(self, key), ServiceLevelError, " of ms"))
        object.__setattr__(self, "rate_rps", _positive("rate", self.rate_rps, RateError, " of requests per second"))
        object.__setattr__(self, "gpus", resolve_gpus(self.gpus or None))
        dtypes = tuple(dict.fromkeys(str(d) for d in (self.dtypes or ())))
        bad = [d for d in dtypes if d not in SERVE_DTYPES]
        if bad or not dtypes:
            raise PlanError(f"dtypes must be some of {', '.join(SERVE_DTYPES)}, got {list(self.dtypes)!r}")
        object.__setattr__(self, "dtypes", dtypes)
        if self.max_gpus is not None:
            _positive_int("max_gpus", self.max_gpus)
        spec = self.model
        if spec.max_positions and self.isl + self.osl > spec.max_positions:
            raise PlanError(f"isl + osl = {self.isl + self.osl} exceeds {spec.key}'s {spec.max_positions} positions")

    @classmethod
    def of(cls, model: ModelSpec | str, isl: int, osl: int, ttft_ms: float, tpot_ms: float,
           rate: float | None = None, tokens_per_s: float | None = None, **options: Any) -> ServeQuestion:
        """From a rate in requests per second, or in output tokens per second (``tokens_per_s``)."""
        if (rate is None) == (tokens_per_s is None):
            raise RateError("give the traffic as rate=<requests per second> or tokens_per_s=<output tokens per "
                            "second>, one of the two")
        if rate is None:
            tokens = _positive("tokens_per_s", tokens_per_s, RateError, " of output tokens per second")
            osl = _positive_int("osl", osl)
            rate = tokens / osl
        return cls(_spec(model), isl, osl, ttft_ms, tpot_ms, rate, **options)

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second the fleet must produce."""
        return self.rate_rps * self.osl

    def describe(self) -> str:
        rate = (f"{self.rate_rps * 60:,.0f} requests/min" if self.rate_rps * 60 >= 10
                else f"{self.rate_rps:.3g} requests/s")
        return (f"{self.model.key}, {self.isl:,} in / {self.osl:,} out, {rate}, TTFT ≤ {_ms(self.ttft_ms)}, "
                f"TPOT ≤ {_ms(self.tpot_ms)}")

    def to_dict(self) -> dict[str, Any]:
        return {"task": "serve", "name": self.name, "model": self.model.key, "isl": self.isl, "osl": self.osl,
                "ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "rate_rps": self.rate_rps,
                "tokens_per_s": self.tokens_per_s, "gpus": list(self.gpus), "dtypes": list(self.dtypes),
                "max_gpus": self.max_gpus}


@dataclass(frozen=True)
class TrainQuestion:
    """Train ``model`` on ``tokens`` tokens within ``days`` (the cheapest run meeting it), or within
    ``budget_usd`` (the fastest run within it)."""

    model: ModelSpec
    tokens: float
    days: float | None = None
    budget_usd: float | None = None
    gpus: tuple[str, ...] = ()
    dtype: str = "amp_bf16"
    seq_len: int = 8192
    global_batch: int = 512
    max_gpus: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", _spec(self.model))
        object.__setattr__(self, "tokens", _positive("tokens", self.tokens, PlanError, " of tokens (e.g. 2e12)"))
        if (self.days is None) == (self.budget_usd is None):
            raise PlanError("give a deadline days=<days> or a budget budget_usd=<USD>, one of the two")
        if self.days is not None:
            object.__setattr__(self, "days", _positive("days", self.days, DeadlineError, " of days"))
        if self.budget_usd is not None:
            object.__setattr__(self, "budget_usd", _positive("budget_usd", self.budget_usd, DeadlineError, " of USD"))
        object.__setattr__(self, "gpus", resolve_gpus(self.gpus or None))
        for key in ("seq_len", "global_batch"):
            _positive_int(key, getattr(self, key))
        if self.max_gpus is not None:
            _positive_int("max_gpus", self.max_gpus)
        spec = self.model
        if spec.max_positions and self.seq_len > spec.max_positions:
            raise PlanError(f"seq_len={self.seq_len} exceeds {spec.key}'s {spec.max_positions} positions")

    @property
    def deadline_s(self) -> float | None:
        return None if self.days is None else self.days * S_PER_DAY

    def describe(self) -> str:
        goal = (f"in {self.days:g} day{'' if self.days == 1 else 's'}" if self.days is not None
                else f"within {money(self.budget_usd)}")
        return f"train {self.model.key} on {count(self.tokens)} tokens {goal}"

    def to_dict(self) -> dict[str, Any]:
        return {"task": "train", "name": self.name, "model": self.model.key, "tokens": self.tokens,
                "days": self.days, "budget_usd": self.budget_usd, "gpus": list(self.gpus), "dtype": self.dtype,
                "seq_len": self.seq_len, "global_batch": self.global_batch, "max_gpus": self.max_gpus}


Question = ServeQuestion | TrainQuestion


def _ms(value: float) -> str:
    return f"{value / 1e3:g} s" if value >= 1000 else f"{value:g} ms"


def count(value: float) -> str:
    """A large count for people: ``2T``, ``1.5B``, ``300M``."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:g}"


def money(value: float | None) -> str:
    """USD for people (:func:`tilecast.reports.money.usd`)."""
    from tilecast.reports.money import usd

    return usd(value)


SERVE_KEYS = ("model", "isl", "osl", "ttft_ms", "tpot_ms", "rate", "tokens_per_s", "rate_per_min", "gpus", "dtypes",
              "max_gpus", "name")
TRAIN_KEYS = ("model", "tokens", "days", "budget_usd", "gpus", "dtype", "seq_len", "global_batch", "max_gpus", "name")


def question_from(values: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> Question:
    """A question from a mapping: training when it has ``tokens``, serving otherwise. Unknown keys are an
    error naming them; ``defaults`` fill keys the mapping leaves out (``gpus``, ``dtypes``, ``max_gpus``...).
    ``rate_per_min``: requests per minute (the nightly's questions read better so)."""
    v = {**{k: x for k, x in (defaults or {}).items() if x is not None}, **{k: x for k, x in values.items()
                                                                           if x is not None}}
    train = v.get("tokens") is not None
    known = TRAIN_KEYS if train else SERVE_KEYS
    unknown = sorted(k for k in values if k not in known)
    if unknown:
        raise PlanError(f"{'training' if train else 'serving'} question: unknown key(s) {', '.join(unknown)} "
                        f"(known: {', '.join(known)})")
    v = {k: x for k, x in v.items() if k in known}
    if v.get("model") is None:
        raise PlanError("model=<key> is required")
    if train:
        return TrainQuestion(**{k: (tuple(x) if k == "gpus" else x) for k, x in v.items()})
    missing = [k for k in ("isl", "osl", "ttft_ms", "tpot_ms") if v.get(k) is None]
    if missing:
        raise PlanError(f"a serving question needs {', '.join(f'{k}=<n>' for k in missing)} (a training one "
                        f"tokens=<count> and days=<deadline>)")
    rate, per_min, tokens = v.pop("rate", None), v.pop("rate_per_min", None), v.pop("tokens_per_s", None)
    if per_min is not None:
        if rate is not None:
            raise RateError("give rate (requests/s) or rate_per_min, not both")
        rate = _positive("rate_per_min", per_min, RateError, " of requests per minute") / 60.0
    for key in ("gpus", "dtypes"):
        if key in v:
            v[key] = tuple(v[key]) if not isinstance(v[key], str) else (v[key],)
    return ServeQuestion.of(rate=rate, tokens_per_s=tokens, **v)


__all__ = ["DeadlineError", "HOURS_PER_MONTH", "PlanError", "Question", "RateError", "S_PER_DAY", "ServeQuestion",
           "ServiceLevelError", "TrainQuestion", "question_from", "resolve_gpus"]
