"""``python jobs/score.py``: bad names stop the run before any work, with an error that lists known names."""

import subprocess
import sys

import pytest

from tilecast.paths import ROOT


def _score(tmp_path, *args):
    return subprocess.run([sys.executable, "jobs/score.py", "forecaster=roofline", f"output_dir={tmp_path / 'out'}",
                           f"hydra.run.dir={tmp_path / 'hydra'}", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("override, words", [
    ("matrix.gpus=[l4,rtx9090]", ["unknown GPU 'rtx9090'", "closest known", "rtx_4090"]),
    ("matrix.models=[gpt2_large,gpt7]", ["unknown model 'gpt7'", "closest known", "gpt2_large"]),
])
def test_bad_matrix_is_an_error_before_any_work(tmp_path, override, words):
    proc = _score(tmp_path, "matrix=smoke", override)
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = proc.stderr
    assert err.startswith("error: ") and "Traceback" not in err
    for w in words:
        assert w in err
    assert not (tmp_path / "out").exists()  # nothing started, nothing written


def test_unknown_matrix_name_lists_the_shipped_ones(tmp_path):
    proc = _score(tmp_path, "matrix=nightlyy")
    assert proc.returncode != 0
    assert "nightly" in proc.stderr and "smoke" in proc.stderr


def test_an_oversized_grid_is_refused_before_it_is_expanded(tmp_path):
    """21M cells used to take 5 GB just to expand, then ran silently: now refused at once, with its size."""
    proc = _score(tmp_path, "matrix=nightly", "matrix.batch_sizes=[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]",
                  "matrix.seq_lens=[128,256,384,512,640,768,896,1024,1152,1280,1408,1536,1664,1792,1920,2048]",
                  "max_cells=1000000")
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: matrix 'nightly' has ")
    assert "cells before exclusions" in err[0] and "GiB to score" in err[0] and "max_cells=1,000,000" in err[0]
    assert not (tmp_path / "out").exists()


def test_the_size_limit_is_one_default():
    from tilecast.cli import conf_defaults
    from tilecast.pipelines.score import ScoreSettings

    for job in ("score", "nightly"):
        assert conf_defaults(job)["max_cells"] == ScoreSettings.max_cells, job  # the job's schema and conf file
