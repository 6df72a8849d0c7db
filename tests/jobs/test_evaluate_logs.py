"""``jobs/evaluate.py`` on a label folder with many files it cannot use: one log line per reason, with the count,
not one line (and one copy of the GPU catalog) per file."""

import json
import os
import subprocess
import sys

from tilecast.evaluation.labels import read_label_dir, skipped_groups, skipped_lines
from tilecast.paths import ROOT


def label_folder(root, unknown_gpu_files=6, misnamed_csvs=4):
    (root / "NVIDIA_L4").mkdir(parents=True)
    (root / "Foo_GPU").mkdir()
    (root / "NVIDIA_L4" / "gpt2_large-inf-1024-4.json").write_text(json.dumps({"e2e_latency": 1276.3}))
    (root / "NVIDIA_L4" / "gpt9-inf-1024-4.json").write_text(json.dumps({"e2e_latency": 1.0}))
    for i in range(unknown_gpu_files):  # a device the catalog lacks: its labels and per-node files
        (root / "Foo_GPU" / f"gpt2_large-inf-1024-{i + 1}.json").write_text(json.dumps({"e2e_latency": 10.0}))
        (root / "Foo_GPU" / f"gpt2_large-inf-1024-{i + 1}.csv").write_text("Name,fw_latency\nx,1\n")
    for i in range(misnamed_csvs):  # per-node files named unlike a label
        (root / "NVIDIA_L4" / f"node{i}.csv").write_text("Name,fw_latency\nx,1\n")
    return root


def test_skipped_files_group_by_reason(tmp_path):
    labels = read_label_dir(label_folder(tmp_path))
    assert len(labels.skipped) == 1 + 12 + 4 and len(labels.labels) == 1
    groups = skipped_groups(labels.skipped)
    assert [len(g.files) for g in groups] == [12, 1, 4]
    foo, gpt9, nodes = groups
    assert foo.reason.startswith("device directory 'Foo_GPU': unknown GPU 'Foo_GPU'")
    assert {f.split("/")[0] for f in foo.files} == {"Foo_GPU"} and {f[-4:] for f in foo.files} == {"json", ".csv"}
    assert "unknown model 'gpt9'" in gpt9.reason
    assert nodes.reason.startswith("name '<name>' does not match")
    lines = skipped_lines(labels.skipped)
    assert lines[0].startswith("skipped 12 label files (Foo_GPU/gpt2_large-inf-1024-1.json, ") and \
        ", ... and 9 more): device directory 'Foo_GPU'" in lines[0]
    assert lines[1].startswith("skipped 1 label file (NVIDIA_L4/gpt9-inf-1024-4.json): unknown model 'gpt9'")
    assert lines[2] == ("skipped 4 label files (NVIDIA_L4/node0.csv, NVIDIA_L4/node1.csv, NVIDIA_L4/node2.csv, "
                        "... and 1 more): name '<name>' does not match <model>-<inf|train>-<seq>-<batch>[-<variant>]")


def test_the_job_logs_one_line_per_reason(tmp_path):
    root = label_folder(tmp_path / "labels", unknown_gpu_files=40, misnamed_csvs=30)
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}", TILECAST_HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "evaluate.py"), f"labels_dir={root}",
                           "forecaster=roofline", "calibrate=false", "perop=false", f"output={tmp_path / 'e.csv'}"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout + proc.stderr
    skipped = [line for line in text.splitlines() if "skipped" in line and "label file" in line]
    assert len(skipped) == 3, skipped
    assert "skipped 80 label files" in skipped[0] and "skipped 30 label files" in skipped[2]
    assert text.count("unknown GPU 'Foo_GPU'") == 1  # the GPU catalog once, for the one unknown device directory
    assert "1 labels (111 skipped)" in proc.stdout
    assert len(text.splitlines()) < 25
