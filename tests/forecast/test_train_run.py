"""Training runs at scale: step time, MFU, memory per GPU and fit, on the roofline (no registry)."""

from __future__ import annotations

import numpy as np
import pytest

from tilecast.data import load_llm_foundry
from tilecast.evaluation.training_runs import row_run
from tilecast.forecast.mfu import flops_per_token, hardware_flops_per_token, utilisation_pct
from tilecast.forecast.train_graph import lora_tape, micro_batch_graph
from tilecast.forecast.train_memory import fitting_change, rank_shape, train_memory
from tilecast.forecast.train_run import (
    FLASH_BACKWARD_FACTOR,
    NCCL_CHANNELS,
    assemble,
    attention_backward_ms,
    comm_model,
    forecast_train_run,
    micro_batch_frame,
    micro_batch_times,
    model_params,
    nccl_sm_share,
    price_ms,
)
from tilecast.graph.tape import Tape
from tilecast.specs import UnsupportedDtypeError, get_gpu
from tilecast.specs.train_run import LoraError, TrainRun

A100 = get_gpu("a100_sxm4_80gb")
H100 = get_gpu("h100_sxm_80gb")


def mpt(**kw) -> TrainRun:
    base = dict(model="mpt_1b", seq_len=1024, micro_batch=4, n_gpus=8, grad_accum=2, sharding="zero3")
    return TrainRun(**{**base, **kw})


def test_llm_foundry_mfu_and_hfu_reproduce_every_public_row():
    rows = load_llm_foundry()
    for _, r in rows.iterrows():
        run, _ = row_run(r)
        n = model_params(run)
        assert n == r["NumParams"]
        tps = r["Throughput (T/s)"] / r["# GPUs"]
        spec = run.model
        f = flops_per_token(n, spec.num_layers, spec.hidden_size, run.seq_len)
        hf = hardware_flops_per_token(n, spec.num_layers, spec.hidden_size, run.seq_len, run.activation_checkpointing)
        # the table rounds throughput (S/s and T/s to integers) and MFU to 0.01
        assert abs(utilisation_pct(tps, f, 312e12) - r["MFU"]) < 0.05 + 0.01 * r["MFU"] / tps * 100
        assert abs(utilisation_pct(tps, hf, 312e12) - r["HFU"]) < 0.07 + 0.01 * r["HFU"] / tps * 100
        assert -0.05 < tps * f / 1e12 - r["Model TFLOP"] < 1.0  # truncated to whole TFLOP/s


def test_every_public_run_fits_in_its_gpu():
    for _, r in load_llm_foundry().iterrows():
        run, gpu = row_run(r)
        mem = train_memory(run, get_gpu(gpu))
        assert mem.fits, (r["Model"], r["SeqLen (T)"], r["# GPUs"], mem.as_gib())


def test_forecast_parts_add_up_and_collectives_are_split_hidden_exposed():
    fc = forecast_train_run(mpt(), A100)
    p = fc.parts
    assert p.step_ms == pytest.approx(p.micro_batches_ms + p.optimizer_ms + p.clip_ms)
    assert p.micro_batches_ms >= p.compute_ms - 1e-6
    assert set(p.comm_total_ms) == {"all_gather", "reduce_scatter"}
    for kind, total in p.comm_total_ms.items():
        assert 0 <= p.comm_exposed_ms.get(kind, 0.0) <= total
    d = fc.to_dict(1e12)
    assert d["tokens_per_s_per_gpu"] * 8 == pytest.approx(d["tokens_per_s"])
    assert d["collectives_ms"]["all_gather"]["hidden"] + d["collectives_ms"]["all_gather"]["exposed"] == \
        pytest.approx(d["collectives_ms"]["all_gather"]["total"])
    assert d["days_to_train"] == pytest.approx(1e12 / d["tokens_per_s"] / 86400)
    assert 0 < fc.mfu_pct <= 100 and fc.hfu_pct == fc.mfu_pct  # no checkpointing: HFU = MFU


def test_checkpointing_trades_time_for_memory():
    plain, ckpt = (forecast_train_run(mpt(activation_checkpointing=c), A100) for c in ("none", "full"))
    assert ckpt.step_s > plain.step_s and ckpt.parts.recompute_ms > 0
    assert ckpt.memory.activations_bytes < plain.memory.activations_bytes / 3
    assert ckpt.hfu_pct == pytest.approx(plain.mfu_pct * (plain.step_s / ckpt.step_s) * 4 / 3, rel=1e-6)
    sel = forecast_train_run(mpt(model="mpt_125m", dtype="amp_bf16", activation_checkpointing="selective"), A100)
    assert sel.parts.recompute_ms > 0


