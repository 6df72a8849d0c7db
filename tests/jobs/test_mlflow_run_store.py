"""Issue 27 item 1: ``mlflow run . -e predict --env-manager local -P overrides="..."``, exactly as the README shows
it (no ``MLFLOW_TRACKING_URI`` set, run from the repository root), finds the store the main job made
(``mlruns/mlflow.db``) and leaves no second, empty store behind. Run in a copy of the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from mlflow import MlflowClient

from tests.registry.conftest import pointed_at
from tests.registry.helpers import trained
from tilecast.paths import ROOT
from tilecast.tiles.ops import FP32_FAMILIES


def _copy_repo(dst: Path) -> Path:
    """The files a job needs, copied (code, configs, the MLproject, the root ``mlflow.db`` link); data linked."""
    for name in ("src", "jobs", "conf"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("MLproject", "pyproject.toml"):
        shutil.copy2(ROOT / name, dst / name)
    (dst / "data").symlink_to(ROOT / "data")
    (dst / "mlruns").mkdir()
    os.symlink(os.readlink(ROOT / "mlflow.db"), dst / "mlflow.db")  # the repository's link, as git checks it out
    return dst


def test_mlflow_run_finds_the_store_the_main_job_made(tmp_path):
    repo = _copy_repo(tmp_path / "repo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(PYTHONPATH=str(repo / "src"), TILECAST_HOME=str(tmp_path / "home"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    store = repo / "mlruns" / "mlflow.db"
    with pointed_at(f"sqlite:///{store}"):  # the main job's store (roofline versions: seconds, in this process)
        trained(FP32_FAMILIES)
    overrides = "model=gpt2_large gpu=l4 batch=4 seq_len=1024 mode=inference"
    proc = subprocess.run([sys.executable, "-m", "mlflow", "run", ".", "-e", "predict", "--env-manager", "local", "-P",
                           f"overrides={overrides}"], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "models: bmm v1" in proc.stdout  # the registered versions of the main store answered
    assert (repo / "mlflow.db").is_symlink() and not [p.name for p in repo.glob("*.db") if not p.is_symlink()]
    client = MlflowClient(f"sqlite:///{store}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    project = [r for r in runs if r.data.params.get("overrides")]
    assert len(project) == 1 and project[0].info.status == "FINISHED"  # `mlflow run`'s own run: the same store
