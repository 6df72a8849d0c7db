"""Issue 27 item 4: serving the forecaster from a copied store reads and writes nothing of the original:
``python jobs/serve.py`` on the copy exports the version into a private directory and serves that (a real
``mlflow models serve`` on a free loopback port); every file of the original is unchanged, byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tilecast.forecast import forecast
from tilecast.paths import ROOT
from tilecast.tiles.ops import FP32_FAMILIES
from tilecast.training.promotion import PromotionPolicy, promote

from .conftest import pointed_at
from .helpers import free_port, stop_group, trained


def _snapshot(root: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def original(tmp_path_factory, few_labels):
    root = tmp_path_factory.mktemp("serve") / "store"
    root.mkdir()
    with pointed_at(f"sqlite:///{root / 'mlflow.db'}"):
        trained(FP32_FAMILIES)  # roofline versions: the served forecast is the roofline's
        promote(FP32_FAMILIES, PromotionPolicy(require_logo=False), labels=few_labels)
    return root


def test_serving_a_copied_store_touches_nothing_of_the_original(original, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    before = _snapshot(original)
    port = free_port()
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{copy / 'mlflow.db'}", "TILECAST_HOME": str(tmp_path)}
    log = tmp_path / "serve.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, str(ROOT / "jobs" / "serve.py"), f"port={port}"], stdout=fh,
                                stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "server did not come up:\n" + log.read_text()[-3000:]
            time.sleep(0.5)
        body = json.dumps({"dataframe_records": [{"model": "gpt2_large", "gpu": "l4", "batch": 2, "seq_len": 256,
                                                  "mode": "inference"}]}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            got = json.loads(r.read())["predictions"][0]
        assert got["error"] == "" and got["e2e_ms"] == pytest.approx(
            forecast("gpt2_large", "l4", 2, 256, "inference").e2e_ms, rel=1e-6)
        assert "from a private copy" in log.read_text()
    finally:
        stop_group(proc)
    assert _snapshot(original) == before  # nothing of the original read-modified or written
    assert proc.returncode in (0, 143, -signal.SIGTERM)
