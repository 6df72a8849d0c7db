"""Serve the forecaster over HTTP: ``python jobs/serve.py [alias=champion] [port=5001]`` (see conf/serve.yaml).

Exports ``tilecast-forecaster@<alias>`` from the store into a private directory and runs ``mlflow models serve`` on
that copy: the server reads nothing else of the store and never writes into it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import hydra
from omegaconf import DictConfig

from tilecast.cli import int_setting, user_errors, with_catalog_args


@hydra.main(version_base="1.3", config_path="../conf", config_name="serve")
@user_errors()
def main(cfg: DictConfig) -> None:
    """Check the settings, open the store (a copy is rebased), export the version, serve it until stopped."""
    port, workers = int_setting(cfg, "port"), int_setting(cfg, "workers")
    from tilecast.registry.forecaster import export_forecaster
    from tilecast.registry.tracking import configure

    uri = configure(cfg.mlflow.tracking_uri, timeout_s=cfg.mlflow.get("connect_timeout_s"))
    with tempfile.TemporaryDirectory(prefix="tilecast-serve-") as tmp:
        directory, version = export_forecaster(str(cfg.alias), Path(tmp))
        cmd = [sys.executable, "-m", "mlflow", "models", "serve", "-m", str(directory), "--env-manager", "local",
               "-h", str(cfg.host), "-p", str(port), "-w", str(workers)]
        print(f"serving tilecast-forecaster v{version} (@{cfg.alias}) of {uri} from a private copy {directory}: "
              f"POST http://{cfg.host}:{port}/invocations", flush=True)
        if cfg.dry_run:
            print(" ".join(cmd))
            return
        raise SystemExit(subprocess.run(cmd, check=False).returncode)


if __name__ == "__main__":
    with_catalog_args(main)()
