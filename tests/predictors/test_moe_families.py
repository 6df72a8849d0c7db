"""The learned MoE / MLA families and the DeepEP model: training rows from the shipped tables, leave-one-GPU-out
folds that never fit the GPU they leave out, kernel forecasts of the tables' own schemas (the job included), and
the all-to-all constants as the fit of the shipped tables."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import tilecast.predictors.logo as logo
from tilecast.data import load_aiconfigurator_moe
from tilecast.forecast.a2a import A2A_CONSTANTS, a2a_ms, deepep_measured_rows, fit_a2a
from tilecast.forecast.kernels import forecast_kernels
from tilecast.paths import ROOT
from tilecast.predictors import fit_predictor, training_rows
from tilecast.specs import get_gpu
from tilecast.tiles.roofline import roofline_ms

QUICK = {"rounds": 5}
SIX = {"a100_sxm4_80gb", "b200", "b300", "gb200", "l40s", "rtx_pro_6000_server"}


@pytest.mark.parametrize("family", ["moe", "mla_prefill", "mla_decode"])
def test_training_rows_cover_the_six_public_gpus(family: str) -> None:
    rows = training_rows(family)
    assert {get_gpu(d).key for d in rows["Device"].unique()} == SIX
    assert (rows["Latency"] > 0).all() and set(rows["framework"]) <= {"sglang", "trtllm", "vllm"}


def test_logo_folds_never_fit_the_gpu_they_leave_out(monkeypatch) -> None:
    fits = []
    real = logo.fit_predictor

    def spy(name, family, rows, **params):
        fits.append(set(rows["Device"]))
        return real(name, family, rows, **params)

    monkeypatch.setattr(logo, "fit_predictor", spy)
    rows = training_rows("moe").groupby("Device").head(60).reset_index(drop=True)
    result = logo.run_logo("moe", "xgboost", QUICK, rows)
    assert set(result.mape_pct) == SIX and sum(result.rows.values()) == len(rows)  # every row scores
    for devices, gpu in zip(fits, result.mape_pct, strict=True):
        assert get_gpu(gpu).device_name not in devices and len(devices) == 5


def test_moe_and_mla_tables_are_answered_row_by_row() -> None:
    moe = load_aiconfigurator_moe("moe").groupby("system").head(2).reset_index(drop=True)
    moe.loc[0, "moe_ep_size"] = 3  # does not divide the experts
    moe.loc[1, "device"] = "NVIDIA H900"  # unknown GPU
    models = {f: fit_predictor("xgboost", f, training_rows(f).sample(400, random_state=0), **QUICK)
              for f in ("moe", "mla_prefill", "mla_decode")}

    def predict(family, rows, gpu):
        return models[family].predict_ms(rows, gpu)

    out = forecast_kernels(moe, predict).table
    assert list(out.columns) == [*moe.columns, "pred_ms", "error"]
    assert "does not divide experts" in out.loc[0, "error"] and "H900" in out.loc[1, "error"]
    ok = out["error"] == ""
    assert ok.sum() == len(moe) - 2 and (out.loc[ok, "pred_ms"] > 0).all()
    rows = moe.loc[ok]
    assert (out.loc[ok, "pred_ms"] >= roofline_ms(rows.pipe(_kernel_rows)) * (1 - 1e-9)).all()  # bounded
    for table in ("context_mla", "generation_mla"):
        mla = load_aiconfigurator_moe(table).groupby("system").head(2).reset_index(drop=True)
        got = forecast_kernels(mla, predict).table
        assert "error" not in got and (got["pred_ms"] > 0).all()


def _kernel_rows(frame: pd.DataFrame) -> pd.DataFrame:
    from tilecast.tiles.sources import kernel_rows

    return kernel_rows(frame)


def test_a2a_constants_are_the_fit_of_the_shipped_tables() -> None:
    rows = deepep_measured_rows()
    fitted = fit_a2a(rows)
    for key, c in A2A_CONSTANTS.items():
        assert fitted[key].t0_us == pytest.approx(c.t0_us, abs=0.01)
        assert fitted[key].eff == pytest.approx(c.eff, abs=0.001)
        assert fitted[key].per_sm_gbs == pytest.approx(c.per_sm_gbs, abs=0.01)
    pred = a2a_ms(rows)
    assert np.all(np.isfinite(pred)) and np.all(pred > 0)
    assert np.all(pred >= roofline_ms(rows) * (1 - 1e-9))  # never faster than the link


def test_predict_kernels_job_answers_deepep_and_moe_tables(tmp_path) -> None:
    deepep = load_aiconfigurator_moe("deepep_normal").head(3)
    moe = load_aiconfigurator_moe("moe").head(3)
    moe.loc[2, "distribution"] = "zipf"
    for name, frame in (("deepep", deepep), ("moe", moe)):
        src, out = tmp_path / f"{name}.parquet", tmp_path / f"{name}.csv"
        frame.to_parquet(src)
        proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict_kernels.py"), "predictor=roofline",
                               f"input={src}", f"output={out}"], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr
        got = pd.read_csv(out)
        assert len(got) == 3 and got["pred_ms"].iloc[:2].gt(0).all()
        if name == "deepep":
            assert got["pred_ms"].to_numpy() == pytest.approx(got["pred_dispatch_ms"] + got["pred_combine_ms"])
            assert "error" not in got
        else:
            assert np.isnan(got["pred_ms"].iloc[2]) and "unknown routing distribution 'zipf'" in got["error"].iloc[2]
