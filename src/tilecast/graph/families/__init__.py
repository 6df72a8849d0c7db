"""Graph builders, one per model family: ``BUILDERS[family](ctx)`` records the forward kernels."""

from __future__ import annotations

from collections.abc import Callable

from tilecast.graph.blocks import Ctx
from tilecast.graph.families import bert, gpt2, llama, moe_decoder, mpt, opt, switch

#: ModelSpec.family -> builder recording the model's forward pass on ``ctx.tape``
BUILDERS: dict[str, Callable[[Ctx], None]] = {
    "gpt2": gpt2.build,
    "opt": opt.build,
    "bert": bert.build,
    "switch": switch.build,
    "llama": llama.build,
    "mpt": mpt.build,
    "moe": moe_decoder.build,
}

__all__ = ["BUILDERS"]
