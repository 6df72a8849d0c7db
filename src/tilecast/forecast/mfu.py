"""Model and hardware FLOPs utilisation as MosaicML's llm-foundry computes them (its benchmarking tables).

llm-foundry counts, per token, ``2 N`` FLOPs of the parameters (a multiply-add per parameter) plus
``2 x 2 x n_layers x d_model x seq_len`` of attention (``Q K^T`` and ``A V`` over the whole, unmasked,
sequence), three times for forward + backward; activation checkpointing recomputes the forward once more,
four times (HFU). ``N`` is every parameter of the model as trained (embeddings included, the learned
position table as long as the run's sequences, a tied head once). MFU is those FLOPs at the measured
tokens per second per GPU over the GPU's dense bf16 peak (fp8 runs too; :func:`tilecast.forecast.train_run.
mfu_peak_flops`). The formula is checked on every
row of ``data/llm_foundry/mpt_training.csv`` against its own ``NumParams``, ``Throughput (T/s/GPU)``,
``Model TFLOP``, ``MFU`` and ``HFU`` columns (``tests/forecast/test_mfu.py``).
"""

from __future__ import annotations

#: forward + backward passes counted by MFU, and by HFU with full checkpointing (the forward again)
MFU_PASSES, HFU_CHECKPOINTED_PASSES = 3, 4


def flops_per_token(n_params: float, n_layers: int, d_model: int, seq_len: int) -> float:
    """Model FLOPs per trained token: ``3 x (2 N + 4 n_layers d_model seq_len)``."""
    return MFU_PASSES * (2.0 * n_params + 4.0 * n_layers * d_model * seq_len)


def hardware_flops_per_token(n_params: float, n_layers: int, d_model: int, seq_len: int,
                             checkpointing: str = "none") -> float:
    """FLOPs the hardware runs per token: MFU's, plus the recomputed forward (``full``: llm-foundry's factor
    4 / 3) or the recomputed attention (``selective``: its ``4 n_layers d_model seq_len`` once more)."""
    base = flops_per_token(n_params, n_layers, d_model, seq_len)
    if checkpointing == "full":
        return base * HFU_CHECKPOINTED_PASSES / MFU_PASSES
    if checkpointing == "selective":
        return base + 4.0 * n_layers * d_model * seq_len
    return base


def utilisation_pct(tokens_per_s_per_gpu: float, flops_per_tok: float, peak_flops: float) -> float:
    """Percent of ``peak_flops`` (FLOP/s per GPU) the tokens per second per GPU amount to."""
    return 100.0 * tokens_per_s_per_gpu * flops_per_tok / peak_flops


__all__ = ["HFU_CHECKPOINTED_PASSES", "MFU_PASSES", "flops_per_token", "hardware_flops_per_token",
           "utilisation_pct"]
