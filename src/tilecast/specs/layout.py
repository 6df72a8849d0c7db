"""How a model is spread over GPUs for serving (and mixture-of-experts training): a :class:`Layout` value.

A layout is what the serving data spells in ``tp_size, attention_dp_size, moe_tp_size, moe_ep_size``:

- attention (and the dense parts: dense MLPs, shared experts, embedding, LM head) runs tensor parallel over
  ``tp`` GPUs, and ``dp`` such groups each serve their own share of the requests (attention data parallel);
- the routed experts run over all ``tp x dp`` GPUs: ``ep`` of them hold disjoint sets of experts (expert
  parallel) and each expert's intermediate features are split ``moe_tp = tp x dp / ep`` ways.

So ``moe_tp x moe_ep == tp x dp`` always (the data never spells otherwise) and a layout is ``(tp, dp, ep)``.
:meth:`Layout.check` validates it once against a model (and a GPU count); the graph builder, the memory model
and the collectives read the same value. Errors (:class:`LayoutError`, a WorkloadError) name the value: EP not
dividing the experts, tp not dividing the heads, ``tp x dp`` not matching the GPU count, a layout of a
serving row whose moe_tp x moe_ep differs from tp x dp, pipeline parallelism.

Tags: ``tp4``, ``tp4ep4``, ``tp1dp8ep8``, ``dp8ep8`` (``tp`` 1 when absent), ``tp1dp72ep72s288``.

Wide expert parallelism (a GB200 NVL72 domain): an ``ep`` that does not divide the experts runs with redundant
expert slots, as TensorRT-LLM's and SGLang's expert-parallel load balancers do: ``slots`` (a multiple of ``ep``, at
least the experts) are spread evenly, ``slots / ep`` per GPU, the extra ones copies of the busiest experts. A layout
states its slots (``s<n>`` in the tag); without them EP must divide the experts (the named error). The public
serving rows spell such deployments ``tp_size = moe_tp_size = N`` above :data:`MAX_TP` GPUs with neither attention
dp nor ep (no engine splits attention or an expert across more than one node's 8 GPUs; tensor parallelism over N
would hold every request's latent cache on every GPU): :func:`layout_from_row` reads them as attention data
parallel over N, experts over N, ``ceil(experts / N) x N`` slots (:func:`wide_ep`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tilecast.specs.model import ModelSpec
from tilecast.specs.workload import WorkloadError

_TAG = re.compile(r"^(?:tp(?P<tp>\d+))?(?:dp(?P<dp>\d+))?(?:ep(?P<ep>\d+)(?:s(?P<slots>\d+))?)?$")
TAG_FORMAT = "tp<n>[dp<n>][ep<n>[s<slots>]] (e.g. tp8, tp4ep4, tp1dp8ep8, tp1dp72ep72s288)"
#: the most GPUs a row's tensor parallelism spans as spelled (one node); beyond, a row of tp = moe_tp alone is a
#: wide expert-parallel deployment (module docstring)
MAX_TP = 8
#: serving.csv columns of a layout (``prefill_`` / ``decode_`` prefixed in disaggregated rows)
ROW_COLUMNS = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "pp_size")


class LayoutError(WorkloadError):
    """A layout that cannot run a model (names the layout, the model and the value that breaks it)."""


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise LayoutError(f"layout {name} must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class Layout:
    """``tp`` x ``dp`` GPUs: attention tensor parallel over ``tp``, ``dp`` attention data-parallel groups; routed
    experts expert parallel over ``ep`` GPUs and tensor parallel over ``moe_tp = tp x dp / ep``."""

    tp: int = 1
    dp: int = 1
    ep: int = 1
    slots: int = 0  # expert slots over the ep GPUs (redundant experts; 0: the model's experts)

    def __post_init__(self) -> None:
        for name in ("tp", "dp", "ep"):
            _positive(name, getattr(self, name))
        if self.gpus % self.ep:
            raise LayoutError(f"layout {self.tag}: ep={self.ep} does not divide the {self.gpus} GPUs of tp x dp")
        if self.slots and (self.slots < 0 or self.slots % self.ep):
            raise LayoutError(f"layout {self.tag}: {self.slots} expert slots are not a multiple of ep={self.ep}")

    @property
    def gpus(self) -> int:
        """GPUs of one serving instance: ``tp x dp``."""
        return self.tp * self.dp

    @property
    def moe_tp(self) -> int:
        """Ways each expert's intermediate features are split: ``tp x dp / ep``."""
        return self.gpus // self.ep

    @property
    def tag(self) -> str:
        """``tp4``, ``tp4ep4``, ``tp1dp8ep8``: the graph key of this layout."""
        return (f"tp{self.tp}" + (f"dp{self.dp}" if self.dp > 1 else "") + (f"ep{self.ep}" if self.ep > 1 else "")
                + (f"s{self.slots}" if self.slots else ""))

    def expert_slots(self, experts: int) -> int:
        """Expert slots the ``ep`` GPUs hold for a model of ``experts`` routed experts (its own count unless the
        layout states redundant ones)."""
        return self.slots or experts

    def local_batch(self, batch: int) -> int:
        """Sequences one attention data-parallel group serves of ``batch`` (the busiest group's share)."""
        return math.ceil(batch / self.dp)

    def check(self, model: ModelSpec, gpus: int | None = None) -> Layout:
        """``self``, or :class:`LayoutError` naming what of ``model`` (or the GPU count) it cannot split."""
        where = f"layout {self.tag} of {model.key}"
        if gpus is not None and gpus != self.gpus:
            raise LayoutError(f"{where}: tp x attention-dp = {self.tp} x {self.dp} = {self.gpus} GPUs, not the "
                              f"{gpus} GPUs asked for")
        tp = self.tp
        if model.num_heads % tp:
            raise LayoutError(f"{where}: tp={tp} does not divide the {model.num_heads} attention heads")
        if model.mla is None and model.num_kv_heads % tp and tp % model.num_kv_heads:
            raise LayoutError(f"{where}: tp={tp} neither divides nor is a multiple of the {model.num_kv_heads} "
                              "KV heads")
        if model.linear_attn is not None:
            la = model.linear_attn
            for what, n in (("linear-attention key heads", la.key_heads), ("linear-attention value heads",
                                                                              la.value_heads)):
                if n % tp:
                    raise LayoutError(f"{where}: tp={tp} does not divide the {n} {what}")
        moe = model.moe
        if moe is None:
            if self.ep > 1:
                raise LayoutError(f"{where}: ep={self.ep}, but {model.key} is dense (no experts to spread)")
            if model.intermediate_size % tp:
                raise LayoutError(f"{where}: tp={tp} does not divide the MLP's {model.intermediate_size} features")
            return self
        if self.slots and self.slots < moe.experts:
            raise LayoutError(f"{where}: {self.slots} expert slots are fewer than the {moe.experts} experts")
        if self.expert_slots(moe.experts) % self.ep:
            raise LayoutError(f"{where}: expert parallel ep={self.ep} does not divide the {moe.experts} experts "
                              "(give redundant expert slots, s<n> in the tag, for wide expert parallelism)")
        if moe.inter % self.moe_tp:
            raise LayoutError(f"{where}: moe_tp={self.moe_tp} (tp x dp / ep) does not divide the experts' "
                              f"{moe.inter} intermediate features")
        if moe.shared_inter % tp:
            raise LayoutError(f"{where}: tp={tp} does not divide the shared experts' {moe.shared_inter} features")
        if not all(moe.layers) and model.intermediate_size % tp:
            raise LayoutError(f"{where}: tp={tp} does not divide the dense layers' {model.intermediate_size} features")
        return self


