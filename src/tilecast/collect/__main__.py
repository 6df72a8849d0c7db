"""``python -m tilecast.collect key=value ...``: the collect job without Hydra (same conf/collect.yaml).

For GPU machines whose Python lacks hydra-core. Values are read as YAML (``ops=[bmm,linear]``,
``budget_s=60``, ``limit=null``); unknown keys are refused.
"""

from __future__ import annotations

import json
import logging
import sys

import yaml

from tilecast.collect.errors import CollectError
from tilecast.collect.job import KEYS, run
from tilecast.paths import CONF_DIR


def parse_args(argv: list[str]) -> dict[str, object]:
    """conf/collect.yaml defaults updated with ``key=value`` arguments."""
    cfg = {k: v for k, v in yaml.safe_load((CONF_DIR / "collect.yaml").read_text()).items()
           if k not in ("hydra", "defaults")}
    cfg["model"] = None  # a config group under Hydra; a plain catalog key here
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in KEYS:
            raise CollectError(f"bad argument {arg!r}: expected key=value with key in {', '.join(sorted(KEYS))}")
        cfg[key] = yaml.safe_load(value) if value != "" else None
    return cfg


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        result = run(parse_args(argv))
    except (ValueError, KeyError) as exc:  # CollectError, unknown model (UnknownSpecError), bad plan
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result.pop("text", None)
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
