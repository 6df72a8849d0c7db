"""Prediction intervals (issue 14, item 2): conformal quantiles of leave-one-GPU-out residuals, strata for GPUs
far from the training GPUs, the committed quantile file, and the columns / fields the jobs write."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tilecast.data import data_hash
from tilecast.evaluation.labels import shipped_labels
from tilecast.evaluation.suite import INTERVAL_COLUMNS, forecast_labels
from tilecast.forecast import intervals as iv
from tilecast.forecast import roofline_predictor
from tilecast.paths import AICONFIGURATOR_DIR, NEUSIGHT_AMD_DIR, NEUSIGHT_DIR, ROOT, VIDUR_DIR
from tilecast.predictors import TRAINING_GPUS
from tilecast.predictors.rows import AMD_TRAINING_GPUS, FP32_TRAINING_GPUS
from tilecast.specs import get_gpu
from tilecast.tiles.ops import FP32_FAMILIES

POOL = ("tesla_p4", "tesla_p100_pcie_16gb", "tesla_t4", "tesla_v100_pcie_32gb", "a100_pcie_40gb", "l4",
        "a100_pcie_80gb")


def _synthetic(seed: int = 0, spread: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Exchangeable residuals: per GPU a random shift plus noise, GPUs with very different row counts."""
    rng = np.random.default_rng(seed)
    r, g = [], []
    for i, gpu in enumerate(POOL):
        n = 50 + 400 * i
        r.append(rng.normal(rng.normal(0, spread), 0.1, n))
        g += [gpu] * n
    return np.concatenate(r), np.array(g)


def _table(**kw) -> iv.IntervalTable:
    r, g = _synthetic()
    amd = (np.random.default_rng(1).normal(-0.4, 0.3, 300), np.array(["mi100"] * 150 + ["mi210"] * 150))
    trained = {"vendors": ["nvidia"], "architectures": sorted({get_gpu(x).architecture for x in TRAINING_GPUS})}
    return iv.IntervalTable({f: {"fp32": iv.calibrate(r, g, amd)} for f in FP32_FAMILIES},
                            {"inference": iv.calibrate(r, g), "training": iv.calibrate(r, g)},
                            {f: trained for f in FP32_FAMILIES}, {"e2e_method": "e2e", **kw})


def test_every_gpu_weighs_the_same_whatever_its_row_count() -> None:
    r = np.concatenate([np.zeros(1000), np.ones(1)])
    g = np.array(["big"] * 1000 + ["small"])
    q90 = iv.weighted_quantiles(r, g, [0.9])[0]
    assert q90 > 0.5  # unweighted, the 90% quantile would be 0: the big GPU would decide alone
    assert iv.weighted_quantiles(r, np.arange(len(r)), [0.9])[0] == 0.0


@pytest.mark.parametrize("spread", [0.3, 0.05])  # GPU shifts dominate / row noise dominates
def test_leave_one_gpu_out_coverage_is_near_nominal_on_exchangeable_gpus(spread: float) -> None:
    covs = [np.mean(list(iv.coverage(*_synthetic(seed, spread), 0.8).values())) for seed in range(20)]
    assert abs(np.mean(covs) - 0.8) < 0.05  # plain quantiles (no GPU-level correction) gave 0.73 at spread 0.3


def test_a_far_gpu_never_gets_a_tighter_interval_and_the_note_says_why() -> None:
    table = _table()
    near = iv.kernel_interval("bmm", "a100_pcie_80gb", "fp32", 10.0, 0.8, table)
    new_arch = iv.kernel_interval("bmm", "h100_sxm_80gb", "fp32", 10.0, 0.8, table)
    amd = iv.kernel_interval("bmm", "mi300x", "fp32", 10.0, 0.8, table)
    assert near[0] < 10.0 < near[1]
    for lo, hi, _ in (new_arch, amd):
        assert lo <= near[0] and hi >= near[1]
    assert "calibrated on left-out public GPUs" in near[2]
    assert "hopper" in new_arch[2] and "new architecture" in new_arch[2]
    assert "another vendor" in amd[2] and "amd GPU" in amd[2]