def parse_layout(value: str | Layout | None) -> Layout | None:
    """``"tp4"`` / ``"tp4ep4"`` / ``"tp1dp8ep8"`` -> :class:`Layout`; None / "" -> None; malformed: LayoutError."""
    if value is None or isinstance(value, Layout):
        return value
    text = str(value).strip().lower()
    if text in ("", "none", "null"):
        return None
    m = _TAG.match(text)
    if not m or not any(m.groupdict().values()):
        raise LayoutError(f"layout={value!r} is not {TAG_FORMAT}")
    return Layout(*(int(m[k]) if m[k] else 1 for k in ("tp", "dp", "ep")), int(m["slots"] or 0))


def wide_ep(gpus: int, model: ModelSpec) -> Layout:
    """Attention data parallel over ``gpus``, the experts over all of them, with redundant slots where ``gpus`` does
    not divide the experts (``ceil(experts / gpus)`` per GPU)."""
    experts = model.moe.experts
    slots = -(-experts // gpus) * gpus
    return Layout(1, gpus, gpus, slots if slots != experts else 0)


def _size(row: Mapping[str, Any], column: str) -> int | None:
    """A layout column of a serving row: None where absent, empty, NaN or 0 (the data's "not set")."""
    value = row.get(column)
    if value is None or value is pd.NA or (isinstance(value, str) and not value.strip()):
        return None  # pd.NA: a nullable integer column (the shipped serving table's)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LayoutError(f"{column}={value!r} is not a number") from None
    if not math.isfinite(number) or number == 0:
        return None
    if number < 0 or number != int(number):
        raise LayoutError(f"{column}={value!r} is not a positive integer")
    return int(number)


def layout_from_row(row: Mapping[str, Any], model: ModelSpec, prefix: str = "") -> Layout:
    """The layout a ``serving.csv`` row spells in its ``<prefix>tp_size, attention_dp_size, moe_tp_size,
    moe_ep_size`` (``prefix`` ``prefill_`` / ``decode_`` for a disaggregated row's pools), checked against
    ``model``. Empty or 0 means 1 (attention dp) or "the rest" (moe sizes); a dense model's moe sizes are
    ignored (the data spells them anyway). ``pp_size`` above 1 is refused."""
    tp = _size(row, f"{prefix}tp_size")
    if tp is None:
        raise LayoutError(f"{prefix}tp_size is not set")
    dp = _size(row, f"{prefix}attention_dp_size") or 1
    pp = _size(row, f"{prefix}pp_size") or 1
    if pp > 1:
        raise LayoutError(f"{prefix}pp_size={pp}: pipeline-parallel serving is not modelled")
    moe_tp, ep = _size(row, f"{prefix}moe_tp_size"), _size(row, f"{prefix}moe_ep_size")
    if model.moe is None:
        return Layout(tp, dp).check(model)
    if model.moe is not None and tp > MAX_TP and dp == 1 and moe_tp in (None, tp) and ep in (None, 1):
        return wide_ep(tp, model).check(model)  # the data's spelling of wide EP (module docstring)
    ep = ep or (tp * dp // moe_tp if moe_tp else 1)
    moe_tp = moe_tp or (tp * dp // ep)
    if moe_tp * ep != tp * dp:
        raise LayoutError(f"{prefix}moe_tp_size x {prefix}moe_ep_size = {moe_tp} x {ep} = {moe_tp * ep} GPUs, but "
                          f"{prefix}tp_size x {prefix}attention_dp_size = {tp} x {dp} = {tp * dp}")
    return Layout(tp, dp, ep).check(model)


@dataclass(frozen=True)
class RowLayouts:
    """The layouts of one serving row: ``agg`` for an aggregated row; ``prefill`` / ``decode`` pools (with their
    worker counts) for a disaggregated one."""

    agg: Layout | None = None
    prefill: Layout | None = None
    decode: Layout | None = None
    prefill_workers: int = 0
    decode_workers: int = 0

    @property
    def disaggregated(self) -> bool:
        return self.agg is None


def row_layouts(row: Mapping[str, Any], model: ModelSpec) -> RowLayouts:
    """Every layout of a ``serving.csv`` row (``mode`` agg | disagg), each checked against ``model``."""
    mode = str(row.get("mode", "agg"))
    if mode == "agg":
        return RowLayouts(agg=layout_from_row(row, model))
    if mode != "disagg":
        raise LayoutError(f"mode={mode!r} is neither agg nor disagg")
    workers = {p: _size(row, f"{p}_num_workers") or 1 for p in ("prefill", "decode")}
    return RowLayouts(prefill=layout_from_row(row, model, "prefill_"), decode=layout_from_row(row, model, "decode_"),
                      prefill_workers=workers["prefill"], decode_workers=workers["decode"])
