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
