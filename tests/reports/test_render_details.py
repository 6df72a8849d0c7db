"""Collapsible sections, page links and column alignment of the rendered report."""

import re

import pandas as pd

from tilecast.reports.render import Details, Heading, Nav, Table, Text, to_html, to_markdown


def test_details_nav_and_alignment():
    df = pd.DataFrame({"gpu": ["l4", "h100"], "e2e_ms": [1.5, 2.5]})
    blocks = [Nav((("Top", "decisions"), ("All", "tables"))), Heading("Pick `l4`", id="decisions"),
              Table(df, "picks", id="recommendations"),
              Details("Full `latency`", (Text("every cell"), Table(df, "latency")), "latency"),
              Details("Opened", (Text("shown"),), open=True)]
    md = to_markdown("T", blocks)
    assert "Top" not in md  # links are for the HTML page
    assert md.index("## Pick `l4`") < md.index("*picks*") < md.index("## Full `latency`") < md.index("every cell")
    assert md.count("| gpu | e2e_ms |") == 2
    html = to_html("T", blocks)
    assert "<p class='nav'><a href='#decisions'>Top</a> · <a href='#tables'>All</a></p>" in html
    assert "<h2 id='decisions'>Pick <code>l4</code></h2>" in html
    assert "<table id='recommendations'>" in html
    assert re.search(r"<details id='latency'><summary>Full <code>latency</code></summary>\n<p>every cell</p>\n"
                     r"<div class='wrap'><table><caption>", html)
    assert "<details open><summary>Opened</summary>" in html and html.count("</details>") == 2
    assert "<td class='t'>l4</td><td>1.5</td>" in html  # words left, numbers right
    assert "<th class='t'>gpu</th><th>e2e_ms</th>" in html
    assert not re.search(r"""(src|href)=['"](?!data:|#)""", html)  # links stay inside the file
