"""The report job on a run with a serve table (``serve_scores.parquet`` beside ``scores.parquet``): the serve
section, its change since the previous run, and a bad ``serve`` config refused with a named error."""

import pyarrow.parquet as pq

from tests.reports.test_report_job import _publish, _report
from tilecast.pipelines.report import run_report, settings_from_config
from tilecast.pipelines.score import SERVE_SCORES
from tilecast.scoring.schema import conform_serve


def test_report_of_a_run_with_serve_cells(tmp_path, smoke_scores, serve_scores, report_cfg):
    _publish(tmp_path, "2026-01-01", smoke_scores)
    pq.write_table(conform_serve(serve_scores), tmp_path / "2026-01-01" / SERVE_SCORES)
    _publish(tmp_path, "2026-01-02", smoke_scores)
    faster = serve_scores.assign(tpot_ms=serve_scores["tpot_ms"] * 0.5, ttft_ms=serve_scores["ttft_ms"] * 0.5)
    pq.write_table(conform_serve(faster), tmp_path / "2026-01-02" / SERVE_SCORES)
    settings, fleet = settings_from_config({**report_cfg, "serve": {"tpot_target_ms": 25, "ttft_target_ms": None,
                                                                    "pareto": []}})
    assert settings.serve.tpot_ms == 25.0
    result = run_report(tmp_path, "latest", settings, fleet)
    md = result.markdown.read_text()
    assert "## Serving: the cheapest GPU per serve workload" in md and "TPOT <= 25 ms (40 tokens/s per user)" in md
    assert md.index("## Plots") < md.index("## Serving: the cheapest") < md.index("## Serving: cost per 1M output")
    assert "## Serving: largest concurrency that fits" in md and "## Serving: failed cells" not in md  # fp8 on an
    # A100 is not supported, not failed
    assert "36 serve cells (33 forecast, 3 not supported on their GPU, 0 failed)" in md
    rows = [line for line in md.splitlines() if line.startswith("| llama31_8b |")]
    assert rows and any("was " in r or "TPOT -50%" in r for r in rows)  # tonight's TPOT halved: said per row
    assert "serving: tokens/s per GPU vs per user" in (result.path / "tables" / "chart.json").read_text()
    assert (result.path / "tables" / "serve_recommendations.csv").exists()


def test_a_bad_serve_target_exits_2_naming_it(tmp_path, smoke_scores):
    _publish(tmp_path, "2026-01-01", smoke_scores)
    proc = _report(tmp_path, "serve.tpot_target_ms=-5")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == ("error: serve.tpot_target_ms has invalid value -5 (expected a "
                                                    "positive number of ms)")
