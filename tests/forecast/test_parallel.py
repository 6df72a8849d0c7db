"""Data / tensor / pipeline parallel transforms (graph/parallel.py), any degree."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.graph import build_graph
from tilecast.graph.parallel import (
    Parallel,
    ParallelismError,
    build_parallel_graph,
    local_batch,
    parse_parallel,
)
from tilecast.specs import WorkloadError, get_model


def frame(model, batch, seq, mode, parallel=None, fused=False):
    return build_parallel_graph(model, batch, seq, mode, parallel, fused).to_frame()


@pytest.mark.parametrize("text, kind, degree, micro", [
    ("dp4", "dp", 4, 1), ("tp8", "tp", 8, 1), ("pp4", "pp", 4, 1), ("pp4_1", "pp", 4, 1), ("PP2_4", "pp", 2, 4),
    ("dp16", "dp", 16, 1)])
def test_parse(text, kind, degree, micro):
    p = parse_parallel(text)
    assert (p.kind, p.degree, p.microbatches) == (kind, degree, micro)
    assert parse_parallel(p.tag) == p


@pytest.mark.parametrize("empty", [None, "", "none", "plain"])
def test_parse_nothing(empty):
    assert parse_parallel(empty) is None


@pytest.mark.parametrize("bad", ["xp4", "dp", "dp4_2", "tp0", "4dp", "pp-2"])
def test_parse_rejects_and_names_value(bad):
    with pytest.raises(ParallelismError, match="parallel"):
        parse_parallel(bad)


def test_named_errors_for_workloads_that_cannot_split():
    with pytest.raises(ParallelismError, match="num_heads=20"):
        frame("gpt2_large", 4, 1024, "training", "tp3")
    with pytest.raises(ParallelismError, match="batch=4"):
        frame("gpt2_large", 4, 1024, "training", "dp3")
    with pytest.raises(ParallelismError, match="micro-batches"):
        frame("gpt2_large", 4, 1024, "training", "pp4_3")
    with pytest.raises(ParallelismError, match="layers"):
        frame("bert_large", 2, 512, "training", "pp32")
    assert issubclass(ParallelismError, WorkloadError)


def test_tensor_parallel_matches_the_megatron_split_of_the_reference_graph():
    """gpt2_large tp4 (graphs/gpt2_large-train-1024-4-tp4): the shapes the paper's trace shows."""
    f = frame("gpt2_large", 4, 1024, "training", "tp4")
    fw = f[(f.phase == "fw") & (f.section == "layer")]
    linears = {(r.m, r.n, r.k) for r in fw[fw.kind == "linear"].itertuples()}
    assert linears == {(4096, 1280, 960), (4096, 320, 1280), (4096, 1280, 1280)}
    assert set(fw[fw.kind == "bmm"].b) == {20}
    soft = fw[fw.op == "softmax"].iloc[0]
    assert (soft.b, soft.h) == (20480, 1024)
    assert set(fw[fw.op == "ln"].h) == {1280} and set(fw[fw.op == "ln"].b) == {4096}  # norms stay replicated
    head = f[(f.phase == "fw") & (f.section == "epilogue") & (f.kind == "linear")].iloc[0]
    assert head.k == 12565  # ceil(50257 / 4) vocab rows per rank
    ar = f[f.kind == "allreduce"]
    # Megatron: after attention and MLP in the forward, before them in the backward; vocab-parallel embedding
    assert ar[ar.phase == "fw"]["count"].sum() == 2 * 36 + 1
    assert ar[ar.phase == "bw"]["count"].sum() == 2 * 36 + 1
    assert set(ar.h) == {4 * 1024 * 1280}


def test_tensor_parallel_inference_has_forward_allreduces_only():
    f = frame("gpt2_large", 4, 1024, "inference", "tp4")
    assert set(f[f.kind == "allreduce"].phase) == {"fw"}


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from(["bert_large", "gpt3_xl", "opt_13"]))
def test_tensor_parallel_splits_layer_gemm_work_evenly(p, model):
    """Any degree: one rank's layer GEMM flops are 1/p of one GPU's (fw and bw), parameters too."""
    spec = get_model(model)
    if spec.num_heads % p or spec.intermediate_size % p:
        return
    one = frame(model, 2, 128, "training")
    rank = frame(model, 2, 128, "training", f"tp{p}")

    def layer(f, phase, kinds):
        sel = f[(f.phase == phase) & (f.section == "layer") & f.kind.isin(kinds)]
        return (sel["flops"] * sel["count"]).sum() if phase != "acc" else (sel.b * sel.h * sel["count"]).sum()

    for phase in ("fw", "bw"):
        assert layer(rank, phase, ["linear", "bmm"]) * p == pytest.approx(layer(one, phase, ["linear", "bmm"]))
    acc_one, acc_rank = layer(one, "acc", ["vec"]), layer(rank, "acc", ["vec"])
    assert acc_rank < acc_one or p == 1
    assert acc_rank * p >= acc_one  # norms and biases of row-parallel linears stay replicated


def test_data_parallel_reduces_every_gradient_once_on_the_local_batch():
    one = frame("gpt3_xl", 2, 256, "training")
    dp = frame("gpt3_xl", 8, 256, "training", "dp4")
    acc = one[one.phase == "acc"]
    ar = dp[dp.kind == "allreduce"]
    assert set(ar.phase) == {"bw"}
    assert (ar.h * ar["count"]).sum() == (acc.b * acc.h * acc["count"]).sum()
    compute = dp[dp.kind != "allreduce"].drop(columns="name").reset_index(drop=True)
    assert compute.equals(one.drop(columns="name").reset_index(drop=True))  # batch 8 / 4 GPUs = batch 2
    assert local_batch(8, Parallel("dp", 4)) == 2


def test_data_parallel_inference_needs_no_communication():
    f = frame("bert_large", 8, 512, "inference", "dp8")
    assert not f.kind.isin(["allreduce", "sendrecv"]).any()
    assert set(f[f.kind == "bmm"].b) <= {1 * 16}  # one sample per GPU, 16 heads


def test_pipeline_parallel_sends_one_micro_batch_per_boundary():
    f = frame("gpt3_xl", 4, 2048, "training", "pp4_4")
    sr = f[f.kind == "sendrecv"]
    assert sorted(sr.phase) == ["bw", "fw"]
    assert set(sr["count"]) == {3}
    assert set(sr.h) == {1 * 2048 * get_model("gpt3_xl").hidden_size}  # micro-batch of 1 sample x hidden
    one = build_graph("gpt3_xl", 1, 2048, "training").to_frame()
    assert len(f) == len(one) + 2


def test_parallel_meta_records_the_scheme():
    g = build_parallel_graph("gpt2_large", 4, 1024, "training", "pp4_1")
    assert (g.meta["parallel"], g.meta["degree"], g.meta["microbatches"], g.meta["batch"]) == ("pp4_1", 4, 1, 4)
    assert g.num_layers == 36
