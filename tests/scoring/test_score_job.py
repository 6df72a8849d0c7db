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
