"""Append-only, resumable CSV tables in the shipped kernel schema.

Each measured shape is one line, written and flushed as soon as it is measured, so an interrupted
collection keeps every finished shape. Reopening skips shapes already present; a half-written
last line (the process died mid-write) is cut off. Rows of another device or a different header
are refused rather than mixed in.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tilecast.collect.errors import CollectError
from tilecast.collect.kernel_ops import GEMM_DIMS, KernelOp

#: leading columns of every shipped kernel table (kernels/test/*.csv), in order
BASE_COLUMNS = ("OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name", "Warps per SM",
                "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z", "CUDA Version")
#: columns the collector adds after the shipped ones
EXTRA_COLUMNS = ("dtype", "driver")


def table_columns(op: KernelOp) -> tuple[str, ...]:
    """Columns of ``op``'s table: as ``kernels/test/<table>.csv`` (GEMM: + Kernels; vector: + large), + extras."""
    if op.dims == GEMM_DIMS:
        return BASE_COLUMNS + ("Kernels",) + GEMM_DIMS + EXTRA_COLUMNS
    return BASE_COLUMNS + op.dims + ("large",) + EXTRA_COLUMNS


def row_key(op_name: str, dtype: str, shape: Iterable[int]) -> tuple[str, ...]:
    """Identity of a measured shape: op, dtype, dims."""
    return (op_name, dtype, *(str(int(d)) for d in shape))


def _repair_tail(path: Path) -> None:
    """Cut a last line that was not finished (no trailing newline)."""
    with path.open("rb+") as fh:
        data = fh.read()
        if not data or data.endswith(b"\n"):
            return
        fh.truncate(data.rfind(b"\n") + 1)


class AppendOnlyTable:
    """One kernel table file; ``append`` writes and flushes a row, ``done`` tells what is there."""

    def __init__(self, path: Path, columns: Sequence[str], dims: Sequence[str], device: str) -> None:
        self.path, self.columns, self.dims, self.device = Path(path), tuple(columns), tuple(dims), device
        self.skipped_path = self.path.with_name(self.path.stem + ".skipped.jsonl")
        self._done: set[tuple[str, ...]] = set()
        self.existing_rows = 0
        self._read_existing()

    def _read_existing(self) -> None:
        if self.path.exists() and self.path.stat().st_size:
            _repair_tail(self.path)
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open(newline="") as fh:
                reader = csv.DictReader(fh)
                if tuple(reader.fieldnames or ()) != self.columns:
                    raise CollectError(f"{self.path}: existing columns {reader.fieldnames} differ from the "
                                       f"collector's {list(self.columns)}; write to another output_dir")
                for row in reader:
                    if row["Device"] != self.device:
                        raise CollectError(f"{self.path}: holds rows of device {row['Device']!r}, this run "
                                           f"measures {self.device!r}; write to another output_dir")
                    self._done.add(row_key(row["OPName"], row["dtype"], (row[d] for d in self.dims)))
                    self.existing_rows += 1
        if self.skipped_path.exists():
            for line in self.skipped_path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a half-written last line
                self._done.add(row_key(rec["OPName"], rec["dtype"], rec["shape"]))

    def done(self, op_name: str, dtype: str, shape: Iterable[int]) -> bool:
        """True when this shape was measured (or skipped) by an earlier run."""
        return row_key(op_name, dtype, shape) in self._done

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row (all columns, in order) and flush it to disk."""
        unknown = set(row) - set(self.columns)
        if unknown:
            raise CollectError(f"{self.path}: row has columns {sorted(unknown)} not in the table schema")
        new = not self.path.exists() or self.path.stat().st_size == 0
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if new:
            writer.writerow(self.columns)
        writer.writerow(["" if row.get(c) is None else row.get(c, "") for c in self.columns])
        self._write(self.path, buf.getvalue())
        self._done.add(row_key(row["OPName"], row["dtype"], (row[d] for d in self.dims)))

    def skip(self, op_name: str, dtype: str, shape: Sequence[int], reason: str) -> None:
        """Record a shape that could not be measured, so a resumed run does not retry it."""
        rec = {"OPName": op_name, "dtype": dtype, "shape": [int(d) for d in shape], "reason": reason}
        self._write(self.skipped_path, json.dumps(rec) + "\n")
        self._done.add(row_key(op_name, dtype, shape))

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
