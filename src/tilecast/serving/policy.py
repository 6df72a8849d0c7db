"""Each serving engine's scheduler policy and host-side costs, as ``conf/engine/<engine>.yaml`` documents them.

An :class:`EnginePolicy` is what the iteration-level model (:mod:`tilecast.serving.simulate`,
:mod:`tilecast.serving.steady`) needs of an engine: how it forms a step (token budget, running-request cap,
chunked prefill, partial-prefill limit, whether prefill chunks share a step with decodes), which steps replay CUDA
graphs, whether the host overlaps the next step's scheduling with the GPU's work, the KV-cache share of memory, and
its host costs (per step, per running request, per decoder layer of an eager step, per request). The defaults are
the engines' own (each yaml names the source file); the host costs are fitted on the public serving rows
(``benchmarks/serving.md``). :func:`engine_policy` reads an engine's yaml and applies overrides; a field no policy
has is an :class:`UnknownPolicyFieldError` naming the known ones (jobs exit 2).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace
from typing import Any

import yaml

from tilecast.errors import UserError
from tilecast.paths import CONF_DIR
from tilecast.serving.engines import check_engine


class UnknownPolicyFieldError(UserError):
    """An engine policy field no policy has (the message lists the known ones)."""


class PolicyValueError(UserError):
    """An engine policy field with a value of the wrong type or range."""


@dataclass(frozen=True)
class EnginePolicy:
    """One engine's scheduler policy and host costs (fields documented in ``conf/engine/vllm.yaml``)."""

    engine: str
    max_num_batched_tokens: int
    max_num_seqs: int
    chunked_prefill: bool
    max_partial_prefills: int
    mixed_batches: bool
    cuda_graph_max_tokens: int
    cuda_graph_decode_only: bool
    overlap_scheduling: bool
    kv_memory_fraction: float
    kernel_factors: bool
    host_step_ms: float
    host_per_seq_ms: float
    eager_per_layer_ms: float
    request_overhead_ms: float

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "engine":
                continue
            value = getattr(self, f.name)
            want = {"int": int, "bool": bool, "float": float}[f.type]
            if want is float and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, f.name, float(value))
                value = float(value)
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise PolicyValueError(f"{self.engine} policy: {f.name}={value!r} must be a {f.type}")
            if want is int and value < 1 or want is float and value < 0:
                raise PolicyValueError(f"{self.engine} policy: {f.name}={value!r} must be "
                                       + ("a positive integer" if want is int else "non-negative"))
        if self.kv_memory_fraction > 1:
            raise PolicyValueError(f"{self.engine} policy: kv_memory_fraction={self.kv_memory_fraction} exceeds 1")

    def with_overrides(self, overrides: dict[str, Any] | None) -> EnginePolicy:
        """This policy with ``overrides`` (field -> value); an unknown field is an :class:`UnknownPolicyFieldError`."""
        if not overrides:
            return self
        check_fields(overrides, self.engine)
        return replace(self, **dict(overrides))


#: the policy fields a yaml or an override may set
POLICY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(EnginePolicy) if f.name != "engine")


def check_fields(values: dict[str, Any], engine: str) -> None:
    """An :class:`UnknownPolicyFieldError` for the first key of ``values`` that is no policy field."""
    unknown = [k for k in values if k not in POLICY_FIELDS]
    if unknown:
        raise UnknownPolicyFieldError(f"unknown {engine} policy field {unknown[0]!r}; known: "
                                      f"{', '.join(POLICY_FIELDS)}")


@functools.cache
def _default(engine: str) -> EnginePolicy:
    path = CONF_DIR / "engine" / f"{engine}.yaml"
    values = yaml.safe_load(path.read_text()) or {}
    if values.pop("engine", engine) != engine:
        raise PolicyValueError(f"{path}: names another engine")
    check_fields(values, engine)
    missing = [f for f in POLICY_FIELDS if f not in values]
    if missing:
        raise PolicyValueError(f"{path}: policy fields {', '.join(missing)} are missing")
    return EnginePolicy(engine=engine, **values)


def engine_policy(engine: str = "vllm", overrides: dict[str, Any] | None = None) -> EnginePolicy:
    """``engine``'s default policy (``conf/engine/<engine>.yaml``) with ``overrides`` applied."""
    return _default(check_engine(engine)).with_overrides(overrides)


def policy_of(node: dict[str, Any]) -> EnginePolicy:
    """The policy a job's ``engine`` config node spells (``engine: <name>`` and any policy fields)."""
    values = dict(node)
    name = values.pop("engine", None)
    if name is None:
        raise PolicyValueError("the engine config names no engine (engine: vllm | sglang | trtllm)")
    return engine_policy(str(name), values)


__all__ = ["POLICY_FIELDS", "EnginePolicy", "PolicyValueError", "UnknownPolicyFieldError", "engine_policy", "policy_of"]
