"""Measure a GPU or the CPU: ``python jobs/collect.py what=kernels|e2e|spec device=cuda|cpu ...``.

Options and defaults: conf/collect.yaml. Without Hydra: ``python -m tilecast.collect`` (same options).
"""

from __future__ import annotations

import json
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from tilecast.cli import with_catalog_args
from tilecast.collect import run


@hydra.main(version_base="1.3", config_path="../conf", config_name="collect")
def main(cfg: DictConfig) -> None:
    try:
        result = run(OmegaConf.to_container(cfg, resolve=True))
    except (ValueError, KeyError) as exc:  # bad input: one line naming the value, exit 2
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    result.pop("text", None)
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    with_catalog_args(main)()
