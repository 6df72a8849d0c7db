"""A report as a list of blocks, rendered to Markdown and to one self-contained HTML file.

Blocks: :class:`Heading`, :class:`Text`, :class:`Table` (a DataFrame, rows capped in the rendered
page), :class:`Image` (a PNG next to the report; Markdown links it, HTML embeds it as base64).
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Text:
    text: str  # Markdown-light: paragraphs; `code` and **bold** are rendered in HTML too


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    caption: str = ""
    max_rows: int = 60
    csv: str | None = None  # relative path of the full table, when one is written beside the report


@dataclass(frozen=True)
class Image:
    path: Path  # absolute path of the PNG
    alt: str
    rel: str  # path relative to the report


Block = Heading | Text | Table | Image


def fmt(value: object) -> str:
    """A table cell for people: thousands separators, 3 significant decimals, blanks for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}" if abs(int(value)) >= 10000 else str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if v == 0:
            return "0"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        if abs(v) >= 0.01:
            return f"{v:.3g}"
        return f"{v:.2e}"
    return str(value)


def _rows(t: Table) -> tuple[list[str], list[list[str]], int]:
    df = t.frame
    shown = df.head(t.max_rows)
    header = [str(c) for c in df.columns]
    body = [[fmt(v) for v in row] for row in shown.itertuples(index=False, name=None)]
    return header, body, len(df) - len(shown)


def _more(t: Table, hidden: int) -> str:
    where = f"; all rows in `{t.csv}`" if t.csv else ""
    return f"{hidden} more rows not shown{where}."


def to_markdown(title: str, blocks: list[Block]) -> str:
    """The report as GitHub-flavoured Markdown (images linked relative to the report)."""
    out = [f"# {title}", ""]
    for b in blocks:
        if isinstance(b, Heading):
            out += [f"{'#' * (b.level)} {b.text}", ""]
        elif isinstance(b, Text):
            out += [b.text, ""]
        elif isinstance(b, Table):
            if b.caption:
                out += [f"*{b.caption}*", ""]
            if b.frame.empty:
                out += ["(none)", ""]
                continue
            header, body, hidden = _rows(b)
            esc = [[c.replace("|", "\\|") for c in row] for row in [header, *body]]
            out.append("| " + " | ".join(esc[0]) + " |")
            out.append("|" + "|".join(" --- " for _ in header) + "|")
            out += ["| " + " | ".join(r) + " |" for r in esc[1:]]
            out.append("")
            if hidden:
                out += [_more(b, hidden), ""]
            elif b.csv:
                out += [f"Full table: `{b.csv}`.", ""]
        elif isinstance(b, Image):
            out += [f"![{b.alt}]({b.rel})", ""]
    return "\n".join(out).rstrip() + "\n"


_CSS = """body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1400px;
color:#222;padding:0 1em}table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f2f2f2;position:sticky;top:0}
td:first-child,th:first-child{text-align:left}caption{text-align:left;font-style:italic;padding:4px 0}
img{max-width:100%;border:1px solid #eee}code{background:#f4f4f4;padding:0 3px}
.wrap{overflow-x:auto}p.note{color:#555;font-size:12px}"""


def _inline(text: str) -> str:
    """Escape, then render `code` and **bold**."""
    import re

    s = html.escape(text)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", s)


def to_html(title: str, blocks: list[Block]) -> str:
    """The report as one HTML file: inline CSS, images embedded as base64 PNG."""
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>", f"<title>{html.escape(title)}</title>",
           f"<style>{_CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>"]
    for b in blocks:
        if isinstance(b, Heading):
            lvl = min(6, max(2, b.level))
            out.append(f"<h{lvl}>{html.escape(b.text)}</h{lvl}>")
        elif isinstance(b, Text):
            out += [f"<p>{_inline(p)}</p>" for p in b.text.split("\n\n")]
        elif isinstance(b, Table):
            if b.frame.empty:
                out.append(f"<p class='note'>{_inline(b.caption)}: (none)</p>")
                continue
            header, body, hidden = _rows(b)
            cap = f"<caption>{_inline(b.caption)}</caption>" if b.caption else ""
            head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
            out.append(f"<div class='wrap'><table>{cap}<thead><tr>{head}</tr></thead>"
                       f"<tbody>{rows}</tbody></table></div>")
            if hidden:
                out.append(f"<p class='note'>{_inline(_more(b, hidden))}</p>")
        elif isinstance(b, Image):
            data = base64.b64encode(Path(b.path).read_bytes()).decode("ascii")
            out.append(f"<p><img alt='{html.escape(b.alt)}' src='data:image/png;base64,{data}'></p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
