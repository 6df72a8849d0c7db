"""The roofline path of the kernel-forecast job, run as a user runs it."""

import subprocess
import sys

import pandas as pd
import pytest

from tilecast.paths import ROOT
from tilecast.specs import get_gpu
from tilecast.tiles.roofline import roofline_ms


def run_job(*args):
    return subprocess.run([sys.executable, str(ROOT / "jobs" / "predict_kernels.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_roofline_job_keeps_columns_and_order(tmp_path):
    rows = pd.DataFrame({"OPName": ["linear", "conv2d", "add", "bmm"], "B": [1, 1, 4, 2],
                         "M": [64, 0, 0, 8], "N": [32, 0, 0, 16], "K": [16, 0, 0, 4], "H": [0, 0, 128, 0],
                         "Device": ["NVIDIA L4"] * 4, "extra": ["a", "b", "c", "d"]})
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    rows.to_csv(src, index=False)
    proc = run_job("predictor=roofline", f"input={src}", f"output={out}", "gpu=tesla_t4")
    assert proc.returncode == 0, proc.stderr
    got = pd.read_csv(out)
    assert list(got.columns) == [*rows.columns, "pred_ms"]
    assert got["extra"].tolist() == ["a", "b", "c", "d"]
    assert got["pred_ms"].isna().tolist() == [False, True, False, False]
    known = rows.drop(index=1)
    assert got["pred_ms"].dropna().to_numpy() == pytest.approx(roofline_ms(known, get_gpu("tesla_t4")), rel=1e-9)
    assert "conv2d" in proc.stdout + proc.stderr


def test_missing_input_fails_without_output(tmp_path):
    out = tmp_path / "out.csv"
    proc = run_job("predictor=roofline", f"input={tmp_path / 'nope.csv'}", f"output={out}")
    assert proc.returncode != 0
    assert "does not exist" in proc.stderr
    assert not out.exists()
