"""The time of one serving-engine step: ``d`` decode tokens over KV caches of mean length ``L`` and ``p`` prefill
tokens, from the project's kernel forecasts on a small grid, interpolated so it vectorises.

A step of a dense decoder runs the linears (and norms, activations, the tensor-parallel all-reduces) over all its
``M = d + p`` tokens, decode attention for the ``d`` running requests and causal prefill attention for each prefill
chunk. The grid (:func:`grid_keys`) holds, for one (model, dtype, parallel split):

- **token graphs**: one request of ``M`` tokens (:data:`TOKEN_GRID`): the step's non-attention time ``lin(M)`` and
  the prefill attention ``A_p(s)`` of a fresh sequence of ``s`` tokens; a chunk of ``p`` tokens after ``o`` already
  cached costs ``A_p(o + p) - A_p(o)`` (causal attention is quadratic in the position);
- **decode graphs**: ``d`` requests (:data:`DECODE_BATCH_GRID`) decoding one token over ``L`` cached tokens
  (:data:`DECODE_LEN_GRID`): the decode attention ``A_d(d, L)`` and a pure decode step's non-attention time
  ``lin_d(d)`` (its LM head runs for all ``d`` tokens).

Every quantity is interpolated linearly in log-log space between grid points (extrapolated linearly in the last
interval). Token graphs are costed with the engine's eager all-reduce (steps that carry a prefill), decode graphs
with its CUDA-graph one (:mod:`tilecast.serving.engine_allreduce`); under SGLang and TRT-LLM the kernels carry the
engine's kernel factors (:func:`tilecast.serving.engine_kernels.engine_family_predictor`).
The kernel tables time an fp8 GEMM with the dynamic quantisation of its activation (a kernel of its own,
:data:`FUSED_QUANT_MS`: the median over the measured GPUs of the fp8 - bf16 difference of the smallest GEMMs, whose
GEMM itself runs at the launch floor in both dtypes); serving engines fuse that quantisation into the preceding
norm or activation, so a step's fp8 GEMMs each give it back (under the learned predictors, which learn the tables;
the roofline never timed it).
The host's share of a step (:class:`~tilecast.serving.policy.EnginePolicy`) is added by :meth:`StepCost.step_ms`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tilecast.forecast.kernels import FamilyPredictor
from tilecast.forecast.ops import op_family, op_latency_matrix
from tilecast.forecast.summary import summarise_many
from tilecast.forecast.workload import graph_frame
from tilecast.graph.parallel import build_parallel_graph
from tilecast.serving.engine_allreduce import engine_comm
from tilecast.serving.engine_kernels import engine_family_predictor
from tilecast.serving.policy import EnginePolicy
from tilecast.specs import GpuSpec, ModelSpec

#: tokens of the token graphs (one request, no cache)
TOKEN_GRID: tuple[int, ...] = tuple(2 ** k for k in range(0, 16))
#: running requests and KV lengths of the decode graphs
DECODE_BATCH_GRID: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)
DECODE_LEN_GRID: tuple[int, ...] = (256, 2048, 16384)
#: the activation-quantisation kernel the kernel tables time inside each fp8 GEMM (ms), which engines fuse away:
#: the median over the public GPUs of (fp8 - bf16) of GEMMs with m <= 16 and n k <= 4M (b200 3.45 us, b300 3.38,
#: gb200 3.46, l40s 2.08, rtx pro 6000 2.34; tests refit it from data/aiconfigurator)
FUSED_QUANT_MS = 0.00338
#: the breakdown groups that are attention (prefill, decode); the rest of a step is ``lin``
PREFILL_ATTN = ("ms_attn_prefill", "ms_mla_prefill")
DECODE_ATTN = ("ms_attn_decode", "ms_mla_decode")


def grid_keys(max_positions: int | None = None, dp: int = 1) -> pd.DataFrame:
    """The grid's graphs: ``role`` (``token`` | ``decode``), ``batch``, ``seq_len``, ``kv_len``, per attention rank:
    under attention data parallelism (``dp`` ranks stepping together, the experts seeing every rank's tokens) each
    graph holds ``dp`` times the batch, one share per rank, so the grid's ``M`` and ``d`` are one rank's. A token
    graph of more tokens than the model's ``max_positions`` runs them as several requests of the largest power of two
    that fits
    (its ``lin`` is the same; its prefill attention is never asked for: no prompt is that long); a decode graph over
    a longer cache runs ``k`` times the requests over ``1 / k`` of it (the same KV bytes read: decode attention is
    memory-bound; its ``lin`` is read from the shortest-cache graphs only)."""
    top = 2 ** int(np.log2(max_positions)) if max_positions else TOKEN_GRID[-1]
    tok = [("token", dp * max(1, m // top), min(m, top), 0) for m in TOKEN_GRID]
    top_kv = 2 ** int(np.log2(max_positions - 1)) if max_positions else DECODE_LEN_GRID[-1]
    dec = [("decode", dp * d * max(1, n // top_kv), 1, min(n, top_kv))
           for d in DECODE_BATCH_GRID for n in DECODE_LEN_GRID]
    return pd.DataFrame(tok + dec, columns=["role", "batch", "seq_len", "kv_len"])


def _loglog(x: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """``ys(x)`` linear in log-log between the points ``(xs, ys)``, extrapolated along the end intervals; 0 at
    ``x <= 0``."""
    x = np.asarray(x, dtype=float)
    lx, lxs = np.log(np.maximum(x, 1e-9)), np.log(xs)
    ly = np.log(np.maximum(ys, 1e-12))
    i = np.clip(np.searchsorted(lxs, lx) - 1, 0, len(xs) - 2)
    w = (lx - lxs[i]) / (lxs[i + 1] - lxs[i])
    return np.where(x > 0, np.exp(ly[i] + w * (ly[i + 1] - ly[i])), 0.0)


@dataclass(frozen=True)
class StepCost:
    """One (model, dtype, split, GPU, engine)'s step-cost grid (ms), with the engine's policy."""

    lin_tokens: np.ndarray  # lin(M) at TOKEN_GRID, eager all-reduce
    attn_prefill: np.ndarray  # A_p(s) at TOKEN_GRID
    lin_decode: np.ndarray  # lin_d(d) at DECODE_BATCH_GRID, graph all-reduce
    attn_decode: np.ndarray  # A_d(d, L), shape (DECODE_BATCH_GRID, DECODE_LEN_GRID)
    num_layers: int
    policy: EnginePolicy
    groups: dict[str, np.ndarray] | None = None  # ms per breakdown group of each token graph (step_costs)
    dp: int = 1  # attention data-parallel ranks stepping together; the grid's tokens and requests are one rank's

    def breakdown_ms(self, tokens: int) -> dict[str, float]:
        """Kernel ms per op group of the token graph nearest ``tokens`` (a prefill's makeup), where known."""
        if not self.groups:
            return {}
        i = int(np.argmin(np.abs(np.log(np.asarray(TOKEN_GRID, float)) - np.log(max(tokens, 1)))))
        return {g: float(v[i]) for g, v in self.groups.items() if v[i]}

    def prefill_attn_ms(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        """Prefill attention of positions ``start..stop`` of one request (the chunk after ``start`` cached)."""
        xs = np.asarray(TOKEN_GRID, dtype=float)
        return np.maximum(_loglog(stop, xs, self.attn_prefill) - _loglog(start, xs, self.attn_prefill), 0.0)

    def decode_attn_ms(self, d: np.ndarray, kv_len: np.ndarray) -> np.ndarray:
        """Decode attention of ``d`` requests over caches of mean length ``kv_len`` (bilinear in log-log)."""
        d, kv_len = np.broadcast_arrays(np.asarray(d, dtype=float), np.asarray(kv_len, dtype=float))
        ls = np.asarray(DECODE_LEN_GRID, dtype=float)
        per_len = np.stack([_loglog(d, np.asarray(DECODE_BATCH_GRID, float), self.attn_decode[:, j])
                            for j in range(len(ls))], axis=-1)
        lx, lls = np.log(np.maximum(kv_len, 1.0)), np.log(ls)
        i = np.clip(np.searchsorted(lls, lx) - 1, 0, len(ls) - 2)
        w = (lx - lls[i]) / (lls[i + 1] - lls[i])
        lo = np.take_along_axis(per_len, i[..., None], -1)[..., 0]
        hi = np.take_along_axis(per_len, (i + 1)[..., None], -1)[..., 0]
        llo, lhi = np.log(np.maximum(lo, 1e-12)), np.log(np.maximum(hi, 1e-12))
        out = np.exp(llo + w * (lhi - llo))
        return np.where(d > 0, out, 0.0)

    def gpu_ms(self, d: np.ndarray, kv_len: np.ndarray, prefill_tokens: np.ndarray,
               prefill_attn_ms: np.ndarray) -> np.ndarray:
        """GPU time of a step of ``d`` decodes and ``prefill_tokens`` prefill tokens whose attention is
        ``prefill_attn_ms`` (:meth:`prefill_attn_ms`, summed over the step's chunks)."""
        d, p = np.asarray(d, dtype=float), np.asarray(prefill_tokens, dtype=float)
        lin = np.where(p > 0, _loglog(d + p, np.asarray(TOKEN_GRID, float), self.lin_tokens),
                       _loglog(d, np.asarray(DECODE_BATCH_GRID, float), self.lin_decode))
        return lin + self.decode_attn_ms(d, kv_len) + np.asarray(prefill_attn_ms, dtype=float)

    def host_ms(self, d: np.ndarray, prefill_tokens: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """The host's time of a step: scheduling and sampling, per running request, and the kernel launches of an
        eager step (one not replayed from a CUDA graph under the policy)."""
        pol = self.policy
        d, p = np.asarray(d, dtype=float), np.asarray(prefill_tokens, dtype=float)
        graphed = (d + p <= pol.cuda_graph_max_tokens) & ((p == 0) | (not pol.cuda_graph_decode_only))
        return (pol.host_step_ms + pol.host_per_seq_ms * np.asarray(seqs, dtype=float)
                + np.where(graphed, 0.0, pol.eager_per_layer_ms * self.num_layers))

    def step_ms(self, d: np.ndarray, kv_len: np.ndarray, prefill_tokens: np.ndarray, prefill_attn_ms: np.ndarray,
                seqs: np.ndarray) -> np.ndarray:
        """Wall time of a step: GPU plus host time, or the longer of the two when the engine overlaps them."""
        gpu = self.gpu_ms(d, kv_len, prefill_tokens, prefill_attn_ms)
        host = self.host_ms(d, prefill_tokens, seqs)
        return np.maximum(gpu, host) if self.policy.overlap_scheduling else gpu + host


@functools.lru_cache(maxsize=1024)
def config_fp8_gemms(spec: ModelSpec, dtype: str, parallel: object) -> float:
    """fp8 GEMMs a step of (``spec``, ``dtype``, ``parallel``) runs (from its one-token graph)."""
    return fp8_gemms(graph_frame(build_parallel_graph(spec, 1, 1, "inference", parallel, dtype=dtype, kv_len=0,
                                                      serving=True)))


def attention_dp(parallel: object) -> int:
    """Attention data-parallel ranks of a split (a :class:`~tilecast.specs.layout.Layout`'s ``dp``; 1 otherwise)."""
    return int(getattr(parallel, "dp", 1) or 1)


@functools.lru_cache(maxsize=256)
def grid_frame(spec: ModelSpec, dtype: str, parallel: object) -> pd.DataFrame:
    """The grid's graphs of (``spec``, ``dtype``, ``parallel``) stacked in one op frame (a ``cell`` column: the
    row of :func:`grid_keys`)."""
    parts = []
    for i, row in grid_keys(spec.max_positions, attention_dp(parallel)).iterrows():
        frame = graph_frame(build_parallel_graph(spec, int(row.batch), int(row.seq_len), "inference", parallel,
                                                 dtype=dtype, kv_len=int(row.kv_len), serving=True))
        parts.append(frame.assign(cell=i, parallel=frame.attrs.get("parallel"),
                                  num_layers=frame.attrs.get("num_layers", 1), degree=frame.attrs.get("degree", 1)))
    return pd.concat(parts, ignore_index=True)


def fp8_gemms(frame: pd.DataFrame) -> float:
    """fp8 GEMMs one forward runs (instances), from a graph's op frame."""
    fp8 = (op_family(frame) == "tc_gemm") & (frame["dtype"].astype(str) == "fp8").to_numpy()
    return float(frame["count"].to_numpy(float)[fp8].sum())


def costs_from_summaries(token: pd.DataFrame, decode: pd.DataFrame, num_layers: int, policy: EnginePolicy,
                         n_fp8_gemms: float = 0.0) -> StepCost:
    """A :class:`StepCost` from the grid graphs' summaries (``e2e_ms`` and ``ms_<group>`` columns): ``token`` one
    row per :data:`TOKEN_GRID` point, ``decode`` one per (:data:`DECODE_BATCH_GRID`, :data:`DECODE_LEN_GRID`) in
    :func:`grid_keys` order; ``n_fp8_gemms`` fp8 GEMMs a step runs (each gives back :data:`FUSED_QUANT_MS`)."""
    def attn(frame: pd.DataFrame, cols: tuple[str, ...]) -> np.ndarray:
        return sum((frame[c].fillna(0.0).to_numpy(float) for c in cols if c in frame), np.zeros(len(frame)))

    return costs_from_arrays(token["e2e_ms"].to_numpy(float), attn(token, PREFILL_ATTN),
                             decode["e2e_ms"].to_numpy(float), attn(decode, DECODE_ATTN), num_layers, policy,
                             n_fp8_gemms)


def costs_from_arrays(token_ms: np.ndarray, token_attn_ms: np.ndarray, decode_ms: np.ndarray,
                      decode_attn_ms: np.ndarray, num_layers: int, policy: EnginePolicy, n_fp8_gemms: float = 0.0
                      ) -> StepCost:
    """:func:`costs_from_summaries` from arrays: the token graphs' step and prefill-attention ms, the decode graphs'
    step and decode-attention ms (:func:`grid_keys` order)."""
    fused = FUSED_QUANT_MS * n_fp8_gemms
    a_d = np.asarray(decode_attn_ms, float).reshape(len(DECODE_BATCH_GRID), len(DECODE_LEN_GRID))
    lin_d = (np.asarray(decode_ms, float).reshape(a_d.shape) - a_d)[:, 0] - fused
    return StepCost(np.asarray(token_ms, float) - token_attn_ms - fused, np.asarray(token_attn_ms, float), lin_d, a_d,
                    int(num_layers), policy)


def step_costs(spec: ModelSpec, dtype: str, parallel: object, gpus: list[GpuSpec], predict: FamilyPredictor | None,
               policy: EnginePolicy, version: str | None = None) -> dict[str, StepCost]:
    """Per GPU (key), the step cost of (``spec``, ``dtype``, ``parallel``) under ``policy``'s engine: the grid
    forecast in one pass over every GPU, token graphs with the engine's eager all-reduce, decode graphs with its
    CUDA-graph one."""
    frame = grid_frame(spec, dtype, parallel)
    keys = grid_keys(spec.max_positions, attention_dp(parallel))
    engine = policy.engine
    wrapped = predict
    if predict is not None and policy.kernel_factors:
        wrapped = engine_family_predictor(predict, engine, version)
    is_token = (keys["role"] == "token").to_numpy()[frame["cell"].to_numpy()]
    ms = np.empty((len(frame), len(gpus)))
    for mode, rows in (("eager", is_token), ("graph", ~is_token)):
        sub = frame.loc[rows]
        ms[rows] = op_latency_matrix(sub, gpus, wrapped, comm=engine_comm(engine, version, mode), strict=True)[0]
    layers = int(frame["num_layers"].iloc[0] or 1)
    n_fp8 = config_fp8_gemms(spec, dtype, parallel) if predict is not None else 0.0  # the roofline times no quant
    out = {}
    for j, gpu in enumerate(gpus):
        summ = summarise_many(frame, ms[:, j]).sort_index()
        token = summ.loc[keys.index[keys["role"] == "token"]]
        cost = costs_from_summaries(token, summ.loc[keys.index[keys["role"] == "decode"]], layers, policy, n_fp8)
        out[gpu.key] = replace(cost, groups={c[3:]: token[c].to_numpy(float) for c in token if c.startswith("ms_")},
                               dp=attention_dp(parallel))
    return out


__all__ = ["DECODE_BATCH_GRID", "DECODE_LEN_GRID", "FUSED_QUANT_MS", "attention_dp", "TOKEN_GRID", "StepCost",
           "config_fp8_gemms", "costs_from_arrays", "costs_from_summaries",
           "fp8_gemms", "grid_frame",
           "grid_keys", "step_costs"]
