"""``python jobs/report.py``: report files of a run, replaced atomically; an unknown run lists the known ones."""

import json
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import yaml

from tilecast.cli import is_user_error
from tilecast.paths import ROOT
from tilecast.pipelines.report import run_report, settings_from_config
from tilecast.scoring.pricing import load_pricing
from tilecast.scoring.schema import conform
from tilecast.scoring.store import RunNotFoundError, RunStore


def _publish(root, date, scores, matrix="smoke"):
    pricing = load_pricing(yaml.safe_load((ROOT / "conf" / "pricing" / "default.yaml").read_text()))
    with RunStore(root).stage(date) as d:
        pq.write_table(conform(scores.assign(run_date=date)), d / "scores.parquet")
        pricing.table().to_csv(d / "pricing.csv", index=False)
        (d / "run.json").write_text(json.dumps({"date": date, "matrix": matrix, "predictor": "roofline",
                                                "fit": {"usable_fraction": 1.0, "reserve_gib": 0.5,
                                                        "optimizer": "adamw"}}))


def _report(tmp_path, *args):
    return subprocess.run([sys.executable, "jobs/report.py", f"output_dir={tmp_path}",
                           f"hydra.run.dir={tmp_path / '.hydra'}", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_report_of_the_latest_run_with_comparison(tmp_path, smoke_scores, report_cfg):
    _publish(tmp_path, "2026-01-01", smoke_scores)
    later = smoke_scores.copy()
    later.loc[later["error"].isna(), "e2e_ms"] *= 1.10
    _publish(tmp_path, "2026-01-02", later)
    proc = _report(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "report: " in proc.stdout
    run = tmp_path / "2026-01-02"
    md = (run / "report.md").read_text()
    for heading in ("## Latency per model x GPU x batch", "## Cheapest GPU per workload", "## Cost per 1M tokens",
                    "## Fleet totals", "## Plots", "## Memory model vs measured runs", "## Changes since 2026-01-01",
                    "## Failed cells", "## Prices"):
        assert heading in md
    assert "45 moved by more than 5%" in md
    assert "| model | dtype | seq_len | batch |" in md  # every latency / cost table has a dtype column
    assert "| workload | model | dtype | mode |" in md and "dtypes fp32, bf16;" in md
    assert re.search(r"<th[^>]*>dtype</th>", (run / "report.html").read_text())
    # the default questions ask about models this run did not score: each row says so, the page stands
    assert md.count("the run scored no serve cells") == 8 and md.count("the run scored no training runs") == 4
    assert not list((run / "plots").glob("*.png"))  # no plan answered: no plans figure
    html = (run / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 0 and "id='explorer-data'" in html
    assert (run / "tables" / "diff_moved.csv").exists() and (run / "scores.parquet").exists()
    # a rerun (in process here) replaces the report, nothing else appears
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    settings, fleet = settings_from_config(report_cfg)
    result = run_report(tmp_path, "2026-01-02", settings, fleet)
    assert result.markdown == run / "report.md" and result.diff.previous == "2026-01-01"
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["2026-01-01", "2026-01-02"]


def test_unknown_run_lists_the_runs(tmp_path, smoke_scores, report_cfg):
    _publish(tmp_path, "2026-01-01", smoke_scores)
    settings, fleet = settings_from_config(report_cfg)
    with pytest.raises(RunNotFoundError, match=r"no run dated 2025-12-31 .*; runs: 2026-01-01"):
        run_report(tmp_path, "2025-12-31", settings, fleet)
    assert is_user_error(RunNotFoundError("x"))  # the job prints it and exits 2, as for a bad matrix


def test_the_report_settings_are_one_set_of_defaults():
    """conf/report.yaml, the nightly's report node and ReportSettings agree (the README's tables describe one
    report, whichever job writes it)."""
    from omegaconf import OmegaConf

    from tilecast.paths import CONF_DIR
    from tilecast.reports.build import ReportSettings

    report, nightly = OmegaConf.load(CONF_DIR / "report.yaml"), OmegaConf.load(CONF_DIR / "nightly.yaml").report
    assert report.max_rows == nightly.max_rows == ReportSettings.max_rows
    assert dict(report.latency_targets_ms) == dict(nightly.latency_targets_ms) == dict(ReportSettings().targets_ms)
