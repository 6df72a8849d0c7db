"""The HTML report in a real headless browser (Chromium): the first screen of a 1280 x 800 window holds the
plans; every link resolves; the page's script (the interactive chart) draws without a console message.

Chromium lays the page out; a copy of the report with a measuring script appended writes the boxes of the plans
table, headings, collapsed sections, links and the chart's drawn marks into the DOM, which ``--dump-dom``
prints; the same run takes a screenshot whose pixels must show the table where the DOM says it is, and logs the
page's console to stderr (any message there, an uncaught error included, fails). Skipped only where no Chromium
is installed and ``CI`` is not set (``.ci/run`` installs Debian's).
"""

import html
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from tilecast.pipelines.score import under_ci
from tilecast.reports.build import PLANS_ID

WIDTH, HEIGHT = 1280, 800
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

MEASURE = """<script>
(() => {
  const box = e => { if (!e) return null; const b = e.getBoundingClientRect();
                     return {top: b.top + scrollY, bottom: b.bottom + scrollY, left: b.left, right: b.right}; };
  const id = i => box(document.getElementById(i));
  const rows = [...document.querySelectorAll('#__PLANS__ tbody tr')].map(box);
  const links = [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'));
  document.body.setAttribute('data-layout', JSON.stringify({
    viewport: [innerWidth, innerHeight], plans: id('__PLANS__'), rows: rows, fleet: id('fleet-plan'),
    plots: id('plots'), tables: id('tables'), first_image: box(document.images[0]),
    details: [...document.querySelectorAll('details')].map(d => ({id: d.id, open: d.open, box: box(d)})),
    open_tables: [...document.querySelectorAll('table')].filter(t => !t.closest('details')).map(t => t.id),
    visible_detail_rows: [...document.querySelectorAll('details tr')].filter(r => r.checkVisibility()).length,
    detail_rows: document.querySelectorAll('details tr').length,
    links: links, unresolved: links.filter(h => !h.startsWith('#') || !document.getElementById(h.slice(1))),
    sources: [...document.querySelectorAll('[src]')].map(e => e.getAttribute('src').slice(0, 22)),
    chart_marks: document.querySelectorAll('#explorer svg circle').length,
    chart_selects: document.querySelectorAll('#explorer select').length,
  }));
})();
</script>""".replace("__PLANS__", PLANS_ID)


def _browser() -> str | None:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    return None


@pytest.fixture(scope="session")  # session: set up before the session-wide report it renders
def browser() -> str:
    """The Chromium binary; skip without one unless under CI, where its absence fails the test."""
    exe = _browser()
    if exe is None:
        if under_ci():
            pytest.fail("CI is set but no Chromium is installed (.ci/run installs Debian's `chromium`)")
        pytest.skip(f"no headless browser ({', '.join(BROWSERS)}) on PATH and CI is not set: "
                    "apt-get install chromium to run this test")
    return exe


@pytest.fixture(scope="module")
def rendered(browser, built_report, tmp_path_factory):
    """(layout measured by Chromium, the screenshot as an RGB array)."""
    exe = browser
    out = tmp_path_factory.mktemp("browser")
    page = built_report / "report_measured.html"  # beside the report: the same relative paths
    page.write_text((built_report / "report.html").read_text().replace("</body>", MEASURE + "</body>"))
    shot = out / "first_screen.png"
    proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--disable-extensions", f"--user-data-dir={out / 'profile'}",
                           f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", "--dump-dom",
                           "--enable-logging=stderr", "--v=0", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    page.unlink()
    found = re.search(r'data-layout="([^"]*)"', proc.stdout)
    assert proc.returncode == 0 and found, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return json.loads(html.unescape(found.group(1))), np.asarray(Image.open(shot).convert("RGB")), console


def test_the_first_screen_holds_the_plans(rendered):
    layout, _, _ = rendered
    assert layout["viewport"][0] == WIDTH and layout["viewport"][1] <= HEIGHT
    height = layout["viewport"][1]
    plans, rows = layout["plans"], layout["rows"]
    assert plans is not None and len(rows) == 4  # one row per question of the test report
    assert 0 < plans["top"] < plans["bottom"] <= height  # the whole plans table is on the first screen
    assert all(r["bottom"] <= height for r in rows)
    assert plans["right"] <= WIDTH  # no sideways scrolling to read it
    assert plans["bottom"] < layout["fleet"]["top"] < layout["plots"]["top"] < layout["first_image"]["top"] \
        < layout["tables"]["top"]


def test_the_full_tables_are_collapsed_below_the_plots(rendered):
    layout, _, _ = rendered
    assert layout["open_tables"] == [PLANS_ID, "fleet-plan"]
    details = layout["details"]
    assert len(details) >= 12 and not any(d["open"] for d in details)
    assert {"decisions", "serving", "latency", "cost", "serve-cost", "serve-capacity", "train-runs", "changes",
            "not-supported", "failed"} <= {d["id"] for d in details}
    assert all(d["box"]["top"] > layout["tables"]["top"] for d in details)
    assert all(d["box"]["bottom"] - d["box"]["top"] < 60 for d in details)  # one summary line each, closed
    assert layout["detail_rows"] > 100 and layout["visible_detail_rows"] == 0  # every full table row is hidden


def test_every_link_resolves_and_the_chart_draws_without_console_messages(rendered):
    layout, _, console = rendered
    assert layout["links"] and layout["unresolved"] == []  # every link is an anchor of the page
    assert all(src.startswith("data:image/png;base64") for src in layout["sources"])  # nothing loaded from outside
    assert layout["chart_selects"] == 3 and layout["chart_marks"] > 0  # the chart drew its first view
    assert console == []  # no error, warning or log from the page's script


def test_the_screenshot_shows_the_table_where_the_dom_says(rendered):
    layout, shot, _ = rendered
    assert shot.shape == (HEIGHT, WIDTH, 3)
    ink = shot.min(axis=2) < 128  # dark pixels: text and borders
    rec = layout["plans"]
    table = ink[int(rec["top"]):int(rec["bottom"]), int(rec["left"]):int(rec["right"])]
    assert table.mean() > 0.03  # the table is drawn, text in every row band
    bands = np.array_split(table, len(layout["rows"]) + 1, axis=0)  # header + rows
    assert all(b.any() for b in bands)
    right = ink[int(rec["top"]):int(rec["bottom"]), int(rec["right"]) + 2:]  # nothing drawn beside the table
    assert right.size == 0 or right.mean() < 0.2 * table.mean()
