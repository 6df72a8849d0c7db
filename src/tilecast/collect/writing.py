"""Whole-file writes that never leave half a file: write a temp file beside the target, then rename."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (readers see the old file or the whole new one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
