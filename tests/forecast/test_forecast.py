"""One workload end to end with the roofline predictor (forecast/workload.py)."""

from dataclasses import replace

import pytest

from tilecast.forecast import forecast, workload_frame
from tilecast.graph.parallel import ParallelismError
from tilecast.specs import UnknownSpecError, WorkloadError, get_gpu


def test_inference_is_forward_only_training_adds_backward_and_accumulation():
    inf = forecast("gpt2_large", "l4", 4, 1024, "inference")
    assert inf.bw_ms == inf.acc_ms == 0.0 and inf.e2e_ms == pytest.approx(inf.fw_ms)
    train = forecast("gpt2_large", "l4", 4, 1024, "training")
    assert inf.fw_ms < train.fw_ms < 1.2 * inf.fw_ms  # the training forward adds dropouts
    assert train.bw_ms > train.fw_ms and train.acc_ms > 0
    assert train.e2e_ms == pytest.approx(train.fw_ms + train.bw_ms + train.acc_ms)
    assert sum(train.by_group_ms.values()) == pytest.approx(train.e2e_ms)
    d = train.to_dict()
    assert d["e2e_ms"] == train.e2e_ms and set(d["ms_per_group"]) >= {"bmm", "linear", "elementwise", "softmax",
                                                                      "layernorm", "mem", "comm"}
    assert "e2e" in train.describe()
    assert {"group", "ms", "total_ms"} <= set(train.ops.columns)


def test_fusion_saves_vector_time():
    plain = forecast("bert_large", "a100_pcie_40gb", 8, 512, "inference")
    fused = forecast("bert_large", "a100_pcie_40gb", 8, 512, "inference", fused=True)
    assert fused.e2e_ms < plain.e2e_ms
    assert fused.by_group_ms["linear"] == pytest.approx(plain.by_group_ms["linear"])
    assert fused.by_group_ms["elementwise"] < plain.by_group_ms["elementwise"]


def test_parallel_schemes_by_device_spec():
    a100 = get_gpu("a100_sxm4_40gb")
    single = forecast("gpt2_large", a100, 4, 1024, "training")
    for par in ("dp4", "tp4", "pp4_1"):
        fc = forecast("gpt2_large", a100, 4, 1024, "training", par)
        assert fc.parallel == par and fc.by_group_ms["comm"] > 0
        if par != "pp4_1":
            assert fc.e2e_ms < single.e2e_ms
    pp = forecast("gpt2_large", a100, 4, 1024, "training", "pp4_1")
    assert pp.e2e_ms == pytest.approx(single.e2e_ms + pp.by_group_ms["comm"])  # one micro-batch: no overlap
    slow_link = replace(a100, nvlink_gbs=None)  # the same chip on PCIe only
    assert forecast("gpt2_large", slow_link, 4, 1024, "training", "tp4").e2e_ms > \
        forecast("gpt2_large", a100, 4, 1024, "training", "tp4").e2e_ms


def test_any_degree():
    e2e = [forecast("gpt3_xl", "h100_sxm_80gb", 8, 512, "training", f"dp{p}").e2e_ms for p in (1, 2, 4, 8)]
    assert e2e == sorted(e2e, reverse=True)
    assert forecast("gpt3_xl", "h100_sxm_80gb", 8, 512, "training", "tp8").e2e_ms > 0
    assert forecast("gpt3_xl", "h100_sxm_80gb", 8, 512, "training", "pp8_8").e2e_ms > 0


def test_bad_input_names_what_is_known():
    with pytest.raises(UnknownSpecError, match="gpt2_large"):
        forecast("gpt2_largee", "l4", 1, 128)
    with pytest.raises(UnknownSpecError, match="l4"):
        forecast("gpt2_large", "NVIDIA L5", 1, 128)
    with pytest.raises(ParallelismError, match="tp3.*num_heads=20"):
        forecast("gpt2_large", "l4", 4, 128, "training", "tp3")
    with pytest.raises(WorkloadError, match="mode"):
        forecast("gpt2_large", "l4", 4, 128, "backprop")
    with pytest.raises(WorkloadError, match="batch"):
        forecast("gpt2_large", "l4", 0, 128)


def test_frame_attrs_carry_the_schedule():
    f = workload_frame("opt_13", 4, 256, "training", "pp2_2")
    assert f.attrs == {"num_layers": 24, "parallel": "pp2_2", "degree": 2, "microbatches": 2}
