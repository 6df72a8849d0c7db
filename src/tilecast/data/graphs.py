"""Reference operator graphs: ``graphs/<tag>.csv`` -> one table ``graphs/graphs``.

Columns: ``tag``, ``row`` (0-based data line of the source csv: source line = row + 2), then the
graph columns as strings, exactly as in the source (FwOps etc. are Python literals).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from tilecast.data.columns import REQUIRED_STRING, STRING, ColumnType
from tilecast.data.rows import Reject, SchemaError, arrow_table, read_rows, require_columns, type_rows
from tilecast.data.schema import GRAPH_COLUMNS
from tilecast.data.tables import TableJob, TableResult, rel
from tilecast.data.tags import parse_tag

GRAPHS_NAME = "graphs/graphs"
GRAPH_TYPES: dict[str, ColumnType] = {"tag": STRING, "row": ColumnType(pa.int64(), int), "Name": REQUIRED_STRING}


def build_graphs(source: Path) -> TableResult:
    """All graph csvs in file-name order, rows in source order."""
    files = sorted((source / "graphs").glob("*.csv"))
    if not files:
        raise SchemaError(f"{GRAPHS_NAME}: no graph csv under graphs/")
    values: dict[str, list] = {c: [] for c in ("tag", "row", *GRAPH_COLUMNS)}
    rejects: list[Reject] = []
    for path in files:
        shown = rel(path, source)
        src = read_rows(path, shown)
        require_columns(src.header, GRAPH_COLUMNS, shown)
        try:
            parse_tag(path.stem)
        except ValueError as exc:
            rejects += src.rejects + [Reject(shown, line, str(exc)) for line in src.lines]
            continue
        typed, lines, bad = type_rows(src, shown, GRAPH_TYPES, GRAPH_COLUMNS)
        rejects += bad
        values["tag"] += [path.stem] * len(lines)
        values["row"] += [line - 2 for line in lines]
        for c in GRAPH_COLUMNS:
            values[c] += typed[c]
    return TableResult(GRAPHS_NAME, arrow_table(values, GRAPH_TYPES), rejects, [rel(p, source) for p in files])


def plan_graphs(source: Path) -> list[TableJob]:
    """The single graphs table."""
    return [TableJob(GRAPHS_NAME, build_graphs)]
