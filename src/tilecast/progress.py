"""One line per phase of long work, with counts and elapsed time, in a log as on a terminal.

``with phase("graphs", "7058 to build") as p: ...; p.done("7058 built, 0 from the cache")`` logs
``graphs: 7058 to build ...`` when the phase starts and ``graphs: 7058 built, 0 from the cache (95.2 s)`` when it
ends (``failed after`` when it raises), on the ``tilecast.progress`` logger at INFO: a nightly with its stdout in a
file says what it is doing every phase, not only at the end. The terminal's progress bars (tqdm) are extra.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("tilecast.progress")


class phase:  # noqa: N801 (a context manager read as a verb: ``with phase(...)``)
    """Log the start and the end (elapsed seconds, what it did) of one phase of a job."""

    def __init__(self, name: str, detail: str = "") -> None:
        self.name, self.detail, self.result = name, detail, ""

    def done(self, result: str) -> None:
        """What the phase did, for its closing line."""
        self.result = result

    def __enter__(self) -> phase:
        self.t0 = time.perf_counter()
        log.info("%s: %s ...", self.name, self.detail or "started")
        return self

    def __exit__(self, kind, exc, tb) -> None:
        elapsed = time.perf_counter() - self.t0
        if exc is not None:
            log.info("%s: failed after %.1f s", self.name, elapsed)
        else:
            log.info("%s: %s (%.1f s)", self.name, self.result or "done", elapsed)
