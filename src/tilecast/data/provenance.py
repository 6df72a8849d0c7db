"""``PROVENANCE.md``: where the shipped tables come from, under which licence, what was left out.

The text is a pure function of the source files and the ingest results (no dates, no absolute
paths unless given), so re-running the ingest reproduces it byte for byte.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ProvenanceText:
    """The dataset-specific prose of a PROVENANCE.md (the tables and hashes are filled in by :func:`render`)."""

    title: str  # "NeuSight data" -> "# Provenance of the NeuSight data"
    about: str  # follows "Source: `<label>`: "; may span lines
    conventions: str  # a "## Conventions" section
    files_note: str  # follows "sha256 of every file under the source."; may span lines
    licence_title: str | None = None  # default: the licence text's first line
    copyright: str | None = None  # default: the licence text's copyright line
    left_out: str | None = None  # a "## Left out" section, if any


NEUSIGHT_TEXT = ProvenanceText(
    title="NeuSight data",
    about="the NeuSight artifact data (kernel measurements, model labels,\n"
          "reference graphs, the paper's error tables).",
    conventions=CONVENTIONS,
    files_note="`used: no` marks files no table\nreads (the NeuSight `devices/` and `models/` files are carried as the "
               "`conf/gpu` and `conf/model`\ncatalogs instead).",
)


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
           license_text: str, text: ProvenanceText = NEUSIGHT_TEXT, licence_file: Path | None = None,
           copied: Sequence[str] = ()) -> str:
    """The full PROVENANCE.md text.

    ``licence_file`` (default ``source/LICENSE``) is listed with the source files even when it lies
    outside the source; ``copied`` are source files shipped verbatim (marked ``copied``).
    """
    first = license_text.strip().splitlines()[0].strip() if license_text.strip() else "licence"
    out = [f"# Provenance of the {text.title}", ""]
    if command:
        out += [f"Made by `{command}` (re-running it gives byte-identical files).", ""]
    about = text.about.splitlines()
    out += [f"Source: `{source_label}`: {about[0]}", *about[1:], "",
            f"Licence: {text.licence_title or first}, {text.copyright or copyright_line(license_text)}.",
            "The full text is in `LICENSE` beside this file; it applies to every table here.", "",
            "## Tables", "", "| table | rows kept | rows rejected | source files | notes |",
            "| --- | ---: | ---: | ---: | --- |"]
    for r in results:
        out.append(f"| `{r.name}.parquet` | {r.kept} | {len(r.rejects)} | {len(r.sources)} | "
                   f"{'; '.join(r.notes)} |")
    kept = sum(r.kept for r in results)
    rejected = sum(len(r.rejects) for r in results)
    out += [f"| total | {kept} | {rejected} | | |", "", *text.conventions.splitlines(), ""]
    if text.left_out:
        out += [*text.left_out.splitlines(), ""]
    out += ["## Rejected rows", ""]
    rejects = [x for r in results for x in r.rejects]
    if not rejects:
        out.append("None: every source row passed its checks.")
    for x in rejects[:MAX_LISTED_REJECTS]:
        out.append(f"- `{x.file}:{x.line}`: {x.reason}")
    if len(rejects) > MAX_LISTED_REJECTS:
        out.append(f"- ... and {len(rejects) - MAX_LISTED_REJECTS} more (see the ingest log)")
    licence_file = source / "LICENSE" if licence_file is None else licence_file
    licence_name = Path(os.path.relpath(licence_file, source)).as_posix()
    used = {s for r in results for s in r.sources} | {licence_name}
    files = sorted(p for p in source.rglob("*") if p.is_file())
    note = text.files_note.splitlines()
    out += ["", "## Source files", "", f"sha256 of every file under the source. {note[0]}", *note[1:], "",
            "| file | bytes | sha256 | used |", "| --- | ---: | --- | --- |"]
    if not licence_file.resolve().is_relative_to(source.resolve()):
        out.append(f"| `{licence_name}` | {licence_file.stat().st_size} | `{sha256_file(licence_file)}` | yes |")
    for p in files:
        name = rel(p, source)
        mark = "copied" if name in copied else "yes" if name in used else "no"
        out.append(f"| `{name}` | {p.stat().st_size} | `{sha256_file(p)}` | {mark} |")
    return "\n".join(out) + "\n"
