"""Prediction intervals (issue 14 item 2, rebuilt by issue 26 item 1): leave-one-GPU-out residuals conditioned on the
forecast's cell and the GPU's spec distance, level maps measured leave one GPU out, end-to-end intervals from the
op mix with correlated family biases; the committed table and the columns / fields the jobs write."""

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecast.data import data_hash
from tilecast.evaluation import interval_fit as fit
from tilecast.evaluation.labels import shipped_labels
from tilecast.evaluation.suite import INTERVAL_COLUMNS, forecast_labels
from tilecast.forecast import interval_model as im
from tilecast.forecast import intervals as iv
from tilecast.forecast import roofline_predictor
from tilecast.paths import AICONFIGURATOR_DIR, NEUSIGHT_AMD_DIR, NEUSIGHT_DIR, ROOT, VIDUR_DIR
from tilecast.predictors.rows import FP32_TRAINING_GPUS
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FP32_FAMILIES

POOL = ("tesla_p4", "tesla_p100_pcie_16gb", "tesla_t4", "tesla_v100_pcie_32gb", "a100_pcie_40gb", "l4",
        "a100_pcie_80gb")


def _frame(seed: int = 0, spread: float = 0.3, noise: float = 0.1) -> pd.DataFrame:
    """Exchangeable units: per GPU a random shift plus noise, very different row counts, two latency cells."""
    rng = np.random.default_rng(seed)
    parts = []
    for i, gpu in enumerate(POOL):
        n = 60 + 300 * i
        pred = rng.choice([0.01, 1.0], n)
        parts.append(pd.DataFrame({"unit": gpu, "r": rng.normal(rng.normal(0, spread), noise, n), "pred_ms": pred,
                                   "regime": rng.normal(0, 2, n)}))
    return fit.with_cells(pd.concat(parts, ignore_index=True))


def _distances() -> dict[str, float]:
    return {g: im.spec_distance(g, POOL) for g in POOL}


def _table() -> iv.IntervalTable:
    frame, dist = _frame(), _distances()
    record = fit.fit_family(frame, dist)
    trained = {"vendors": ["nvidia"], "architectures": sorted({get_gpu(x).architecture for x in POOL}),
               "gpus": sorted(POOL)}
    e2e = {"correlation": {"fp32": {"pairs": {}, "mean": 0.5}, "half": {"pairs": {}, "mean": 0.5}}, "s0": 0.1,
           "k": {str(lv): float(np.interp(lv, (0.5, 0.8, 0.95, 0.99), (0.67, 1.28, 1.96, 2.58)))
                 for lv in iv.LEVEL_GRID}}
    return iv.IntervalTable({f: {"fp32": record} for f in FP32_FAMILIES}, e2e, {f: trained for f in FP32_FAMILIES})


def test_cells_split_regime_and_latency_and_fall_back_to_coarser_ones() -> None:
    cells = im.cell_keys([-3.0, 0.0, 3.0, np.nan], [0.01, 0.1, 1.0, 10.0])
    assert list(cells) == ["mem|lt0.03", "bal|lt0.3", "comp|lt3", "any|ge3"]
    assert list(im.cell_keys(None, [0.01])) == ["any|lt0.03"]
    assert im.coarser("mem|lt3") == ["mem|lt3", "any|lt3", "any|any"]


def test_spec_distance_sees_twins_architectures_and_vendors() -> None:
    blackwell = ["b200", "b300", "gb200"]
    assert im.spec_distance("b200", blackwell, "bf16") < 0.15  # a twin in the pool
    assert im.spec_distance("b200", ["b200"], "bf16") == math.inf  # itself is never its own neighbour
    assert im.spec_distance("h100_sxm_80gb", blackwell, "bf16") > 0.5  # another architecture, other specs
    assert im.spec_distance("mi210", POOL) > im.spec_distance("a100_pcie_80gb", POOL)


def test_units_at_a_like_distance_weigh_most_and_every_unit_counts() -> None:
    record = {"gpus": {"twin": {"distance": 0.05}, "far": {"distance": 0.9}, "farther": {"distance": 1.0}}}
    near, far = im.weights(record, 0.05), im.weights(record, 0.95)
    assert near["twin"] > 0.8 and far["twin"] < 0.05 and min(near.values()) > 0
    assert sum(near.values()) == pytest.approx(1.0)
    assert list(im.weights(record, 0.5, math.inf).values()) == pytest.approx([1 / 3] * 3)


def _unit(q) -> dict:
    return {"distance": 0.0, "cells": {"any|any": {"n": 100, "q": list(q)}}}


def test_mixture_of_one_unit_is_its_own_quantiles_and_two_units_vote_alike() -> None:
    a = np.quantile(np.random.default_rng(0).normal(0, 1, 5000), im.CELL_PROBS)
    one = {"gpus": {"a": _unit(a)}}
    got = im.mixture_quantiles(one, "any|any", {"a": 1.0}, [0.1, 0.5, 0.9])
    assert got == pytest.approx(np.interp([0.1, 0.5, 0.9], im.CELL_PROBS, a), abs=1e-6)
    two = {"gpus": {"a": _unit(a - 5), "b": _unit(a + 5)}}
    med = im.mixture_quantiles(two, "any|any", {"a": 0.5, "b": 0.5}, [0.25, 0.5, 0.75])
    assert med[0] == pytest.approx(-5, abs=0.1) and med[2] == pytest.approx(5, abs=0.1) and -5 < med[1] < 5