def _amd_trained(table: iv.IntervalTable, with_few: bool = True) -> iv.IntervalTable:
    """``table`` as once AMD rows are trained on: MI100 / MI210 among the training GPUs, and a ``few_of_vendor``
    stratum from (synthetic) leave-one-AMD-out residuals, wider than the NVIDIA ones."""
    rng = np.random.default_rng(2)
    loao = (np.concatenate([rng.normal(-0.3, 0.4, 200), rng.normal(0.2, 0.3, 100)]),
            np.array(["mi100"] * 200 + ["mi210"] * 100))
    gpus = [*TRAINING_GPUS, *AMD_TRAINING_GPUS]
    trained = {"vendors": ["amd", "nvidia"], "architectures": sorted({get_gpu(x).architecture for x in gpus}),
               "gpus": sorted(gpus)}
    kernel = {f: {"fp32": {**s["fp32"], **({"few_of_vendor": iv.stratum_table(*loao)} if with_few else {})}}
              for f, s in table.kernel.items()}
    return iv.IntervalTable(kernel, table.e2e, {f: trained for f in table.training}, table.meta)


@pytest.mark.parametrize("gpu", ["mi300x", "mi250x", "mi250", "mi210"])
def test_an_amd_target_once_amd_is_trained_on_gets_the_leave_one_amd_out_stratum(gpu: str) -> None:
    table = _amd_trained(_table())
    records = table.kernel["bmm"]["fp32"]
    lo, hi, note = iv.kernel_interval("bmm", gpu, "fp32", 10.0, 0.8, table)
    q_lo, q_hi = iv._q(records["few_of_vendor"], 0.8)
    assert lo <= 10.0 * np.exp(q_lo) + 1e-12 and hi >= 10.0 * np.exp(q_hi) - 1e-12
    near = iv.kernel_interval("bmm", "a100_pcie_80gb", "fp32", 10.0, 0.8, table)
    assert lo <= near[0] and hi >= near[1]  # never the tighter NVIDIA quantiles
    assert iv.kernel_log_q("bmm", get_gpu(gpu), "fp32", 0.8, table)[2] == "few_of_vendor"
    assert "few GPUs of its vendor" in note and "1 other AMD GPU measured" in note and "another vendor" not in note
    assert ("cdna3" in note) == (gpu == "mi300x")  # MI300X's architecture is new to the training GPUs too
    e_lo, e_hi, e_note = iv.e2e_interval("inference", gpu, "fp32", 10.0, 0.8, table)
    n_lo, n_hi, _ = iv.e2e_interval("inference", "a100_pcie_80gb", "fp32", 10.0, 0.8, table)
    assert e_lo <= n_lo and e_hi >= n_hi and "1 other AMD GPU measured" in e_note


def test_an_nvidia_target_is_unchanged_by_training_on_amd() -> None:
    before, after = _table(), _amd_trained(_table())
    for gpu in ("a100_pcie_80gb", "l4", "h100_sxm_80gb", "tesla_t4"):
        for f in FP32_FAMILIES:
            assert iv.kernel_interval(f, gpu, "fp32", 3.0, 0.8, before) == iv.kernel_interval(f, gpu, "fp32", 3.0,
                                                                                             0.8, after)
        for mode in ("inference", "training"):
            assert iv.e2e_interval(mode, gpu, "fp32", 3.0, 0.9, before) == iv.e2e_interval(mode, gpu, "fp32", 3.0,
                                                                                          0.9, after)


def test_a_family_trained_on_few_gpus_of_one_vendor_keeps_its_own_strata() -> None:
    """vec_half trains on two NVIDIA GPUs only: its leave-one-GPU-out strata are those GPUs', no vendor is few
    beside another, so an NVIDIA target stays near / new_architecture."""
    two = {"vendors": ["nvidia"], "architectures": ["ampere"], "gpus": ["a100_sxm4_80gb", "a40"]}
    assert iv.gpu_stratum(get_gpu("a100_pcie_80gb"), two) == ("near", "")
    assert iv.gpu_stratum(get_gpu("h100_sxm_80gb"), two)[0] == "new_architecture"
    assert iv.gpu_stratum(get_gpu("mi210"), two)[0] == "other_vendor"


