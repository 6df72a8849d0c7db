"""Label files -> label table (evaluation/labels.py): any subset, any known device, bad files skipped."""

import json

import pytest

from tilecast.evaluation.labels import LABEL_COLUMNS, parse_variant, read_label_dir, shipped_labels


def write(root, device_dir, name, payload):
    d = root / device_dir
    d.mkdir(parents=True, exist_ok=True)
    path = d / name
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


def test_reads_a_directory_laid_out_like_the_data(tmp_path):
    write(tmp_path, "NVIDIA_L4", "gpt2_large-inf-1024-4.json", {"e2e_latency": 1276.3, "fw_latency": 1276.3})
    write(tmp_path, "NVIDIA_L4", "bert_large-inf-512-8-fusion.json", {"e2e_latency": 344.1})
    write(tmp_path, "NVIDIA_A100-SXM4-40GB", "gpt2_large-train-1024-4-pp4_1.json", {"e2e_latency": 1597.6})
    write(tmp_path, "NVIDIA_H100_80GB_HBM3", "opt_13-train-2048-2-dp8.json", {"e2e_latency": 10.0})
    write(tmp_path, "h200_sxm", "gpt3_xl-inf-2048-2-tp2.json", {"e2e_latency": 5.0})  # a catalog key works too
    write(tmp_path, "NVIDIA_L4", "switch4-inf-512-1.json", {"e2e_latency": 50.6})  # a model the catalog lacks
    got = read_label_dir(tmp_path)
    skipped = [(f, "unknown model 'switch4'" in why) for f, why in got.skipped]
    assert skipped == [("NVIDIA_L4/switch4-inf-512-1.json", True)]
    df = got.labels.set_index("tag")
    assert list(got.labels.columns) == LABEL_COLUMNS
    assert df.loc["gpt2_large-inf-1024-4", ["gpu", "model", "mode", "seq_len", "batch", "variant"]].tolist() == \
        ["l4", "gpt2_large", "inference", 1024, 4, "plain"]
    assert bool(df.loc["bert_large-inf-512-8-fusion", "fused"])
    assert df.loc["gpt2_large-train-1024-4-pp4_1", "parallel"] == "pp4_1"
    assert df.loc["opt_13-train-2048-2-dp8", ["gpu", "parallel"]].tolist() == ["h100_sxm_80gb", "dp8"]
    assert df.loc["gpt3_xl-inf-2048-2-tp2", "device"] == "NVIDIA H200"
    assert df.loc["gpt2_large-inf-1024-4", "label_ms"] == pytest.approx(1276.3)


def test_bad_files_are_reported_and_skipped_the_rest_evaluated(tmp_path):
    write(tmp_path, "NVIDIA_L4", "gpt2_large-inf-1024-4.json", {"e2e_latency": 1276.3})
    bad = {
        "NVIDIA_L4/gpt2_large-inference-1024-4.json": ({"e2e_latency": 1.0}, "mode"),
        "NVIDIA_L4/gpt2_large-inf-x-4.json": ({"e2e_latency": 1.0}, "seq"),
        "NVIDIA_L4/notalabel.json": ({"e2e_latency": 1.0}, "does not match"),
        "NVIDIA_L4/gpt9-inf-1024-4.json": ({"e2e_latency": 1.0}, "unknown model"),
        "NVIDIA_L4/gpt2_large-inf-1024-4-zz9.json": ({"e2e_latency": 1.0}, "variant"),
        "NVIDIA_L4/gpt2_large-inf-1024-8.json": ("{not json", "Expecting"),
        "NVIDIA_L4/gpt2_large-inf-1024-16.json": ({"e2e_latency": -3}, "positive"),
        "NVIDIA_L4/gpt2_large-inf-1024-2.json": ({"fw_latency": 3}, "e2e_latency"),
        "Some_GPU_9000/gpt2_large-inf-1024-4.json": ({"e2e_latency": 1.0}, "unknown GPU"),
    }
    for rel, (payload, _) in bad.items():
        d, name = rel.split("/")
        write(tmp_path, d, name, payload)
    got = read_label_dir(tmp_path)
    assert got.labels["tag"].tolist() == ["gpt2_large-inf-1024-4"]
    reasons = dict(got.skipped)
    assert set(reasons) == set(bad)
    for rel, (_, fragment) in bad.items():
        assert fragment in reasons[rel], (rel, reasons[rel])


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        read_label_dir(tmp_path / "nope")


def test_shipped_labels_cover_the_data():
    got = shipped_labels()
    # 72 shipped labels; switch4 (a Switch-Base shape, not switchxl4) is a model the catalog lacks
    assert len(got.labels) == 71 and [f for f, _ in got.skipped] == ["NVIDIA_L4/switch4-inf-512-1.json"]
    counts = got.labels.groupby(["mode", "variant"]).size().to_dict()
    assert counts[("inference", "plain")] == 44 and counts[("training", "plain")] == 16
    assert counts[("inference", "fusion")] == 8
    assert {v for (m, v) in counts if m == "training"} == {"plain", "dp4", "tp4", "pp4_1"}


@pytest.mark.parametrize("variant, expected", [("plain", (None, False)), ("fusion", (None, True)),
                                               ("dp4", ("dp4", False)), ("pp4_1", ("pp4_1", False)),
                                               ("tp16", ("tp16", False))])
def test_parse_variant(variant, expected):
    assert parse_variant(variant) == expected


def test_parse_variant_rejects():
    with pytest.raises(ValueError, match="variant 'quant'"):
        parse_variant("quant")