@settings(max_examples=25)
@given(st.lists(st.floats(-2, 2), min_size=2, max_size=5), st.floats(0.5, 0.95), st.floats(0.01, 0.04))
def test_bounds_contain_the_median_and_widen_with_the_level(shifts, level, extra) -> None:
    base = np.quantile(np.random.default_rng(1).normal(0, 0.3, 2000), im.CELL_PROBS)
    record = {"gpus": {str(i): _unit(base + s) for i, s in enumerate(shifts)}}
    lo, hi = im.kernel_log_bounds(record, np.array(["any|any"]), 0.0, level)
    lo2, hi2 = im.kernel_log_bounds(record, np.array(["any|any"]), 0.0, min(level + extra, 0.98))
    mid = im.mixture_quantiles(record, "any|any", im.weights(record, 0.0), [0.5])[0]
    assert lo[0] <= mid <= hi[0] and lo2[0] <= lo[0] + 1e-9 and hi2[0] >= hi[0] - 1e-9


@pytest.mark.parametrize("spread", [0.3, 0.05])  # GPU shifts dominate / row noise dominates
def test_nested_leave_one_gpu_out_coverage_is_near_nominal_on_exchangeable_gpus(spread: float) -> None:
    """Six seeds of seven GPUs, each judged with a level map fitted without it (a few seconds of CPU each)."""
    dist = {g: 0.5 for g in POOL}  # all alike: the level map alone calibrates
    covs = [fit.judge_family(_frame(seed, spread), dist, [0.8])["coverage"].mean() for seed in range(6)]
    assert abs(np.mean(covs) - 0.8) < 0.06


def test_level_map_is_monotone_and_few_gpus_keep_the_nominal_level() -> None:
    m = fit.level_map(_frame(), _distances())
    values = [m[str(lv)] for lv in iv.LEVEL_GRID]
    assert values == sorted(values) and all(0 < v <= 0.99 for v in values)
    two = _frame().loc[lambda d: d["unit"].isin(POOL[:2])]
    assert fit.level_map(two, _distances()) == {str(v): v for v in iv.LEVEL_GRID}


def test_a_family_of_two_gpus_is_never_tighter_than_no_data() -> None:
    record = fit.fit_family(_frame().loc[lambda d: d["unit"].isin(POOL[:2])], _distances())
    lo, hi = im.kernel_log_bounds(record, np.array(["any|any"]), 0.3, 0.8)
    assert math.exp(hi[0] - lo[0]) >= 9.0 - 1e-9


def test_kernel_interval_brackets_the_forecast_and_names_its_basis() -> None:
    table = _table()
    lo, hi, note = iv.kernel_interval("bmm", "a100_pcie_80gb", "fp32", [0.01, 1.0], 0.8, table)
    assert (lo < [0.01, 1.0]).all() and ([0.01, 1.0] < hi).all()
    assert "spec distance" in note and "calibrating GPUs weigh in" in note
    _, _, far = iv.kernel_interval("bmm", "h100_sxm_80gb", "fp32", 1.0, 0.8, table)
    assert "architecture hopper is not among" in far


def test_another_vendor_without_residuals_is_answered_wide_never_tight() -> None:
    lo, hi, note = iv.kernel_interval("linear", "mi210", "fp32", 1.0, 0.8, _table())
    assert hi / lo >= 9.0 - 1e-9 and "no measurement of that vendor" in note
    lo, hi, note = iv.e2e_interval("inference", "mi210", "fp32", 1.0, 0.8, _table())
    assert hi / lo >= 2.0 and "no measurement of that vendor" in note


def test_a_dtype_without_residuals_gets_the_wide_default() -> None:
    lo, hi, note = iv.kernel_interval("tc_gemm", "h100_sxm_80gb", "bf16", 1.0, 0.8, _table())
    assert hi / lo == pytest.approx(9.0) and "no data" in note


@settings(max_examples=30)
@given(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3), st.lists(st.floats(0.01, 0.5), min_size=3,
                                                                           max_size=3))
def test_mix_sd_lies_between_independent_and_comonotone(raw, spreads) -> None:
    fams = ["a", "b", "c"]
    total = sum(raw) or 1.0
    w = {f: x / total for f, x in zip(fams, raw, strict=True)}
    mom = {f: (0.0, s) for f, s in zip(fams, spreads, strict=True)}
    _, indep = im.mix_moments(w, mom, {"pairs": {}, "mean": 0.0}, 0.0)
    _, como = im.mix_moments(w, mom, {"pairs": {}, "mean": 1.0}, 0.0)
    _, half = im.mix_moments(w, mom, {"pairs": {}, "mean": 0.5}, 0.0)
    assert indep - 1e-12 <= half <= como + 1e-12
    assert como == pytest.approx(sum(w[f] * mom[f][1] for f in fams))