def test_sharding_shrinks_state_memory_by_the_group():
    runs = {s: train_memory(mpt(sharding=s), A100) for s in ("none", "zero1", "zero2", "zero3")}
    assert runs["zero1"].optimizer_bytes == pytest.approx(runs["none"].optimizer_bytes / 8)
    assert runs["zero1"].grads_bytes == runs["none"].grads_bytes
    assert runs["zero2"].grads_bytes < runs["none"].grads_bytes / 4
    assert runs["zero3"].weights_bytes == pytest.approx(runs["none"].weights_bytes / 8)
    assert [runs[s].total_bytes for s in ("none", "zero1", "zero2", "zero3")] == sorted(
        [runs[s].total_bytes for s in ("none", "zero1", "zero2", "zero3")], reverse=True)


def test_optimizers_hold_their_state():
    adam, lion, sgd = (train_memory(mpt(optimizer=o, sharding="none"), A100) for o in ("adamw", "lion", "sgd"))
    assert lion.optimizer_bytes == sgd.optimizer_bytes < adam.optimizer_bytes
    assert (adam.optimizer_bytes - lion.optimizer_bytes) == pytest.approx(rank_shape(mpt()).params * 4)


def test_a_run_that_does_not_fit_says_so_with_the_change_that_fits():
    run = TrainRun("llama31_8b", 4096, 1, 8, global_batch=64, sharding="none")
    fc = forecast_train_run(run, H100)
    assert not fc.fits and fc.step_s > 0
    assert fc.advice.change == "sharding=zero3" and fc.advice.memory.fits
    assert "DOES NOT FIT" in fc.describe() and "fits with sharding=zero3" in fc.describe()
    big = fitting_change(TrainRun("llama31_70b", 4096, 1, 8, global_batch=64, sharding="none"), H100)
    assert big.run is not None and train_memory(big.run, H100).fits and " " in big.change  # several changes


def test_gpu_without_the_dtype_is_refused():
    with pytest.raises(UnsupportedDtypeError):
        forecast_train_run(mpt(dtype="fp8"), A100)


def test_more_nodes_cost_more_communication_at_the_same_per_gpu_batch():
    # replicated (DDP): the same work per GPU, a larger all-reduce group
    per_gpu = [forecast_train_run(mpt(n_gpus=n, grad_accum=1, sharding="none"), A100).tokens_per_s_per_gpu
               for n in (8, 64, 512)]
    assert per_gpu[0] >= per_gpu[1] >= per_gpu[2]
    # ZeRO-3: the collectives grow with the group (the optimizer's shard shrinks, so the step need not)
    parts = [forecast_train_run(mpt(n_gpus=n, grad_accum=1), A100).parts for n in (8, 64, 512)]
    totals = [sum(p.comm_total_ms.values()) for p in parts]
    assert totals[0] < totals[1] < totals[2] and parts[0].optimizer_ms > parts[2].optimizer_ms


def test_tensor_pipeline_and_context_parallel_layouts():
    base = forecast_train_run(TrainRun("llama31_8b", 4096, 1, 16, grad_accum=8, sharding="zero3",
                                       activation_checkpointing="full"), H100)
    tp = forecast_train_run(TrainRun("llama31_8b", 4096, 1, 16, grad_accum=8, tp=2, sharding="zero3",
                                     activation_checkpointing="full"), H100)
    assert "tp_all_reduce" in tp.parts.comm_exposed_ms and tp.memory.activations_bytes < base.memory.activations_bytes
    pp = forecast_train_run(TrainRun("llama31_8b", 4096, 1, 16, grad_accum=8, pp=2, sharding="zero1",
                                     activation_checkpointing="full"), H100)
    assert pp.parts.bubble_ms > 0 and pp.parts.comm_total_ms["pp_send_recv"] > 0
    cp = forecast_train_run(TrainRun("llama31_8b", 8192, 1, 16, grad_accum=8, cp=2, sharding="zero3",
                                     activation_checkpointing="full"), H100)
    assert cp.parts.comm_total_ms["cp_ring"] > 0
    one = micro_batch_graph(TrainRun("llama31_8b", 8192, 1, 8, grad_accum=1))
    two = micro_batch_graph(TrainRun("llama31_8b", 8192, 1, 16, grad_accum=1, cp=2))
    attn = lambda g: g.total_flops(kind="attn")  # noqa: E731
    assert attn(two) == pytest.approx(attn(one) / 2, rel=0.01)  # each rank: half the causal triangle


