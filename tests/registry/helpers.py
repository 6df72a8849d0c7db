"""Helpers of the registry tests: run a job's ``main`` in this process on a config composed with Hydra's
compose API (as ``jobs/<name>.py`` composes it from the command line), and start / stop local servers."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
from collections.abc import Callable
from typing import Any

from hydra import compose, initialize_config_dir

from tilecast.paths import CONF_DIR, ROOT
from tilecast.training.train import TrainSpec, train


def job_main(name: str) -> Callable[[Any], Any]:
    """The function under ``@hydra.main`` of ``jobs/<name>.py`` (with the job's error handling)."""
    spec = importlib.util.spec_from_file_location(f"job_{name}", ROOT / "jobs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main.__wrapped__


def compose_job(name: str, overrides: list[str]):
    """``conf/<name>.yaml`` composed with ``overrides``."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


def run_job(name: str, capsys, overrides: list[str]) -> tuple[int, str, str]:
    """``jobs/<name>.py``'s main on a config composed with ``overrides``: (exit status, stdout, stderr)."""
    cfg = compose_job(name, overrides)
    try:
        job_main(name)(cfg)
        status = 0
    except SystemExit as exc:
        status = int(exc.code)
    out = capsys.readouterr()
    return status, out.out, out.err


def trained(families, predictor: str = "roofline", params: dict | None = None, logo: bool = False) -> dict[str, str]:
    """Train ``families`` quickly (300 rows each) into the configured store: {family: version at @challenger}."""
    spec = TrainSpec(predictor=predictor, params=params or {}, families=tuple(families), max_rows=300,
                     experiment="test-train", logo=logo)
    return {r.family: r.version for r in train(spec)}


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, timeout_s: float = 10) -> None:
    """Stop a server started with ``start_new_session=True``: SIGTERM to its group, SIGKILL after ``timeout_s``."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
