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
    assert list(got.columns) == [*rows.columns, "pred_ms", "error"]
    assert got["extra"].tolist() == ["a", "b", "c", "d"]
    assert got["pred_ms"].isna().tolist() == [False, True, False, False]
    assert got["error"].fillna("").tolist() == ["", "no predictor covers op 'conv2d'", "", ""]
    known = rows.drop(index=1)
    assert got["pred_ms"].dropna().to_numpy() == pytest.approx(roofline_ms(known, get_gpu("tesla_t4")), rel=1e-9)
    assert "conv2d" in proc.stdout + proc.stderr


def test_missing_input_fails_without_output(tmp_path):
    out = tmp_path / "out.csv"
    proc = run_job("predictor=roofline", f"input={tmp_path / 'nope.csv'}", f"output={out}")
    assert proc.returncode != 0
    assert "does not exist" in proc.stderr
    assert not out.exists()


def test_every_shipped_source_schema_is_answered_row_by_row(tmp_path):
    """AIConfigurator gemm / attention / nccl and Vidur rows: each row's GPU from its own column, bad rows
    get an error, the others a forecast, in input order."""
    from tilecast.data import load_aiconfigurator, load_vidur

    gemm = load_aiconfigurator("gemm").groupby("gemm_dtype").head(3).reset_index(drop=True)
    gemm.loc[0, "device"] = "NVIDIA Nope"
    gemm.loc[1, "m"] = -4
    att = load_aiconfigurator("generation_attention").head(4)
    nccl = load_aiconfigurator("nccl").head(4)
    vidur = load_vidur("mlp").head(12)
    for name, frame in {"gemm": gemm, "att": att, "nccl": nccl, "vidur": vidur}.items():
        src, out = tmp_path / f"{name}.parquet", tmp_path / f"{name}.csv"
        frame.to_parquet(src)
        proc = run_job("predictor=roofline", f"input={src}", f"output={out}")
        assert proc.returncode == 0, proc.stderr
        got = pd.read_csv(out)
        assert list(got.columns[: len(frame.columns)]) == list(frame.columns)
        assert len(got) == len(frame)
        errors = got["error"].fillna("") if "error" in got else pd.Series("", index=got.index)
        assert (got["pred_ms"].notna() == (errors == "")).all()
        if name == "gemm":
            assert "unknown GPU 'NVIDIA Nope'" in errors[0] and "M=-4" in errors[1]
            assert got["pred_ms"][2:].gt(0).all()
        else:
            assert got["pred_ms"].notna().any()