def test_end_to_end_fit_and_nested_judging_on_synthetic_labels() -> None:
    rng = np.random.default_rng(3)
    gpus = POOL[:6]
    biases = {f: {g: float(rng.normal(0, 0.2)) for g in gpus} for f in ("linear", "bmm")}
    rows = []
    for g in gpus:
        for _ in range(5):
            share = rng.uniform(0.5, 0.9)
            r = share * biases["linear"][g] + (1 - share) * biases["bmm"][g] + rng.normal(0, 0.05)
            rows.append({"gpu": g, "mode": "inference", "r": r, "ms_linear": share, "ms_bmm": 1 - share})
    labels = pd.DataFrame(rows)
    w = fit.shares(labels, ["linear", "bmm"], "linear")
    dist = {g: 0.5 for g in gpus}
    got = fit.e2e_fit(labels, w, biases, dist)
    assert got["s0"] < 0.1 and list(got["k"].values()) == sorted(got["k"].values())
    judged = fit.judge_e2e(labels, w, biases, dist, [0.8])
    assert len(judged) == len(labels) and 0.4 <= judged["inside"].mean() <= 1.0


def test_level_is_checked_and_orders_the_widths() -> None:
    table = _table()
    bounds = [iv.e2e_interval("training", "a100_pcie_80gb", "fp32", 1.0, lv, table) for lv in (0.5, 0.8, 0.95)]
    w = [hi - lo for lo, hi, _ in bounds]
    assert w[0] < w[1] < w[2]
    for bad in (1.5, 0.2, "x", True):
        with pytest.raises(ValueError, match="interval_level"):
            iv.check_level(bad)


def test_shipped_table_covers_every_family_and_matches_the_data_it_came_from() -> None:
    table = iv.load_intervals()
    assert set(FP32_FAMILIES) <= set(table.kernel) and {"correlation", "s0", "k"} <= set(table.e2e)
    assert table.meta["command"].startswith("python benchmarks/generalisation.py")
    hashes = {d.name: data_hash(d) for d in (NEUSIGHT_DIR, NEUSIGHT_AMD_DIR, AICONFIGURATOR_DIR, VIDUR_DIR)}
    assert table.meta["inputs_sha256"] == hashes, "data changed: rerun python benchmarks/generalisation.py"
    for f in FP32_FAMILIES:  # distances are measured against what the registered fp32 predictors train on
        assert table.training[f]["gpus"] == sorted(FP32_TRAINING_GPUS), "rerun python benchmarks/generalisation.py"
        units = table.kernel[f]["fp32"]["gpus"]
        assert {"mi100", "mi210", "mi100@nvidia_only"} <= set(units) and units["mi100@nvidia_only"]["vendor_gap"]
    lo, hi, note = iv.forecast_interval("inference", "l4", "fp32", 100.0)
    assert lo < 100.0 < hi and "80% interval" in note
    grid = np.geomspace(0.005, 50, 30)
    near = iv.kernel_interval("tc_gemm", "b200", "bf16", grid)
    far = iv.kernel_interval("tc_gemm", "h100_sxm_80gb", "bf16", grid)
    # a twin of a training GPU is known better than a new architecture (over the latency scales)
    assert np.median(near[1] / near[0]) < np.median(far[1] / far[0])


def test_evaluate_table_carries_bounds_beside_pred_ms() -> None:
    labels = shipped_labels().labels
    labels = labels[labels["variant"].eq("plain")].groupby("gpu").head(1)
    out = forecast_labels(labels, roofline_predictor, interval_level=0.8)
    at = list(out.columns).index("pred_ms")
    assert list(out.columns[at + 1:at + 3]) == INTERVAL_COLUMNS and out.columns[-1] == "interval_note"
    ok = out["pred_ms"].notna()
    assert ok.all() and (out["pred_lo_ms"] < out["pred_ms"]).all() and (out["pred_ms"] < out["pred_hi_ms"]).all()
    assert "pred_lo_ms" not in forecast_labels(labels, roofline_predictor).columns


def _predict(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TILECAST_HOME": str(tmp_path), "PYTHONPATH": str(ROOT / "src"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "model=gpt2_large", "batch=4",
                           "seq_len=1024", "mode=inference", "forecaster=roofline", *args],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_predict_job_writes_the_interval_and_refuses_a_bad_level(tmp_path) -> None:
    out = tmp_path / "f.json"
    proc = _predict(tmp_path, "gpu=mi210", "interval_level=0.95", f"output={out}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["pred_lo_ms"] < record["e2e_ms"] < record["pred_hi_ms"] and record["interval_level"] == 0.95
    assert "few GPUs of its vendor" in record["interval_note"] and "95% interval" in proc.stdout
    assert "1 other AMD GPU measured" in record["interval_note"]
    bad = _predict(tmp_path, "gpu=l4", "interval_level=1.5")
    assert bad.returncode == 2 and "error: interval_level=1.5" in bad.stderr
