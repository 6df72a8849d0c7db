"""The HTML report in a real headless browser (Chromium): the first screen of a 1280 x 800 window holds the
recommendations.

Chromium lays the page out; a copy of the report with a measuring script appended (the report itself runs no
script) writes the boxes of the decision tables, headings and collapsed sections into the DOM, which
``--dump-dom`` prints; the same run takes a screenshot whose pixels must show the table where the DOM says it
is. Skipped only where no Chromium is installed and ``CI`` is not set (``.ci/run`` installs Debian's).
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
from tilecast.reports.build import RECOMMENDATIONS_ID, SERVE_RECOMMENDATIONS_ID

WIDTH, HEIGHT = 1280, 800
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

MEASURE = """<script>
(() => {
  const box = e => { if (!e) return null; const b = e.getBoundingClientRect();
                     return {top: b.top + scrollY, bottom: b.bottom + scrollY, left: b.left, right: b.right}; };
  const id = i => box(document.getElementById(i));
  const rows = [...document.querySelectorAll('#__REC__ tbody tr')].map(box);
  document.body.setAttribute('data-layout', JSON.stringify({
    viewport: [innerWidth, innerHeight], rec: id('__REC__'), rows: rows, serve: id('__SERVE__'),
    plots: id('plots'), tables: id('tables'), first_image: box(document.images[0]),
    details: [...document.querySelectorAll('details')].map(d => ({id: d.id, open: d.open, box: box(d)})),
    open_tables: [...document.querySelectorAll('table')].filter(t => !t.closest('details')).map(t => t.id),
    visible_detail_rows: [...document.querySelectorAll('details tr')].filter(r => r.checkVisibility()).length,
    detail_rows: document.querySelectorAll('details tr').length,
  }));
})();
</script>""".replace("__REC__", RECOMMENDATIONS_ID).replace("__SERVE__", SERVE_RECOMMENDATIONS_ID)


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
                           page.as_uri()], capture_output=True, text=True, timeout=120)
    page.unlink()
    found = re.search(r'data-layout="([^"]*)"', proc.stdout)
    assert proc.returncode == 0 and found, proc.stderr[-2000:]
    return json.loads(html.unescape(found.group(1))), np.asarray(Image.open(shot).convert("RGB"))


def test_the_first_screen_holds_the_recommendations(rendered):
    layout, _ = rendered
    assert layout["viewport"][0] == WIDTH and layout["viewport"][1] <= HEIGHT
    height = layout["viewport"][1]
    rec, rows = layout["rec"], layout["rows"]
    assert rec is not None and len(rows) == 6  # 2 models x (inference, training) x dtypes of the smoke run
    assert 0 < rec["top"] < rec["bottom"] <= height  # the whole recommendation table is on the first screen
    assert all(r["bottom"] <= height for r in rows)
    assert rec["right"] <= WIDTH  # no sideways scrolling to read it
    serve = layout["serve"]
    assert serve is not None and rec["bottom"] < serve["top"] < height  # the serve recommendations start there too
    assert serve["bottom"] < layout["plots"]["top"] < layout["first_image"]["top"] < layout["tables"]["top"]


def test_the_full_tables_are_collapsed_below_the_plots(rendered):
    layout, _ = rendered
    assert layout["open_tables"] == [RECOMMENDATIONS_ID, SERVE_RECOMMENDATIONS_ID, "fleet-plan"]
    details = layout["details"]
    assert len(details) >= 9 and not any(d["open"] for d in details)
    assert {"latency", "cost", "serve-cost", "serve-capacity", "changes", "failed"} <= {d["id"] for d in details}
    assert all(d["box"]["top"] > layout["tables"]["top"] for d in details)
    assert all(d["box"]["bottom"] - d["box"]["top"] < 60 for d in details)  # one summary line each, closed
    assert layout["detail_rows"] > 100 and layout["visible_detail_rows"] == 0  # every full table row is hidden


def test_the_screenshot_shows_the_table_where_the_dom_says(rendered):
    layout, shot = rendered
    assert shot.shape == (HEIGHT, WIDTH, 3)
    ink = shot.min(axis=2) < 128  # dark pixels: text and borders
    rec = layout["rec"]
    table = ink[int(rec["top"]):int(rec["bottom"]), int(rec["left"]):int(rec["right"])]
    assert table.mean() > 0.03  # the table is drawn, text in every row band
    bands = np.array_split(table, len(layout["rows"]) + 1, axis=0)  # header + rows
    assert all(b.any() for b in bands)
    right = ink[int(rec["top"]):int(rec["bottom"]), int(rec["right"]) + 2:]  # nothing drawn beside the table
    assert right.size == 0 or right.mean() < 0.2 * table.mean()
