"""Markdown and one self-contained HTML file from report blocks."""

import re

import matplotlib.pyplot as plt
import pandas as pd

from tilecast.reports.render import Heading, Image, Table, Text, fmt, to_html, to_markdown


def test_markdown_and_html(tmp_path):
    fig = plt.figure(figsize=(1, 1))
    png = tmp_path / "p.png"
    fig.savefig(png)
    plt.close(fig)
    df = pd.DataFrame({"gpu": ["l4", "a|b"], "e2e_ms": [1234.5, 0.5], "fits": [True, False]})
    blocks = [Heading("Latency"), Text("Step time in `ms`, **per GPU**."), Table(df, "cap", max_rows=1, csv="t.csv"),
              Image(png, "a plot", "plots/p.png")]
    md = to_markdown("Title <x>", blocks)
    assert md.startswith("# Title <x>\n") and "## Latency" in md
    assert "| gpu | e2e_ms | fits |" in md and "| l4 | 1,234 | yes |" in md
    assert "1 more rows not shown; all rows in `t.csv`." in md and "![a plot](plots/p.png)" in md
    html = to_html("Title <x>", blocks)
    assert "<title>Title &lt;x&gt;</title>" in html and "<code>ms</code>" in html and "<b>per GPU</b>" in html
    assert "data:image/png;base64," in html
    assert not re.search(r"""(src|href)=['"](?!data:)""", html)  # nothing outside the file
    assert "a|b" not in html  # capped at one row


def test_fmt():
    assert [fmt(v) for v in (None, float("nan"), True, 12345, 7, 1234.5, 12.345, 0.123456, 0.000123, "x")] == \
        ["", "", "yes", "12,345", "7", "1,234", "12.3", "0.123", "1.23e-04", "x"]


def test_money_columns_print_as_money():
    from tilecast.reports.money import usd
    from tilecast.reports.render import fmt_cell

    assert fmt_cell("cost_per_step_usd", 0.000666) == "$0.00067" and fmt_cell("usd_per_month", 1234.5) == "$1.2k"
    assert fmt_cell("usd_to_train", 1.5e6) == "$1.5M" and fmt_cell("e2e_ms", 0.000666) == "6.66e-04"
    assert fmt_cell("usd_per_month", float("nan")) == "" and fmt_cell("usd_per_month", "none meets") == "none meets"
    assert usd(0.66, "per 1M tokens") == "$0.66 per 1M tokens" and usd(-1234) == "-$1.2k" and usd(None) == ""
    md = to_markdown("t", [Table(pd.DataFrame({"gpu": ["l4"], "usd_per_month": [41234.0]}))])
    assert "| l4 | $41k |" in md
