"""Pieces shared by the family builders: dropout, activations, norms, the softmax-attention core.

Each helper records the kernels the Hugging Face module runs in fp32 eager mode, in the op
vocabulary of the reference graphs (docs/method.md §2). Views, reshapes, scalar maths and dropout at
inference record nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilecast.errors import UserError
from tilecast.graph.tape import Tape, Tensor
from tilecast.specs import ModelSpec
from tilecast.specs.layout import Layout


@dataclass(frozen=True)
class Ctx:
    """What every builder needs: the tape, the model, the workload's shape and mode, and whether
    attention runs fused (FlashAttention, as half-precision frameworks run it) or as the eager
    bmm-softmax-bmm chain (fp32, as the NeuSight labels were measured)."""

    tape: Tape
    spec: ModelSpec
    batch: int
    seq: int
    training: bool
    fused_attention: bool = False
    cached: int = 0  # tokens per sequence already in the KV cache (decode: attention reads cached + seq)
    engine: bool = False  # record a serving engine's kernels (vLLM / TRT-LLM), where the family has them
    layout: Layout | None = None  # how the model is spread over GPUs (family moe records one GPU's share)

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


def dropout(c: Ctx, name: str, x: Tensor) -> Tensor:
    """Dropout: a MEM copy in training (its mask is kept for backward), nothing at inference."""
    return c.tape.mem(name, [x], x.numel, saved=True) if c.training else x


def activation(c: Ctx, name: str, x: Tensor, rows: int, h: int, kind: str) -> Tensor:
    """The activation ``kind`` over ``rows x h``; ``gelu_new`` is HF's tanh formula, op by op."""
    t = c.tape
    if kind in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        half = t.vec(f"{name}.mul", "mulu", [x], rows, h)
        cube = t.vec(f"{name}.pow", "powu", [x], rows, h)
        scaled = t.vec(f"{name}.mul_1", "mulu", [cube], rows, h)
        inner = t.vec(f"{name}.add", "add", [x, scaled], rows, h)
        inner = t.vec(f"{name}.mul_2", "mulu", [inner], rows, h)
        th = t.vec(f"{name}.tanh", "tanh", [inner], rows, h)
        one = t.vec(f"{name}.add_1", "addu", [th], rows, h)
        return t.vec(f"{name}.mul_3", "mul", [half, one], rows, h)
    if kind in ("gelu", "relu", "silu", "tanh", "sigmoid"):
        return t.vec(name, kind, [x], rows, h)
    raise UserError(f"activation {kind!r} is not modelled; known: gelu_new, gelu, relu, silu, tanh, sigmoid")


def rms_norm(c: Ctx, name: str, x: Tensor, rows: int, h: int) -> Tensor:
    """T5 / Llama RMSNorm, decomposed as HF runs it: pow, mean, +eps, rsqrt, x * r, weight * x."""
    t = c.tape
    sq = t.vec(f"{name}.pow", "powu", [x], rows, h)
    var = t.mem(f"{name}.mean", [sq], rows)
    var = t.vec(f"{name}.add", "addu", [var], rows, 1)
    r = t.mem(f"{name}.rsqrt", [var], rows, grad="rsqrt")
    y = t.vec(f"{name}.mul", "mul", [x, r], rows, h)
    return t.vec(f"{name}.mul_1", "mul", [t.ext(h), y], rows, h, params=(h,))


def softmax_attention(c: Ctx, name: str, scores: Tensor, v: Tensor, heads: int, q_len: int, k_len: int,
                      head_dim: int) -> Tensor:
    """softmax over key positions, attention dropout (training), then ``probs @ v``."""
    t = c.tape
    rows = c.batch * heads
    probs = t.vec(f"{name}.softmax", "softmax", [scores], rows * q_len, k_len)
    probs = dropout(c, f"{name}.attn_dropout", probs)
    return t.matmul(f"{name}.context", probs, v, rows, q_len, k_len, head_dim)
