"""Checks of typed (Parquet) source tables, a column at a time: the vector twin of ``rows.type_rows``.

A Parquet source already carries types, so its cells are not re-parsed; each column is checked for
its type family (a wrong family is a :class:`SchemaError`: the table cannot be used), then every row
for nulls, non-finite floats and the column's rule. A failing row becomes a :class:`Reject` whose
``line`` is the 1-based row number in the file (the first failing column names the reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tilecast.data.rows import Reject, SchemaError, require_columns

#: a whole-row check over the source table: True where a row is bad, and the reason for row ``i``.
RowCheck = Callable[[pa.Table], tuple[np.ndarray, Callable[[int], str]]]

_FAMILIES: dict[str, Callable[[pa.DataType], bool]] = {
    "float": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t),
    "int": pa.types.is_integer,
    "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "bool": pa.types.is_boolean,
}
_ARROW: dict[str, pa.DataType] = {"float": pa.float64(), "int": pa.int64(), "string": pa.string(),
                                  "bool": pa.bool_()}


@dataclass(frozen=True)
class Rule:
    """How one column is checked: type family, nullability and an optional value rule."""

    family: str  # float | int | string | bool
    bad: Callable[[np.ndarray], np.ndarray] | None = None  # True where a (non-null) value breaks the rule
    reason: Callable[[Any], str] = repr  # the reason for a bad value (without the column name)
    nullable: bool = False

    @property
    def arrow(self) -> pa.DataType:
        return _ARROW[self.family]


def positive(family: str = "float") -> Rule:
    """A number > 0 (latencies, dims)."""
    return Rule(family, lambda v: ~(v > 0), lambda x: f"must be positive, got {x!r}")


def non_negative(family: str = "int") -> Rule:
    """A number >= 0."""
    return Rule(family, lambda v: ~(v >= 0), lambda x: f"must be non-negative, got {x!r}")


def text(nullable: bool = False) -> Rule:
    """Any string (non-empty unless ``nullable``)."""
    return Rule("string", lambda v: v == "", lambda x: "empty", nullable)


def choice(values: Sequence[str], nullable: bool = False) -> Rule:
    """A string that must be one of ``values``."""
    known = sorted(values)
    return Rule("string", lambda v: ~np.isin(v, known), lambda x: f"unknown value {x!r}; known: {', '.join(known)}",
                nullable)


def read_parquet_source(path: Path) -> pa.Table:
    """The source table, chunks combined, without its pandas metadata."""
    return pq.read_table(path).combine_chunks().replace_schema_metadata(None)


def check_table(
    table: pa.Table,
    shown: str,
    rules: Mapping[str, Rule],
    columns: Sequence[str] | None = None,
    row_checks: Sequence[RowCheck] = (),
) -> tuple[pa.Table, list[Reject]]:
    """Check ``table`` against ``rules``; return the good rows (``columns``, default the rules' keys, cast
    to each rule's Arrow type, NaN -> null in nullable float columns) and one reject per bad row in row order.

    Every rule's column must be present (:class:`SchemaError` otherwise, as for a wrong type family).
    ``row_checks`` run after the column checks, on the rows still good.
    """
    columns = list(rules) if columns is None else list(columns)
    require_columns(table.column_names, [c for c, r in rules.items() if not r.nullable], shown)
    n = table.num_rows
    bad_any = np.zeros(n, dtype=bool)
    reasons: dict[int, str] = {}

    def mark(mask: np.ndarray, reason_of: Callable[[int], str]) -> None:
        new = mask & ~bad_any
        for i in np.flatnonzero(new):
            reasons[int(i)] = reason_of(int(i))
        bad_any[new] = True

    out: dict[str, pa.Array] = {}
    for column, rule in rules.items():
        if column not in table.column_names:
            out[column] = pa.nulls(n, rule.arrow)
            continue
        arr = table.column(column).combine_chunks()
        if not _FAMILIES[rule.family](arr.type):
            raise SchemaError(f"{shown}: column {column!r} is {arr.type}, expected {rule.family}")
        arr = arr.cast(rule.arrow)
        null = arr.is_null().to_numpy(zero_copy_only=False)
        if rule.family == "float":
            nan = pc.fill_null(pc.is_nan(arr), False).to_numpy(zero_copy_only=False)
            inf = pc.fill_null(pc.is_inf(arr), False).to_numpy(zero_copy_only=False)
            if rule.nullable:
                arr = pc.if_else(pa.array(nan), pa.scalar(None, rule.arrow), arr)
                null, nan = null | nan, np.zeros(n, dtype=bool)
            mark(nan | inf, lambda i, a=arr, c=column: f"{c}: not a finite number {a[i].as_py()!r}")
        if not rule.nullable:
            mark(null, lambda i, c=column: f"{c}: empty")
        if rule.bad is not None:
            values = arr.to_numpy(zero_copy_only=False)
            with np.errstate(invalid="ignore"):
                broken = np.asarray(rule.bad(values), dtype=bool) & ~null
            mark(broken, lambda i, a=arr, c=column, r=rule: f"{c}: {r.reason(a[i].as_py())}")
        out[column] = arr
    for check in row_checks:
        mask, reason_of = check(table)
        mark(np.asarray(mask, dtype=bool), reason_of)
    keep = pa.array(~bad_any)
    kept = pa.table({c: out[c] for c in columns}).filter(keep)
    rejects = [Reject(shown, i + 1, reasons[i]) for i in sorted(reasons)]
    return kept, rejects


def drop_constant(table: pa.Table, columns: Sequence[str], shown: str) -> tuple[pa.Table, list[str]]:
    """Drop ``columns`` that hold one value in every row; a note says which and the value.

    A listed column with several values is a :class:`SchemaError` (the source changed: decide again).
    """
    notes = []
    for column in columns:
        values = pc.unique(table.column(column)).to_pylist()
        if len(values) > 1:
            raise SchemaError(f"{shown}: column {column!r} was dropped as constant but has values {values[:5]}")
        if values:
            notes.append(f"dropped constant `{column}` = {values[0]!r}")
        table = table.drop_columns([column])
    return table, notes
