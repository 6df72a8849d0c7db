"""Issue 27 item 13: a sweep (``-m gpu=a,b,c``) ends with one table of its runs: what each varied, GPU, latency,
fit and cost."""

import subprocess
import sys

from tilecast.multirun import format_table
from tilecast.paths import ROOT


def test_a_predict_sweep_ends_with_one_table(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "-m", "gpu=l4,tesla_t4,a100_sxm4_80gb",
                           "model=gpt2_large", "batch=2", "seq_len=128", "forecaster=roofline",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tail = proc.stdout.split("\n3 runs:\n", 1)[1].splitlines()
    assert tail[0].split()[:3] == ["run", "model", "gpu"] and "fits" in tail[0] and "USD per 1M tokens" in tail[0]
    rows = tail[2:5]
    assert [r.split()[0] for r in rows] == ["gpu=l4", "gpu=tesla_t4", "gpu=a100_sxm4_80gb"]
    assert all("gpt2_large" in r and "True" in r for r in rows)


def test_a_run_that_does_not_fit_or_failed_shows_so():
    rec = {"model": "m", "gpu": "l4", "dtype": "fp32", "mode": "inference", "e2e_ms": 1.0, "fits": False,
           "cost_per_1m_tokens_usd": None}
    text = format_table([(["gpu=l4"], rec, ""), (["gpu=x"], None, "unknown GPU 'x'")])
    assert text.splitlines()[2].rstrip().endswith("False  -")
    assert "failed: unknown GPU 'x'" in text
