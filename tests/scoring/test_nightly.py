"""``jobs/nightly.py``: score + report in one atomic swap per date, logged to MLflow ``nightly`` (the comparison
with the previous run is the report's, tested in tests/reports/test_report_job.py)."""

import subprocess
import sys

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from tilecast.paths import ROOT
from tilecast.pipelines.nightly import run_nightly, settings_from_config
from tilecast.scoring.matrix import CELL_KEYS


@pytest.fixture
def tracking(sqlite_uri, monkeypatch):
    uri = sqlite_uri
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    yield uri
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def _settings(compose_cfg, tmp_path, uri, date):
    cfg = compose_cfg("nightly", ["matrix=smoke", "forecaster=roofline", f"date={date}", "progress=false",
                                  f"output_dir={tmp_path / 'reports'}", f"mlflow.tracking_uri={uri}",
                                  "dask.n_workers=1", "dask.processes=false"])
    return settings_from_config(cfg)


def _cli(tmp_path, uri, date):
    return subprocess.run([sys.executable, "jobs/nightly.py", "matrix=smoke", "forecaster=roofline", f"date={date}",
                           f"output_dir={tmp_path / 'reports'}", f"mlflow.tracking_uri={uri}", "dask.n_workers=1",
                           f"hydra.run.dir={tmp_path / 'hydra'}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_nightly_twice_on_a_date_gives_one_set_of_outputs(tmp_path, compose_cfg, tracking):
    first = run_nightly(_settings(compose_cfg, tmp_path, tracking, "2026-04-01"))
    proc = _cli(tmp_path, tracking, "2026-04-01")  # the README's command, same date again
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nightly 2026-04-01: 45 cells (0 failed)" in proc.stdout and "report.html" in proc.stdout
    reports = tmp_path / "reports"
    assert sorted(p.name for p in reports.iterdir() if not p.name.startswith(".")) == ["2026-04-01"]
    assert not [p for p in reports.iterdir() if p.name.startswith((".staging", ".old"))]
    run = reports / "2026-04-01"
    table = pd.read_parquet(run / "scores.parquet")
    assert len(table) == 45 and not table.duplicated(list(CELL_KEYS)).any() and set(table["dtype"]) == {"fp32", "bf16"}
    assert {"report.md", "report.html", "run.json", "pricing.csv", "tables", "plots"} <= {p.name for p in run.iterdir()}
    assert first.diff is not None and first.diff.previous is None
    client = MlflowClient(tracking)
    runs = client.search_runs([client.get_experiment_by_name("nightly").experiment_id], order_by=["start_time DESC"],
                              filter_string="params.date = '2026-04-01'")  # the session's store has other nights
    assert len(runs) == 2 and runs[1].info.run_id == first.mlflow_run_id
    second = runs[0]
    arts = {a.path for a in client.list_artifacts(second.info.run_id, "run")}
    assert {"run/scores.parquet", "run/report.html", "run/report.md", "run/tables", "run/plots"} <= arts
    assert second.data.params["matrix"] == "smoke" and second.data.metrics["cells"] == 45
    assert second.data.metrics["failed_cells"] == 0 and second.data.metrics["serve_cells"] == 9
    serve = pd.read_parquet(run / "serve_scores.parquet")  # the smoke's mixture-of-experts cell, scored and priced
    moe = serve.loc[serve["model"] == "qwen3_30b_a3b"]
    assert len(moe) == 1 and moe["error"].isna().all() and (moe["cost_per_1m_output_tokens_usd"] > 0).all()

