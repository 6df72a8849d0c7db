"""Issue 27 item 6: a label latency no run can have (1e300 ms, above the same ceiling calibration measurements get)
is skipped with its reason and counted; it never enters the means."""

import json

from tilecast.evaluation.labels import read_label_dir
from tilecast.metrics import MAX_MEASURED_MS
from tilecast.pipelines.evaluate import EvaluationSettings, evaluate
from tilecast.registry.calibrate import CalibrationGate


def _labels(root, values):
    (root / "NVIDIA_L4").mkdir(parents=True)
    for name, ms in values.items():
        (root / "NVIDIA_L4" / name).write_text(json.dumps({"e2e_latency": ms}))
    return root


def test_an_absurd_label_is_skipped_named_and_counted(tmp_path):
    root = _labels(tmp_path, {"gpt2_large-inf-1024-4.json": 1276.3, "bert_large-inf-512-8.json": 1e300,
                              "bert_large-inf-512-2.json": MAX_MEASURED_MS * 2})
    got = read_label_dir(root)
    assert got.labels["tag"].tolist() == ["gpt2_large-inf-1024-4"]
    reasons = dict(got.skipped)
    assert "absurd" in reasons["NVIDIA_L4/bert_large-inf-512-8.json"]
    assert "1e+300" in reasons["NVIDIA_L4/bert_large-inf-512-8.json"]
    assert "absurd" in reasons["NVIDIA_L4/bert_large-inf-512-2.json"]
    result = evaluate(EvaluationSettings(labels_dir=str(root), forecaster="roofline", perop=False, calibrate=False))
    assert len(result.table) == 1 and len(result.labels.skipped) == 2
    assert result.table["ape_pct"].max() < 100.0  # the 1e300 label's 100% error is not in it


def test_one_ceiling_for_labels_and_calibration_measurements():
    assert CalibrationGate().max_latency_ms == MAX_MEASURED_MS
