"""Fixtures of the scoring tests: composed configs (Hydra compose API), an in-process Dask client and a real
``dask scheduler`` + ``dask worker`` cluster on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tilecast.paths import CONF_DIR, ROOT


@pytest.fixture(scope="session")
def compose_cfg():
    """``compose_cfg(config_name, overrides)`` -> the composed config as a plain dict."""

    def run(name: str, overrides: list[str] | None = None) -> dict:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name=name, overrides=overrides or [])
        return OmegaConf.to_container(cfg, resolve=True)

    return run


@pytest.fixture(scope="session")
def sqlite_uri(tmp_path_factory) -> str:
    """One throwaway sqlite MLflow store for the session (creating one costs ~10 s of migrations)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture(scope="session")
def thread_client():
    """A real Dask client on an in-process cluster (threads): the engine without process start-up costs."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        yield client


# ---------------------------------------------------------------- a real cluster on loopback


def _dask(*args: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "warning"}
    return subprocess.Popen([sys.executable, "-m", "dask", *args], env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


@contextmanager
def _loopback_cluster(tmp: Path, n_workers: int = 2, timeout_s: float = 60.0):
    """Yield ``(address, {name: Popen})`` of a scheduler and ``n_workers`` single-thread workers (no nanny:
    killing a worker's process kills the worker); everything is stopped on exit."""
    from distributed import Client

    tmp.mkdir(parents=True, exist_ok=True)
    sched_file = tmp / "scheduler.json"
    procs = {"scheduler": _dask("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                "--scheduler-file", str(sched_file), log=tmp / "scheduler.log")}
    try:
        deadline = time.monotonic() + timeout_s
        while not sched_file.exists():
            if time.monotonic() > deadline or procs["scheduler"].poll() is not None:
                raise RuntimeError(f"dask scheduler did not start: {(tmp / 'scheduler.log').read_text()}")
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        for i in range(n_workers):
            procs[f"w{i}"] = _dask("worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                                   "--name", f"w{i}", "--memory-limit", "2GiB", "--host", "127.0.0.1",
                                   log=tmp / f"w{i}.log")
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(n_workers, timeout=timeout_s)
        yield address, procs
    finally:
        for p in reversed(list(procs.values())):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.fixture
def loopback_cluster():
    """``with loopback_cluster(tmp_dir, n_workers=2) as (address, procs)``: ``dask scheduler`` + ``dask worker``
    subprocesses on 127.0.0.1 (workers without a nanny, so killing ``procs[name]`` kills that worker)."""
    return _loopback_cluster
