"""The graph job as a user runs it, and its config through Hydra's compose API."""

import subprocess
import sys

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from tilecast.graph import build_graph
from tilecast.paths import CONF_DIR, ROOT

REQUIRED = ["phase", "kind", "op", "b", "m", "n", "k", "h", "count", "flops", "bytes"]


def run_job(*args):
    return subprocess.run([sys.executable, str(ROOT / "jobs" / "graph.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_config_composes_with_a_catalog_model():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("graph", overrides=["model=opt_13", "batch=2", "seq_len=2048", "mode=training"])
    assert cfg.model.key == "opt_13" and cfg.batch == 2 and cfg.mode == "training"
    assert cfg.output is None and cfg.fused is False and cfg.dtype == "fp32"


def test_job_prints_summary_and_writes_one_row_per_distinct_op(tmp_path):
    out = tmp_path / "ops.csv"
    proc = run_job("model=gpt2_large", "batch=4", "seq_len=1024", "mode=training", f"output={out}")
    assert proc.returncode == 0, proc.stderr
    for needle in ("gpt2_large batch=4 seq_len=1024 training", "linear", "bmm", "total:", "GFLOP", "GB moved",
                   "memory (fp32): params 3.10 GB"):
        assert needle in proc.stdout
    rows = pd.read_csv(out)
    assert list(rows.columns[: len(REQUIRED)]) == REQUIRED
    assert set(rows["phase"]) == {"fw", "bw", "acc"}
    graph = build_graph("gpt2_large", 4, 1024, "training")
    assert len(rows) == len(graph)
    assert (rows["count"] * rows["flops"]).sum() == pytest.approx(graph.total_flops(), rel=1e-12)
    assert not rows.duplicated(["phase", "kind", "op", "b", "m", "n", "k", "h", "section", "mem_per_o",
                                "ops_per_o"]).any()


@pytest.mark.parametrize(("args", "needle"), [
    (["model=gpt2_lrge", "batch=1", "seq_len=8"], "gpt2_large"),
    (["model=gpt2_large", "batch=0", "seq_len=8"], "batch=0: must be between 1 and"),
    (["model=gpt2_large", "batch=1", "seq_len=-4"], "seq_len=-4: must be between 1 and"),
    (["model=gpt2_large", "batch=1", "seq_len=2048"], "seq_len=2048 exceeds gpt2_large's 1024 positions"),
    (["model=gpt2_large", "batch=1", "seq_len=8", "mode=train"], "'train'"),
])
def test_bad_input_is_named_and_nothing_is_written(tmp_path, args, needle):
    out = tmp_path / "ops.csv"
    proc = run_job(*args, f"output={out}")
    assert proc.returncode != 0
    assert needle in proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
