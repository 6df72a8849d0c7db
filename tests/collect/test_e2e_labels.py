"""End-to-end labels on CPU: a catalog model at reduced depth, written in the data's label layout."""

import json

import pytest

from tilecast.collect import CollectError, E2eRequest, TimingPlan, collect_e2e
from tilecast.collect.environment import cpu_name
from tilecast.specs import UnknownSpecError

FAST = TimingPlan(warmup=1, repeats=2, fastest=1)
LABEL_KEYS = ["num_layer", "e2e_latency", "fw_latency", "bwall_latency"]  # as labels/<device>/*.json


def test_inference_label(tmp_path):
    req = E2eRequest(model="bert", batch=2, seq_len=16, mode="inference", plan=FAST, num_layers=1)
    path = collect_e2e(req, "cpu", tmp_path)
    assert path == tmp_path / "labels" / cpu_name().replace(" ", "_") / "bert_L1-inf-16-2.json"
    label = json.loads(path.read_text())
    assert list(label) == LABEL_KEYS
    assert label["num_layer"] == 1 and label["bwall_latency"] == 0
    assert label["e2e_latency"] == label["fw_latency"] > 0


def test_training_label_has_backward(tmp_path):
    once = TimingPlan(warmup=0, repeats=1, fastest=1)  # the vocabulary-sized head dominates on CPU
    req = E2eRequest(model="gpt2_med", batch=1, seq_len=8, mode="training", plan=once, num_layers=1)
    label = json.loads(collect_e2e(req, "cpu", tmp_path).read_text())
    assert label["fw_latency"] > 0 and label["bwall_latency"] > 0
    assert label["e2e_latency"] == pytest.approx(label["fw_latency"] + label["bwall_latency"])


def test_bad_requests_are_named_and_write_nothing(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(UnknownSpecError, match="gpt2_large"):
        collect_e2e(E2eRequest(model="gpt2_larg", batch=1, seq_len=8), "cpu", out)
    with pytest.raises(CollectError, match="seq_len=4096"):
        collect_e2e(E2eRequest(model="gpt2_large", batch=1, seq_len=4096), "cpu", out)
    with pytest.raises(CollectError, match="'eval'"):
        collect_e2e(E2eRequest(model="bert", batch=1, seq_len=8, mode="eval"), "cpu", out)
    with pytest.raises(CollectError, match="model 'switchxl4'|switch"):
        collect_e2e(E2eRequest(model="switchxl4", batch=1, seq_len=8, num_layers=1), "cpu", out)
    assert not out.exists()
