"""Kernel rows that name their serving engine (AIConfigurator's engine tables) are answered as it runs them."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tilecast.data import load_aiconfigurator_engines
from tilecast.forecast.kernels import forecast_kernels
from tilecast.paths import ROOT
from tilecast.serving.engine_allreduce import engine_comm
from tilecast.serving.engine_kernels import engine_log_factors
from tilecast.specs import get_gpu
from tilecast.tiles.roofline import roofline_ms
from tilecast.tiles.sources import kernel_rows


def roofline(family, rows, gpu):
    return roofline_ms(rows, gpu)


def test_custom_allreduce_rows_are_priced_by_their_engine_kernel():
    table = load_aiconfigurator_engines("custom_allreduce")
    rows = table.groupby(["system", "kernel_source"]).head(2).sample(frac=1.0, random_state=1)
    got = forecast_kernels(rows, roofline).table
    assert list(got.index) == list(rows.index) and "error" not in got
    for (_, row), pred in zip(rows.iterrows(), got["pred_ms"], strict=True):
        engine = row["framework"]
        mode = "eager" if row["kernel_source"].endswith("eager") else "graph"
        want = engine_comm(engine, row["version"], mode).allreduce_ms(
            np.array([2.0 * row["message_size"]]), get_gpu(row["system"]), row["num_gpus"])[0]
        assert pred == pytest.approx(want)


def test_engine_gemm_rows_scale_the_predictor_and_bad_versions_are_named_per_row():
    gemm = load_aiconfigurator_engines("gemm_engines")
    rows = gemm[gemm["system"] == "b200_sxm"].groupby(["framework", "gemm_dtype"]).head(2).reset_index(drop=True)
    rows.loc[0, "version"] = "0.1.0"
    got = forecast_kernels(rows, roofline).table
    assert got.loc[0, "error"].startswith("sglang 0.1.0 is outside the measured releases' span")
    assert np.isnan(got.loc[0, "pred_ms"])
    ok = got.iloc[1:]
    assert (ok["error"] == "").all() and ok["pred_ms"].gt(0).all()
    krows = kernel_rows(rows.iloc[1:])
    assert set(krows["dtype"]) <= {"bfloat16", "fp8"} and (krows["fp8_scaling"] == "block").any()
    b200 = get_gpu("b200")
    for (engine, scaling), idx in krows.groupby(["engine", "fp8_scaling"]).groups.items():
        part = krows.loc[idx]
        factor = np.exp(engine_log_factors(engine, "tc_gemm", part, b200, fp8_scaling=scaling))
        assert ok.loc[idx, "pred_ms"].to_numpy() == pytest.approx(roofline_ms(part, b200) * factor)


def test_predict_kernels_job_answers_custom_allreduce_rows(tmp_path):
    rows = load_aiconfigurator_engines("custom_allreduce").groupby("kernel_source").head(3)
    src, out = tmp_path / "ar.parquet", tmp_path / "ar.csv"
    rows.to_parquet(src)
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict_kernels.py"), "predictor=roofline",
                           f"input={src}", f"output={out}"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = pd.read_csv(out)
    assert len(got) == len(rows) and got["pred_ms"].gt(0).all()
    assert got["kernel_source"].tolist() == rows["kernel_source"].tolist()
