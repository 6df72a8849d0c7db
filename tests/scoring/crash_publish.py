"""A job that publishes one run through the store, for the crash tests (run as a subprocess, not collected).

``python crash_publish.py <root> <date> <text> [--renames] [--add]``: stage ``<date>`` under ``<root>`` with
``scores.txt`` = ``<text>`` and a 2 MB ``big.bin`` (or, with ``--add``, add ``report.md`` = ``<text>`` to the
published run, as the report job does), and publish it. ``--renames``: publish as on a file system without an
atomic exchange (two renames). Set ``TILECAST_CRASH_AT=<step>`` to have it killed at that step.
"""

import sys
from pathlib import Path

import tilecast.atomic
from tilecast.scoring.store import RunStore

if __name__ == "__main__":
    root, date, text = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    if "--renames" in sys.argv:
        tilecast.atomic.exchange = lambda a, b: False  # as on NFS: no renameat2(RENAME_EXCHANGE)
    add = "--add" in sys.argv
    with RunStore(root).stage(date, from_existing=add) as d:
        if add:
            (d / "report.md").write_text(text)
        else:
            (d / "scores.txt").write_text(text)
            (d / "big.bin").write_bytes(text.encode()[:1] * (2 << 20))
    print("published", flush=True)
