"""Scoring on a real ``dask scheduler`` + ``dask worker`` cluster started on loopback by the test."""

import json
import subprocess
import sys
import threading
import time

import pandas as pd
from distributed import Client

from tilecast.paths import ROOT
from tilecast.pipelines.score import ScoreSettings, run_score
from tilecast.scoring.cluster import DaskConfig


def test_smoke_matrix_through_the_score_job(tmp_path, loopback_cluster):
    with loopback_cluster(tmp_path / "cluster") as (address, _):
        out = tmp_path / "reports"
        proc = subprocess.run([sys.executable, "jobs/score.py", "matrix=smoke", f"dask.address={address}",
                               "forecaster=roofline", f"output_dir={out}", "date=2026-03-01",
                               f"hydra.run.dir={tmp_path / 'hydra'}"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = out / "2026-03-01"
    table = pd.read_parquet(run / "scores.parquet")
    assert len(table) == 45 and table["error"].isna().all() and (table["dtype"] == "bf16").sum() == 6  # scores whole
    serve = pd.read_parquet(run / "serve_scores.parquet")
    # llama31_8b's 8 cells and the one mixture-of-experts cell (Qwen3-30B-A3B, fp8, H100)
    assert len(serve) == 9 and serve["error"].isna().sum() == 9 and serve["ttft_ms"].gt(0).all()
    meta = json.loads((run / "run.json").read_text())
    assert meta["dask"] == {"address": address} and meta["matrix"] == "smoke" and meta["dtypes"] == ["fp32", "bf16"]
    assert "45 cells (0 failed), 9 serve cells (0 failed)" in proc.stdout


def test_a_worker_killed_mid_run_still_gives_every_cell(tmp_path, compose_cfg, loopback_cluster):
    cfg = compose_cfg("score", ["matrix=smoke"])
    matrix = {**cfg["matrix"], "name": "kill", "models": ["gpt2_large", "gpt2_med", "gpt2_xl", "bert_large"],
              "batch_sizes": [4, 8, 16], "parallel": ["none", "dp4"], "dtypes": ["fp32"], "exclude": [
                  {"mode": "training", "fused": True}, {"mode": "inference", "parallel": "dp4"}]}
    killed = {}
    with loopback_cluster(tmp_path / "cluster") as (address, procs):
        def killer() -> None:  # kill the first worker seen running a task
            with Client(address, timeout="30s") as c:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    busy = {addr: tasks for addr, tasks in c.processing().items() if tasks}
                    if busy:
                        addr = next(iter(busy))
                        name = c.scheduler_info()["workers"][addr]["name"]
                        procs[name].kill()
                        killed["name"], killed["tasks"] = name, busy[addr]
                        return
                    time.sleep(0.02)

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        run = run_score(ScoreSettings(matrix=matrix, pricing=cfg["pricing"], predictor="roofline",
                                      dask=DaskConfig(address=address, chunk_rows=30, retries=2),
                                      output_dir=tmp_path / "reports", date="2026-03-02", progress=False))
        t.join(timeout=5)
        with Client(address, timeout="30s") as c:
            alive = [w["name"] for w in c.scheduler_info()["workers"].values()]
    assert killed, "no worker was killed: the run finished before any task was seen running"
    assert killed["name"] not in alive and len(alive) == 1
    table = pd.read_parquet(tmp_path / "reports" / "2026-03-02" / "scores.parquet")
    assert len(table) == run.stats.cells == 4 * 3 * 3 * 4  # models x GPUs x batches x (inf, fused, train, dp4)
    assert table["error"].isna().all()


def _http_sockets(dask_scheduler) -> list[str]:
    return [s.getsockname()[0] for s in dask_scheduler.http_server._sockets.values()]


def test_the_default_local_cluster_listens_on_loopback_only():
    """No scheduler, worker or HTTP (dashboard) socket of the default LocalCluster listens beyond 127.0.0.1."""
    from urllib.parse import urlparse

    from tilecast.scoring.cluster import DaskConfig, dask_client

    with dask_client(DaskConfig(n_workers=1, memory_limit="1GiB")) as client:  # the default: worker processes
        info = client.scheduler_info()
        hosts = {urlparse(info["address"]).hostname} | {urlparse(w).hostname for w in info["workers"]}
        assert hosts == {"127.0.0.1"}
        assert set(client.run_on_scheduler(_http_sockets)) == {"127.0.0.1"}  # was 0.0.0.0
