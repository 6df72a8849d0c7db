"""Memory one GPU of a cell needs: the graph's memory model, split per GPU for parallel layouts.

``tilecast.graph.memory_footprint`` gives a single GPU's weights, gradients, optimizer state,
activations and transient buffers for a workload at its dtype (training holds ``optimizer`` state:
AdamW by default, None for forward + backward only). Per parallel kind (a registry):

- dp: a full replica running ``batch / p`` samples;
- tp: weights, gradients, optimizer state and activations split ``p`` ways (Megatron shards the
  layers' matrices and the heads; replicated norms and residuals are small), transients too;
- pp: weights, gradients and optimizer state of ``1/p`` of the layers; GPipe keeps the activations
  of every micro-batch of its layers, i.e. ``1/p`` of the full batch's; transients of one micro-batch.

A mixture-of-experts model is recorded as one GPU of its layout (:mod:`tilecast.graph.layout_graph`): its
footprint is that GPU's own (its experts, its share of attention, its sequences), not a split of a whole.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from tilecast.graph.layout_graph import LAYOUT_FAMILIES
from tilecast.graph.parallel import Parallel, as_layout, local_batch, parse_parallel
from tilecast.specs import ModelSpec, Workload, get_model
from tilecast.specs.layout import Layout


@functools.lru_cache(maxsize=4096)
def _footprint(model: str, batch: int, seq_len: int, mode: str, optimizer: str | None, dtype: str):
    """The graph's memory model, once per process for each workload and dtype (fused and parallel variants
    share it)."""
    from tilecast.graph import memory_footprint

    return memory_footprint(model, batch, seq_len, mode, dtype=dtype, optimizer=optimizer)


def _single(model: str, batch: int, seq_len: int, mode: str, par: Parallel | None, opt: str | None,
            dtype: str) -> float:
    return float(_footprint(model, batch, seq_len, mode, opt, dtype).total_bytes)


def _dp(model: str, batch: int, seq_len: int, mode: str, par: Parallel, opt: str | None, dtype: str) -> float:
    return float(_footprint(model, local_batch(batch, par), seq_len, mode, opt, dtype).total_bytes)


def _tp(model: str, batch: int, seq_len: int, mode: str, par: Parallel, opt: str | None, dtype: str) -> float:
    return float(_footprint(model, batch, seq_len, mode, opt, dtype).total_bytes) / par.degree


def _pp(model: str, batch: int, seq_len: int, mode: str, par: Parallel, opt: str | None, dtype: str) -> float:
    full = _footprint(model, batch, seq_len, mode, opt, dtype)
    micro = _footprint(model, local_batch(batch, par), seq_len, mode, opt, dtype)
    state = full.params_bytes + full.grads_bytes + full.optimizer_bytes
    return float((state + full.activations_bytes) / par.degree + micro.transient_bytes)


#: parallel kind -> bytes one GPU needs (model, batch, seq_len, mode, parallel, optimizer, dtype)
PER_GPU: dict[str | None, Callable[[str, int, int, str, Parallel | None, str | None, str], float]] = {
    None: _single,
    "dp": _dp,
    "tp": _tp,
    "pp": _pp,
}


def memory_required_bytes(model: str | ModelSpec, batch: int, seq_len: int, mode: str, parallel: str | None = None,
                          optimizer: str | None = "adamw", dtype: str = "fp32") -> float:
    """Bytes one GPU of the cell needs at workload ``dtype`` (fp32 by default, as the data were measured).
    ``model``: a catalog key or a spec (a what-if model, ``<key>+<field>=<value>``, is only a spec).
    ``optimizer``: the optimizer state a training run holds (``adamw``), or None (forward + backward only,
    as the labels were measured)."""
    spec = model if isinstance(model, ModelSpec) else get_model(model)
    if spec.family in LAYOUT_FAMILIES:
        return float(_layout_footprint(spec, batch, seq_len, mode, as_layout(parallel), optimizer, dtype))
    par = parse_parallel(parallel)
    return PER_GPU[par.kind if par else None](model, batch, seq_len, mode, par, optimizer, dtype)


@functools.lru_cache(maxsize=4096)
def _layout_footprint(spec: ModelSpec, batch: int, seq_len: int, mode: str, layout: Layout, optimizer: str | None,
                      dtype: str) -> int:
    """Bytes one GPU of a mixture-of-experts model's layout needs (its own tape's footprint)."""
    from tilecast.graph import memory_footprint

    wl = Workload(spec, batch, seq_len, mode, dtype=dtype, parallel=layout)
    return memory_footprint(wl, dtype=dtype, optimizer=optimizer).total_bytes
