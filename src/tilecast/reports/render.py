"""A report as a list of blocks, rendered to Markdown and to one self-contained HTML file.

Blocks: :class:`Heading`, :class:`Text`, :class:`Table` (a DataFrame, rows capped in the rendered
page), :class:`Image` (a PNG next to the report; Markdown links it, HTML embeds it as base64) and
:class:`Details` (a titled group of blocks: a collapsed ``<details>`` in HTML, a plain section in
Markdown, in the same place), :class:`Nav` (links to anchors of the page, HTML only) and :class:`Chart` (one
interactive chart, :mod:`tilecast.reports.explorer`: its data embedded once and the script that draws it; Markdown
names the JSON file beside the report). The HTML page loads nothing from outside the file; its only script is
the chart's. Money columns (:func:`tilecast.reports.money.is_money_column`) print as money (``$1.2k``).
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tilecast.reports.money import is_money_column, usd


@dataclass(frozen=True)
class Heading:
    text: str  # `code` and **bold** are rendered in HTML too
    level: int = 2
    id: str | None = None  # HTML id (an anchor a :class:`Nav` links to)


@dataclass(frozen=True)
class Text:
    text: str  # Markdown-light: paragraphs; `code` and **bold** are rendered in HTML too


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    caption: str = ""
    max_rows: int = 60
    csv: str | None = None  # relative path of the full table, when one is written beside the report
    id: str | None = None  # HTML id of the table (an anchor; what a browser test looks for)


@dataclass(frozen=True)
class Image:
    path: Path  # absolute path of the PNG
    alt: str
    rel: str  # path relative to the report


@dataclass(frozen=True)
class Details:
    """A titled group of blocks, collapsed in HTML until opened (the full tables below the decisions)."""

    summary: str
    blocks: tuple  # of Block
    id: str | None = None
    open: bool = False


@dataclass(frozen=True)
class Nav:
    """Links to anchors in the page (HTML only: a line of ``#id`` links; Markdown has its headings)."""

    links: tuple[tuple[str, str], ...]  # (text, id)


@dataclass(frozen=True)
class Chart:
    """An interactive chart (:func:`tilecast.reports.explorer.chart_html`); ``rel``: its data as a JSON file beside
    the report (what Markdown links)."""

    payload: dict
    alt: str
    rel: str
    id: str = "explorer"


Block = Heading | Text | Table | Image | Details | Nav | Chart


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


def fmt_cell(column: object, value: object) -> str:
    """:func:`fmt`, or money for a money column (``$0.66``, ``$1.2k``: never ``6.66e-04``)."""
    if is_money_column(str(column)) and isinstance(value, int | float | np.integer | np.floating) \
            and not isinstance(value, bool | np.bool_):
        return usd(value)
    return fmt(value)


def _rows(t: Table) -> tuple[list[str], list[list[str]], int]:
    df = t.frame
    shown = df.head(t.max_rows)
    header = [str(c) for c in df.columns]
    body = [[fmt_cell(c, v) for c, v in zip(header, row, strict=True)]
            for row in shown.itertuples(index=False, name=None)]
    return header, body, len(df) - len(shown)


def _more(t: Table, hidden: int) -> str:
    where = f"; all rows in `{t.csv}`" if t.csv else ""
    return f"{hidden} more rows not shown{where}."


def _markdown_blocks(blocks, out: list[str]) -> None:
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
        elif isinstance(b, Chart):
            out += [f"{b.alt}: an interactive chart in `report.html`; its data: `{b.rel}`.", ""]
        elif isinstance(b, Details):
            out += [f"## {b.summary}", ""]
            _markdown_blocks(b.blocks, out)


def to_markdown(title: str, blocks: list[Block]) -> str:
    """The report as GitHub-flavoured Markdown (images linked relative to the report; a :class:`Details` group
    is a level-2 section, its headings one level below)."""
    out = [f"# {title}", ""]
    _markdown_blocks(blocks, out)
    return "\n".join(out).rstrip() + "\n"


_CSS = """body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1em auto;max-width:1400px;
color:#222;padding:0 1em}table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f2f2f2;position:sticky;top:0}
td:first-child,th:first-child{text-align:left}caption{text-align:left;font-style:italic;padding:4px 0}
img{max-width:100%;border:1px solid #eee}code{background:#f4f4f4;padding:0 3px}
.wrap{overflow-x:auto}p.note{color:#555;font-size:12px}h1{font-size:1.5em;margin:.2em 0}
h2{font-size:1.2em;margin:.8em 0 .3em}details{margin:.3em 0;border-top:1px solid #ddd}
summary{cursor:pointer;font-weight:600;font-size:1.1em;padding:.4em 0}details>h3{font-size:1em}
td.t,th.t{text-align:left}p.nav{font-size:13px;margin:.2em 0}p.nav a{color:#1a5fb4}
.chart .controls label{margin-right:1em;font-size:13px}.chart svg{max-width:100%;height:auto}"""


def _inline(text: str) -> str:
    """Escape, then render `code` and **bold**."""
    import re

    s = html.escape(text)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", s)


def _html_blocks(blocks, out: list[str]) -> None:
    for b in blocks:
        if isinstance(b, Heading):
            lvl = min(6, max(2, b.level))
            out.append(f"<h{lvl}{_id(b.id)}>{_inline(b.text)}</h{lvl}>")
        elif isinstance(b, Text):
            out += [f"<p>{_inline(p)}</p>" for p in b.text.split("\n\n")]
        elif isinstance(b, Table):
            ident = _id(b.id)
            if b.frame.empty:
                out.append(f"<p class='note'{ident}>{_inline(b.caption)}: (none)</p>")
                continue
            header, body, hidden = _rows(b)
            cap = f"<caption>{_inline(b.caption)}</caption>" if b.caption else ""
            text = [" class='t'" if _is_text(b.frame.iloc[:, i]) else "" for i in range(b.frame.shape[1])]
            head = "".join(f"<th{t}>{html.escape(h)}</th>" for h, t in zip(header, text, strict=True))
            rows = "".join("<tr>" + "".join(f"<td{t}>{html.escape(c)}</td>" for c, t in zip(r, text, strict=True))
                           + "</tr>" for r in body)
            out.append(f"<div class='wrap'><table{ident}>{cap}<thead><tr>{head}</tr></thead>"
                       f"<tbody>{rows}</tbody></table></div>")
            if hidden:
                out.append(f"<p class='note'>{_inline(_more(b, hidden))}</p>")
        elif isinstance(b, Image):
            data = base64.b64encode(Path(b.path).read_bytes()).decode("ascii")
            out.append(f"<p><img alt='{html.escape(b.alt)}' src='data:image/png;base64,{data}'></p>")
        elif isinstance(b, Chart):
            from tilecast.reports.explorer import chart_html

            out += [f"<p class='note'>{_inline(b.alt)}</p>", chart_html(b.payload, b.id)]
        elif isinstance(b, Details):
            out.append(f"<details{_id(b.id)}{' open' if b.open else ''}><summary>{_inline(b.summary)}</summary>")
            _html_blocks(b.blocks, out)
            out.append("</details>")
        elif isinstance(b, Nav):
            links = " · ".join(f"<a href='#{html.escape(i)}'>{html.escape(t)}</a>" for t, i in b.links)
            out.append(f"<p class='nav'>{links}</p>")


def _id(ident: str | None) -> str:
    return f" id='{html.escape(ident)}'" if ident else ""


def _is_text(col: pd.Series) -> bool:
    """A column of words (left-aligned), not numbers."""
    return col.dtype == object or pd.api.types.is_string_dtype(col)


def to_html(title: str, blocks: list[Block]) -> str:
    """The report as one HTML file: inline CSS, images embedded as base64 PNG, :class:`Details` collapsed."""
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>", f"<title>{html.escape(title)}</title>",
           f"<style>{_CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>"]
    _html_blocks(blocks, out)
    out.append("</body></html>")
    return "\n".join(out) + "\n"
