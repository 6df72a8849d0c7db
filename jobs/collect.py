"""Measure a GPU or the CPU: ``python jobs/collect.py what=kernels|e2e|spec device=cuda|cpu ...``.

Options and defaults: conf/collect.yaml. Without Hydra: ``python -m tilecast.collect`` (same options).
"""

from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import output_directory, user_errors, with_catalog_args


@hydra.main(version_base="1.3", config_path="../conf", config_name="collect")
@user_errors(KeyError)  # collect names a bad key in a KeyError
def main(cfg: DictConfig) -> None:
    """Check the settings first (exit 2 naming a bad one), then measure (torch is imported only here)."""
    if cfg.output_dir:
        output_directory(cfg.output_dir)
    from tilecast.collect import run

    result = run(OmegaConf.to_container(cfg, resolve=True))
    result.pop("text", None)
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    with_catalog_args(main)()
