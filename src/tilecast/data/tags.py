"""Label and graph tags: ``<model>-<inf|train>-<seq>-<batch>[-<variant>]``.

``variant`` is ``plain`` when absent; otherwise e.g. ``fusion``, ``dp4``, ``tp4``, ``pp4_1``.
Model names that are not catalog keys are mapped through :data:`schema.MODEL_ALIASES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilecast.data.schema import MODEL_ALIASES, MODES
from tilecast.errors import UserError

_TAG = re.compile(r"^(?P<model>[^-]+)-(?P<mode>[^-]+)-(?P<seq>[^-]+)-(?P<batch>[^-]+)(?:-(?P<variant>.+))?$")
TAG_FORMAT = "<model>-<inf|train>-<seq>-<batch>[-<variant>]"


@dataclass(frozen=True)
class Tag:
    """One label/graph tag, parsed."""

    tag: str
    model_raw: str
    model: str  # catalog key
    mode: str  # inference | training
    seq_len: int
    batch: int
    variant: str  # plain | fusion | dp4 | tp4 | pp4_1 | ...


def parse_tag(tag: str) -> Tag:
    """Parse ``tag`` (a label or graph file name without extension); ValueError names the problem."""
    m = _TAG.match(tag)
    if not m:
        raise UserError(f"name {tag!r} does not match {TAG_FORMAT}")
    mode = MODES.get(m["mode"])
    if mode is None:
        raise UserError(f"name {tag!r}: mode {m['mode']!r} is not one of {sorted(MODES)}")
    nums = {}
    for key in ("seq", "batch"):
        if not m[key].isdigit() or int(m[key]) <= 0:
            raise UserError(f"name {tag!r}: {key} {m[key]!r} is not a positive integer")
        nums[key] = int(m[key])
    raw = m["model"]
    return Tag(tag=tag, model_raw=raw, model=MODEL_ALIASES.get(raw, raw), mode=mode, seq_len=nums["seq"],
               batch=nums["batch"], variant=m["variant"] or "plain")
