"""Issue 27 item 5: a broken previous run (a truncated ``scores.parquet``) is reported and skipped; tonight's
report is written and compared with the last readable run."""

from tests.reports.test_report_job import _publish
from tilecast.pipelines.report import run_report, settings_from_config


def test_a_truncated_previous_run_is_skipped_and_named(tmp_path, smoke_scores, report_cfg):
    _publish(tmp_path, "2026-01-01", smoke_scores)
    _publish(tmp_path, "2026-01-02", smoke_scores)
    broken = tmp_path / "2026-01-02" / "scores.parquet"
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 2])  # a copy cut short
    later = smoke_scores.copy()
    later.loc[later["error"].isna(), "e2e_ms"] *= 1.10
    _publish(tmp_path, "2026-01-03", later)
    settings, fleet = settings_from_config(report_cfg)
    result = run_report(tmp_path, "2026-01-03", settings, fleet)
    assert result.diff.previous == "2026-01-01"
    assert len(result.diff.skipped) == 1 and result.diff.skipped[0].startswith("2026-01-02: ")
    assert "scores.parquet" in result.diff.skipped[0]
    md = result.markdown.read_text()
    assert "## Changes since 2026-01-01" in md
    assert "2026-01-02 skipped" in md and "45 moved by more than 5%" in md


def test_no_readable_previous_run_still_reports(tmp_path, smoke_scores, report_cfg):
    _publish(tmp_path, "2026-01-01", smoke_scores)
    (tmp_path / "2026-01-01" / "scores.parquet").write_bytes(b"PAR1 not really")
    _publish(tmp_path, "2026-01-02", smoke_scores)
    settings, fleet = settings_from_config(report_cfg)
    result = run_report(tmp_path, "2026-01-02", settings, fleet)
    assert result.diff.previous is None and result.diff.skipped[0].startswith("2026-01-01: ")
    assert "2026-01-01 skipped" in result.markdown.read_text()