def test_lora_trains_adapters_only():
    full = TrainRun("llama31_8b", 2048, 1, 8, grad_accum=1, sharding="none")
    lora = TrainRun("llama31_8b", 2048, 1, 8, grad_accum=1, sharding="none", lora_rank=16)
    qlora = TrainRun("llama31_8b", 2048, 1, 8, grad_accum=1, sharding="none", lora_rank=16, lora_base_dtype="nf4")
    s_full, s_lora = rank_shape(full), rank_shape(lora)
    assert s_lora.layer_trainable < s_full.layer_trainable / 50 and s_lora.layer_params == s_full.layer_params
    m = {r.lora_base_dtype + str(r.lora_rank): train_memory(r, H100) for r in (full, lora, qlora)}
    assert m["bf1616"].optimizer_bytes < m["bf160"].optimizer_bytes / 50
    assert m["nf416"].weights_bytes < m["bf1616"].weights_bytes / 3
    f_full, f_lora = forecast_train_run(full, H100), forecast_train_run(lora, H100)
    assert f_lora.step_s < f_full.step_s  # no weight gradients of the frozen base
    with pytest.raises(LoraError, match="blocks have none"):
        lora_tape(Tape(), 8)


def test_step_time_is_finite_and_positive_for_a_grid_of_layouts():
    for sharding in ("none", "zero1", "zero2", "zero3", "hybrid"):
        for ckpt in ("none", "selective", "full"):
            fc = forecast_train_run(mpt(sharding=sharding, activation_checkpointing=ckpt, n_gpus=16, grad_accum=1),
                                    A100)
            assert np.isfinite(fc.step_s) and fc.step_s > 0 and fc.memory.total_bytes > 0


def test_nccl_holding_sms_slows_the_compute_it_hides_under():
    run = TrainRun("mpt_7b", 2048, 2, 64, grad_accum=1, sharding="zero3", network="roce:200")
    frame = micro_batch_frame(run)
    mb = micro_batch_times(frame, price_ms(frame, run, A100, None, comm_model(run)),
                           int(frame.attrs["num_layers"]))
    free = assemble(run, A100, mb, advise=False, nccl_channels=0).parts
    held = assemble(run, A100, mb, advise=False).parts
    assert NCCL_CHANNELS > 0 and nccl_sm_share(A100) == pytest.approx(NCCL_CHANNELS / 108)
    assert free.comm_contention_ms == {} and held.step_ms > free.step_ms
    assert set(held.comm_contention_ms) <= set(held.comm_total_ms)
    # one micro-batch per step on one stage: its wall time is compute + waits + contention
    assert held.micro_batches_ms == pytest.approx(held.compute_ms + sum(held.comm_exposed_ms.values())
                                                  + sum(held.comm_contention_ms.values()))


def test_flash_attention_backward_is_a_multiple_of_its_forward_kernel():
    run = TrainRun("mpt_125m", 2048, 2, 8, grad_accum=1, sharding="zero3")
    frame = micro_batch_frame(run)
    gemms = price_ms(frame, run, A100, None, comm_model(run), attention_backward="gemms")
    flash = price_ms(frame, run, A100, None, comm_model(run))
    names, count = frame["name"].to_numpy(dtype=object), frame["count"].to_numpy(dtype=float)
    fw = np.flatnonzero((frame["kind"] == "attn").to_numpy())
    assert len(fw) == 1
    grads = names == f"{names[fw[0]]}.grad"
    assert (flash[grads] * count[grads]).sum() == pytest.approx(FLASH_BACKWARD_FACTOR * flash[fw[0]] * count[fw[0]])
    assert np.array_equal(flash[~grads], gemms[~grads])
    np.testing.assert_allclose(attention_backward_ms(frame, gemms, "flash", 2.0)[grads] * count[grads] / 2.0,
                               flash[grads] * count[grads] / FLASH_BACKWARD_FACTOR)
    with pytest.raises(ValueError, match="attention_backward"):
        price_ms(frame, run, A100, None, comm_model(run), attention_backward="eager")
