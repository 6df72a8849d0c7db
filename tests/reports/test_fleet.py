"""Fleet totals: per workload the cheapest GPU meeting its target, sized for its demand, and per GPU type."""

import math

import pytest

from tilecast.reports.fleet import FleetError, fleet_by_gpu, fleet_plan, load_fleet


def _fleet(target_ms=1e9, tokens=100_000, model="gpt2_large", batch=8, dtype=None):
    return load_fleet({"name": "t", "workloads": [
        {"name": "serve", "model": model, "mode": "inference", "batch": batch, "seq_len": 512,
         "tokens_per_s": tokens, "latency_target_ms": target_ms, "dtype": dtype},
        {"name": "tune", "model": "bert_large", "mode": "training", "batch": 8, "seq_len": 512,
         "tokens_per_s": 5_000, "latency_target_ms": 1e9}]})


def test_plan_sizes_and_prices_each_workload(smoke_scores):
    plan = fleet_plan(smoke_scores, _fleet())
    assert plan["workload"].tolist() == ["serve", "tune", "total"] and plan["dtype"].tolist()[:2] == ["fp32", "fp32"]
    serve = plan.iloc[0]
    cells = smoke_scores.loc[(smoke_scores["model"] == "gpt2_large") & (smoke_scores["mode"] == "inference")
                             & (smoke_scores["batch"] == 8) & ~smoke_scores["fused"] & (smoke_scores["dtype"] == "fp32")
                             & smoke_scores["fits"].fillna(False).astype(bool)]
    gpus = (100_000 / cells["tokens_per_s"]).map(math.ceil)
    usd = gpus * cells["usd_per_gpu_hour"]
    best = cells.loc[usd.idxmin()]
    assert serve["gpu"] == best["gpu"] and serve["gpus_needed"] == gpus[usd.idxmin()]
    assert serve["usd_per_hour"] == pytest.approx(usd.min())
    assert serve["usd_per_month"] == pytest.approx(usd.min() * 730)
    assert plan.iloc[2]["usd_per_hour"] == pytest.approx(plan["usd_per_hour"].iloc[:2].sum())


def test_unreachable_targets_and_missing_workloads(smoke_scores):
    plan = fleet_plan(smoke_scores, _fleet(target_ms=1e-6))
    assert plan.iloc[0]["gpu"] == "no GPU fits and meets the target"
    plan = fleet_plan(smoke_scores, _fleet(model="gpt3_xl"))
    assert plan.iloc[0]["gpu"] == "not in this run's matrix"
    by_gpu = fleet_by_gpu(smoke_scores, _fleet(target_ms=1e-6))
    assert by_gpu["usd_per_month"].isna().all()  # no GPU serves the whole mix


def test_whole_mix_per_gpu(smoke_scores):
    by_gpu = fleet_by_gpu(smoke_scores, _fleet())
    complete = by_gpu.dropna(subset=["usd_per_month"])
    assert (complete["workloads_served"] == 2).all() and len(complete) >= 1
    assert complete["usd_per_month"].is_monotonic_increasing


def test_shipped_fleet_and_bad_configs(report_cfg):
    fleet = load_fleet(report_cfg["fleet"])
    assert len(fleet.workloads) >= 3 and {w.mode for w in fleet.workloads} == {"inference", "training"}
    with pytest.raises(FleetError, match=r"workloads\[0\].*tokens_per_s"):
        load_fleet({"workloads": [{"name": "x", "model": "gpt2_large", "mode": "inference", "batch": 1,
                                   "seq_len": 512, "tokens_per_s": 0, "latency_target_ms": 1}]})
    with pytest.raises(FleetError, match="missing field 'model'"):
        load_fleet({"workloads": [{"name": "x"}]})
    with pytest.raises(FleetError, match=r"workloads\[0\].*dtype.*'fp6'.*amp_bf16"):
        _fleet(dtype="fp6")


def test_a_workload_in_bf16_is_served_by_its_bf16_cells(smoke_scores):
    fp32, bf16 = fleet_plan(smoke_scores, _fleet()), fleet_plan(smoke_scores, _fleet(dtype="bf16"))
    assert bf16.iloc[0]["dtype"] == "bf16" and bf16.iloc[0]["e2e_ms"] < fp32.iloc[0]["e2e_ms"]
    assert bf16.iloc[0]["gpus_needed"] <= fp32.iloc[0]["gpus_needed"]
    cells = smoke_scores.loc[(smoke_scores["gpu"] == bf16.iloc[0]["gpu"]) & (smoke_scores["dtype"] == "bf16")
                             & (smoke_scores["model"] == "gpt2_large") & (smoke_scores["mode"] == "inference")]
    assert bf16.iloc[0]["e2e_ms"] == cells["e2e_ms"].min()
    assert fleet_plan(smoke_scores, _fleet(model="bert_large", dtype="bf16")).iloc[0]["gpu"] == \
        "not in this run's matrix"  # the smoke grid has bert_large in fp32 only
