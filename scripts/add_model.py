#!/usr/bin/env python3
"""Add a model to the catalog from its Hugging Face config.json:

    python scripts/add_model.py path/to/config.json --key deepseek_v3 --alias deepseek-ai/DeepSeek-V3 \
        --variant nvidia/DeepSeek-V3-NVFP4=fp4 --source https://huggingface.co/deepseek-ai/DeepSeek-V3 \
        [--note "one line about the model"] [--check-variant path/to/variant_config.json ...]

writes conf/model/<key>.yaml (the config verbatim; family from config.architectures). ``--check-variant`` reads a
quantised variant's own config and refuses when its architecture differs from the release's (a variant only sets
the dtype). Exits 2 with one ``error:`` line on a config tilecast cannot read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tilecast.paths import CONF_DIR
from tilecast.specs import SpecError
from tilecast.specs.model import config_fields
from tilecast.specs.model_file import family_of_config, model_file_text


def _architecture_fields(config: dict) -> dict:
    fields = config_fields(family_of_config(config), config, "config")
    fields.pop("quantization", None)
    return fields


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path)
    parser.add_argument("--key", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--alias", action="append", default=[])
    parser.add_argument("--variant", action="append", default=[], help="<Hugging Face id>=<fp8|fp4>")
    parser.add_argument("--check-variant", action="append", default=[], type=Path)
    parser.add_argument("--note", default="")
    parser.add_argument("--conf-dir", type=Path, default=CONF_DIR)
    args = parser.parse_args(argv)
    try:
        config = json.loads(args.config.read_text())
        variants = dict(v.split("=", 1) for v in args.variant)
        release = _architecture_fields(config)
        for path in args.check_variant:
            other = _architecture_fields(json.loads(path.read_text()))
            diff = sorted(k for k in release if release[k] != other.get(k))
            if diff:
                raise SpecError(f"{path}: architecture differs from {args.config} in {', '.join(diff)}")
        text = model_file_text(config, args.key, args.source, args.alias, variants, args.note)
    except (SpecError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.conf_dir / "model" / f"{args.key}.yaml"
    out.write_text(text)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