def test_few_of_vendor_without_its_residuals_is_never_answered_by_the_other_vendors_alone() -> None:
    table = _amd_trained(_table(), with_few=False)
    lo, hi, note = iv.kernel_interval("softmax", "mi250x", "fp32", 1.0, 0.8, table)
    ov = iv._q(table.kernel["softmax"]["fp32"]["other_vendor"], 0.8)
    assert lo <= np.exp(ov[0]) + 1e-12 and hi >= np.exp(ov[1]) - 1e-12 and "never saw it" in note
    bare = iv.IntervalTable({f: {"fp32": {k: v for k, v in s["fp32"].items() if k != "other_vendor"}}
                             for f, s in table.kernel.items()}, table.e2e, table.training, table.meta)
    lo, hi, note = iv.kernel_interval("softmax", "mi250x", "fp32", 1.0, 0.8, bare)
    assert hi / lo >= 9.0 - 1e-9 and "no measurement of that vendor" in note


def test_leave_one_amd_out_coverage_judges_each_amd_gpu_on_the_other() -> None:
    r, g = _synthetic()
    fv = (np.zeros(20), np.array(["mi100"] * 10 + ["mi210"] * 10))
    cov = iv.coverage(r, g, 0.8, None, None, fv)
    assert cov["mi100"] == cov["mi210"] == 1.0 and set(POOL) <= set(cov)


def test_another_vendor_without_data_is_answered_wide_never_tight() -> None:
    table = _table()
    no_amd = iv.IntervalTable({f: {"fp32": {k: v for k, v in s["fp32"].items() if k != "other_vendor"}}
                               for f, s in table.kernel.items()}, table.e2e, table.training, table.meta)
    lo, hi, note = iv.kernel_interval("linear", "mi210", "fp32", 1.0, 0.8, no_amd)
    assert hi / lo >= 9.0 - 1e-9 and "no measurement of that vendor" in note  # a factor of 3 either way
    lo, hi, note = iv.e2e_interval("inference", "mi210", "fp32", 1.0, 0.8, no_amd)
    assert hi / lo >= 9.0 - 1e-9


def test_a_dtype_without_residuals_gets_the_wide_default() -> None:
    lo, hi, note = iv.kernel_interval("tc_gemm", "h100_sxm_80gb", "bf16", 1.0, 0.8, _table())
    assert hi / lo == pytest.approx(9.0) and "no data" in note


def test_level_is_checked_and_orders_the_widths() -> None:
    table = _table()
    bounds = [iv.e2e_interval("training", "a100_pcie_80gb", "fp32", 1.0, lv, table) for lv in (0.5, 0.8, 0.95)]
    w = [hi - lo for lo, hi, _ in bounds]
    assert w[0] < w[1] < w[2]
    for bad in (1.5, 0.2, "x", True):
        with pytest.raises(ValueError, match="interval_level"):
            iv.check_level(bad)


def test_shipped_quantiles_cover_every_family_and_match_the_data_they_came_from() -> None:
    table = iv.load_intervals()
    assert set(FP32_FAMILIES) <= set(table.kernel) and set(table.e2e) == {"inference", "training"}
    assert table.meta["command"].startswith("python benchmarks/generalisation.py")
    assert table.meta["e2e_method"] in ("e2e", "mix", "wider")
    hashes = {d.name: data_hash(d) for d in (NEUSIGHT_DIR, NEUSIGHT_AMD_DIR, AICONFIGURATOR_DIR, VIDUR_DIR)}
    assert table.meta["inputs_sha256"] == hashes, "data changed: rerun python benchmarks/generalisation.py"
    for f in FP32_FAMILIES:  # the strata are judged against what the registered fp32 predictors train on
        assert table.training[f]["gpus"] == sorted(FP32_TRAINING_GPUS), "rerun python benchmarks/generalisation.py"
        assert {"near", "new_architecture", "few_of_vendor", "other_vendor"} <= set(table.kernel[f]["fp32"])
    lo, hi, note = iv.forecast_interval("inference", "l4", "fp32", 100.0)
    assert lo < 100.0 < hi and "80% interval" in note


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
