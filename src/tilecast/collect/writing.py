"""Whole-file writes that never leave half a file (:mod:`tilecast.atomic`), and flushed appends."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tilecast.atomic import write_text_atomic


def write_json_atomic(path: Path, data: Any) -> Path:
    """``data`` as indented JSON (4 spaces, like the shipped label files), atomically."""
    return write_text_atomic(path, json.dumps(data, indent=4) + "\n")


def append_jsonl(path: Path, record: Any) -> None:
    """Append one JSON line and flush it to disk."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(record, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
