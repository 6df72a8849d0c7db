"""``jobs/evaluate.py`` run as a user runs it, on a small label directory, logging to a throwaway sqlite store."""

import dataclasses
import json
import subprocess
import sys

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from tilecast.data import load_node_labels
from tilecast.paths import ROOT
from tilecast.pipelines.evaluate import EvaluationSettings, evaluate, log_evaluation
from tilecast.registry.tracking import ENV_VAR, configure

LABELS = {"NVIDIA_L4/gpt2_large-inf-1024-4.json": 1276.3, "NVIDIA_L4/bert_large-inf-512-8-fusion.json": 344.1,
          "NVIDIA_A100-SXM4-40GB/gpt2_large-train-1024-4-tp4.json": 484.9,
          "Tesla_T4/bert_large-inf-512-8.json": 694.5, "Tesla_T4/bert_large-inference-512-8.json": 1.0}


@pytest.fixture(scope="module")
def label_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("labels")
    for rel, ms in LABELS.items():
        d, name = rel.split("/")
        (root / d).mkdir(exist_ok=True)
        (root / d / name).write_text(json.dumps({"e2e_latency": ms}))
    nodes = load_node_labels()
    nodes = nodes[(nodes["device"] == "NVIDIA L4") & (nodes["tag"] == "gpt2_large-inf-1024-4")]
    nodes[["Name", "fw_latency", "bw_latency"]].to_csv(root / "NVIDIA_L4" / "gpt2_large-inf-1024-4.csv", index=False)
    (root / "NVIDIA_L4" / "not-a-tag.csv").write_text("Name,fw_latency\nx,1\n")
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    yield configure(f"sqlite:///{tmp_path_factory.mktemp('evaluate') / 'mlflow.db'}")
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def test_job_writes_one_row_per_label_and_logs_a_run(label_dir, store, tmp_path, monkeypatch):
    out = tmp_path / "eval.csv"
    monkeypatch.setenv(ENV_VAR, store)
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "evaluate.py"), f"labels_dir={label_dir}",
                           "forecaster=roofline", "perop=false", f"output={out}"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(out, keep_default_na=False)
    assert list(table.columns[:12]) == ["device", "tag", "model", "mode", "seq_len", "batch", "variant", "label_ms",
                                        "pred_ms", "pred_lo_ms", "pred_hi_ms", "ape_pct"]
    answered = table.loc[table["pred_ms"].astype(str) != ""]
    lo, mid, hi = (pd.to_numeric(answered[c]) for c in ("pred_lo_ms", "pred_ms", "pred_hi_ms"))
    assert len(answered) and (lo < mid).all() and (mid < hi).all()  # the 80% interval around the forecast
    assert sorted(table["tag"]) == sorted(["gpt2_large-inf-1024-4", "bert_large-inf-512-8-fusion",
                                           "gpt2_large-train-1024-4-tp4", "bert_large-inf-512-8"])
    assert "bert_large-inference-512-8.json" in proc.stdout + proc.stderr  # reported and skipped
    l4 = table[table["tag"] == "gpt2_large-inf-1024-4"].iloc[0]
    assert float(l4["ape_pct"]) == pytest.approx(41.85, abs=0.1)  # the paper's roofline: 41.9
    assert bool(l4["calibrated"]) and l4["pred_cal_ms"] != l4["pred_ms"]  # L4 has kernel test rows
    sxm = table[table["gpu"] == "a100_sxm4_40gb"].iloc[0]
    assert not bool(sxm["calibrated"])  # no kernel rows of that GPU: calibrated = spec-only
    # the calibration is checked against the GPU's other models' runs; T4 has one model here: unchecked, said so
    t4 = table[table["gpu"] == "tesla_t4"].iloc[0]
    assert bool(t4["calibrated"])
    assert t4["calibration_note"] == "calibration unchecked: no other model measured on tesla_t4"
    runs = MlflowClient().search_runs([MlflowClient().get_experiment_by_name("tilecast-evaluate").experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.data.params["labels"] == "4" and run.data.params["skipped"] == "2"
    assert "inference.mean_ape_pct" in run.data.metrics
    assert "mean_ape_pct.NVIDIA_L4.inference.plain" in run.data.metrics
    assert "max_ape_cal_pct.Tesla_T4.inference.plain" in run.data.metrics


def test_the_run_is_tagged_with_the_versions_used(label_dir, store):
    settings = EvaluationSettings(labels_dir=str(label_dir), forecaster="roofline", calibrate=False, perop=True)
    result = evaluate(settings)
    result.versions = {"bmm": "7", "linear": "3"}  # what a registry forecaster reports
    run_id = log_evaluation(result, settings)
    run = MlflowClient().get_run(run_id)
    assert run.data.tags["tilecast.version.bmm"] == "7" and run.data.tags["tilecast.version.linear"] == "3"
    assert result.perop is not None and set(result.perop["tag"]) == {"gpt2_large-inf-1024-4"}
    assert len(result.perop) == 23 and set(result.perop["gpu"]) == {"l4"}
    assert any(k.startswith("perop_mape_pct.") for k in run.data.metrics)
    arts = {a.path for a in MlflowClient().list_artifacts(run_id, "evaluation")}
    assert {"evaluation/labels.json", "evaluation/summary.json", "evaluation/perop.json",
            "evaluation/skipped.txt"} <= arts


def test_an_amd_label_directory_is_forecast_on_the_amd_spec(tmp_path):
    """``AMD_Instinct_MI250/<tag>.json`` (a real NVIDIA label's content: no AMD labels ship) resolves to the
    mi250 spec sheet and is forecast on it: its fp32 GEMMs on the matrix cores, the interval of a vendor trained on
    with few GPUs (MI100, MI210: calibrated leave-one-AMD-out)."""
    from tilecast.data import load_e2e_labels
    from tilecast.forecast import forecast
    from tilecast.specs import get_gpu

    real = load_e2e_labels().query("device_dir == 'NVIDIA_L4' and tag == 'gpt2_large-inf-1024-4'").iloc[0]
    for d in ("AMD_Instinct_MI250", "NVIDIA_L4"):
        (tmp_path / d).mkdir()
        (tmp_path / d / f"{real.tag}.json").write_text(json.dumps({"e2e_latency": float(real.e2e_latency)}))
    result = evaluate(EvaluationSettings(labels_dir=str(tmp_path), forecaster="roofline", calibrate=False,
                                         perop=False))
    assert result.labels.skipped == []
    table = result.table.set_index("gpu")
    amd = table.loc["mi250"]
    assert amd["device"] == "AMD Instinct MI250" and amd["error"] == "" and not amd["calibrated"]
    want = forecast("gpt2_large", "mi250", 4, 1024, "inference").e2e_ms
    assert amd["pred_ms"] == pytest.approx(want, rel=1e-9) and amd["pred_ms"] != table.loc["l4", "pred_ms"]
    vector_only = dataclasses.replace(get_gpu("mi250"), fp32_matrix_gflops=None)
    assert want < forecast("gpt2_large", vector_only, 4, 1024, "inference").e2e_ms
    assert amd["ape_pct"] == pytest.approx(100 * abs(want - real.e2e_latency) / real.e2e_latency)
    assert amd["pred_lo_ms"] < amd["pred_ms"] < amd["pred_hi_ms"] and "few GPUs of its vendor" in amd["interval_note"]
