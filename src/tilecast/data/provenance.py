"""``PROVENANCE.md``: where the shipped tables come from, under which licence, what was left out.

The text is a pure function of the source files and the ingest results (no dates, no absolute
paths unless given), so re-running the ingest reproduces it byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from tilecast.data.tables import TableResult, rel

MAX_LISTED_REJECTS = 200
CONVENTIONS = """## Conventions

- Latencies are in milliseconds, as measured. `Device` / `device` hold exact catalog device names
  (`tilecast.specs.get_gpu`); label tables also keep the source's `device_dir`.
- `kernels/*`: source columns kept exactly (names, order, values; floats round-trip the source text).
  `kernels/train/<op>` concatenates every GPU of the op, ordered by Device, then source order.
  `kernels/dims/<split>_<kind>`: header-less source, columns named B,M,N,K (bmm, linear), B,H (vec,
  ln) or B, Input_Channel, Output_Channel, Kernel_Size, Input_Size, Stride, Padding (cnn).
- `labels/e2e`: tag `<model>-<inf|train>-<seq>-<batch>[-<variant>]` parsed into model (catalog key),
  model_raw (as in the file name), mode, seq_len, batch, variant (`plain` when absent).
- `labels/nodes`, `graphs/graphs`: `row` is the 0-based data line of the source csv (line = row + 2).
- `paper/*`: long form, one row per reported cell (`ape_pct` in percent).
- Rows are checked (columns present, numeric types, latency > 0, known device, dims >= 0); a failing
  row is logged as `<file>:<line>: <reason>`, left out and listed below.
"""


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def copyright_line(license_text: str) -> str:
    """The licence's copyright line (or a pointer to the file when it has none)."""
    for line in license_text.splitlines():
        if line.strip().lower().startswith("copyright"):
            return line.strip()
    return "see LICENSE"


def render(results: Sequence[TableResult], source: Path, source_label: str, command: str | None,
           license_text: str) -> str:
    """The full PROVENANCE.md text."""
    first = license_text.strip().splitlines()[0] if license_text.strip() else "licence"
    out = ["# Provenance of the NeuSight data", ""]
    if command:
        out += [f"Made by `{command}` (re-running it gives byte-identical files).", ""]
    out += [f"Source: `{source_label}`: the NeuSight artifact data (kernel measurements, model labels,",
            "reference graphs, the paper's error tables).", "",
            f"Licence: {first}, {copyright_line(license_text)}.",
            "The full text is in `LICENSE` beside this file; it applies to every table here.", "",
            "## Tables", "", "| table | rows kept | rows rejected | source files | notes |",
            "| --- | ---: | ---: | ---: | --- |"]
    for r in results:
        out.append(f"| `{r.name}.parquet` | {r.kept} | {len(r.rejects)} | {len(r.sources)} | "
                   f"{'; '.join(r.notes)} |")
    kept = sum(r.kept for r in results)
    rejected = sum(len(r.rejects) for r in results)
    out += [f"| total | {kept} | {rejected} | | |", "", *CONVENTIONS.splitlines(), "", "## Rejected rows", ""]
    rejects = [x for r in results for x in r.rejects]
    if not rejects:
        out.append("None: every source row passed its checks.")
    for x in rejects[:MAX_LISTED_REJECTS]:
        out.append(f"- `{x.file}:{x.line}`: {x.reason}")
    if len(rejects) > MAX_LISTED_REJECTS:
        out.append(f"- ... and {len(rejects) - MAX_LISTED_REJECTS} more (see the ingest log)")
    used = {s for r in results for s in r.sources} | {"LICENSE"}
    files = sorted(p for p in source.rglob("*") if p.is_file())
    out += ["", "## Source files", "", "sha256 of every file under the source. `used: no` marks files no table",
            "reads (the NeuSight `devices/` and `models/` files are carried as the `conf/gpu` and `conf/model`",
            "catalogs instead).", "", "| file | bytes | sha256 | used |", "| --- | ---: | --- | --- |"]
    for p in files:
        name = rel(p, source)
        out.append(f"| `{name}` | {p.stat().st_size} | `{sha256_file(p)}` | {'yes' if name in used else 'no'} |")
    return "\n".join(out) + "\n"
