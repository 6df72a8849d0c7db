"""Date-partitioned outputs: a rerun replaces a date whole, a failure leaves the previous outputs intact."""

import os

import pytest

from tilecast.scoring.store import RunNotFoundError, RunStore, run_date


def _write(store, date, text, fail=False, from_existing=False):
    with store.stage(date, from_existing=from_existing) as d:
        (d / "scores.txt").write_text(text)
        if fail:
            raise RuntimeError("half way")


def test_rerun_replaces_the_date_and_leaves_nothing_behind(tmp_path):
    store = RunStore(tmp_path)
    _write(store, "2026-01-01", "first")
    _write(store, "2026-01-01", "second")
    assert store.dates() == ["2026-01-01"]
    assert (tmp_path / "2026-01-01" / "scores.txt").read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "2026-01-01"]
    mode = (tmp_path / "2026-01-01" / "scores.txt").stat().st_mode & 0o777
    assert mode & 0o044  # readable by others as ordinary files are (umask permitting)


def test_a_failed_run_keeps_the_previous_outputs(tmp_path):
    store = RunStore(tmp_path)
    _write(store, "2026-01-01", "good")
    with pytest.raises(RuntimeError):
        _write(store, "2026-01-01", "bad", fail=True)
    assert (tmp_path / "2026-01-01" / "scores.txt").read_text() == "good"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".staging")] == []


def test_adding_to_a_run_hard_links_its_files(tmp_path):
    store = RunStore(tmp_path)
    _write(store, "2026-01-01", "scores")
    with store.stage("2026-01-01", from_existing=True) as d:
        (d / "report.md").write_text("report")
    run = tmp_path / "2026-01-01"
    assert (run / "scores.txt").read_text() == "scores" and (run / "report.md").read_text() == "report"


def test_resolve_latest_previous_and_errors(tmp_path):
    store = RunStore(tmp_path)
    with pytest.raises(RunNotFoundError, match="no runs under"):
        store.resolve("latest")
    for d in ("2026-01-03", "2026-01-01"):
        _write(store, d, d)
    (tmp_path / ".staging-2026-01-09-abc").mkdir()
    assert store.dates() == ["2026-01-01", "2026-01-03"]
    assert store.resolve("latest").name == "2026-01-03" and store.resolve("2026-01-01").name == "2026-01-01"
    assert store.previous("2026-01-03") == "2026-01-01" and store.previous("2026-01-01") is None
    with pytest.raises(RunNotFoundError, match="runs: 2026-01-01, 2026-01-03"):
        store.resolve("2026-01-02")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        store.resolve("yesterday")


def test_run_date():
    assert run_date("2026-02-28") == "2026-02-28"
    assert len(run_date()) == 10
    with pytest.raises(ValueError):
        run_date("2026-02-30")
    assert os.path.sep not in run_date(None)
