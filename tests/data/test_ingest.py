"""Ingest: byte-identical re-runs, bad rows reported with file and line and counted, schema failures."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.data.neusight_tree import FILES, FIXTURE_TABLES, GEMM_HEAD, write_tree
from tilecast.data import run_ingest

BMM_T4 = "kernels/train/bmm/Tesla T4.csv"


def tree_digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_layout_and_byte_identical_rerun(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "neusight"
    first = run_ingest(source, out, source_label="../shared/data/neusight", command="python jobs/ingest.py")
    assert first.ok, first.failures
    digest = tree_digest(out)
    assert sorted(digest) == sorted([f"{t}.parquet" for t in FIXTURE_TABLES] + ["LICENSE", "PROVENANCE.md"])
    second = run_ingest(source, out, source_label="../shared/data/neusight", command="python jobs/ingest.py")
    assert second.ok
    assert tree_digest(out) == digest
    assert [p.name for p in out.parent.iterdir()] == ["neusight"]  # no staging leftovers
    assert (out / "LICENSE").read_bytes() == (source / "LICENSE").read_bytes()
    meta = pq.ParquetFile(out / "kernels/train/bmm.parquet").metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert meta.metadata is None or b"pandas" not in meta.metadata  # no index, no pandas version in the bytes


def test_planted_bad_rows_are_reported_with_file_and_line_and_counted(
        source: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = FILES[BMM_T4].splitlines()[1]
    fields = good.split(",")
    bad_latency = ",".join([fields[0], "fast"] + fields[2:])
    bad_device = good.replace("Tesla T4", "Tesla K80")
    bad_dim = ",".join(fields[:-1] + ["-29"])
    write_tree(source, {BMM_T4: "\n".join([GEMM_HEAD, good, bad_latency, bad_device, good, bad_dim]) + "\n"})
    with caplog.at_level(logging.WARNING, logger="tilecast.data.ingest"):
        report = run_ingest(source, tmp_path / "out")
    assert report.ok
    bmm = report.table("kernels/train/bmm")
    assert (bmm.kept, len(bmm.rejects)) == (3, 3)  # A100 row + 2 good T4 rows
    messages = [r.getMessage() for r in caplog.records]
    where = source / BMM_T4
    assert f"{where}:3: Latency: not a number 'fast'" in messages
    assert any(m.startswith(f"{where}:4: Device: unknown device 'Tesla K80'") for m in messages)
    assert f"{where}:6: K: must be non-negative, got '-29'" in messages
    table = pq.read_table(tmp_path / "out" / "kernels/train/bmm.parquet").to_pandas()
    assert len(table) == 3 and (table["Latency"] > 0).all() and (table["K"] >= 0).all()
    assert set(table["Device"]) == {"NVIDIA A100-PCIE-40GB", "Tesla T4"}
    summary = report.summary().splitlines()
    assert summary[0].split() == ["table", "kept", "rejected"]
    assert "kernels/train/bmm 3 3".split() in [line.split() for line in summary]
    assert summary[-1].split() == ["total", str(report.kept), "3"]
    provenance = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert "| `kernels/train/bmm.parquet` | 3 | 3 | 2 |" in provenance
    assert f"`{BMM_T4}:3`: Latency: not a number 'fast'" in provenance


def test_other_tables_reject_bad_rows(source: Path, tmp_path: Path) -> None:
    write_tree(source, {
        "kernels/dims/train_bmm.csv": "8;2;18;16\n15;x;7;6\n",
        "labels/NVIDIA_L4/gpt2_large-inf-1024-4.json": '{\n    "num_layer": 36,\n    "e2e_latency": -4.0,\n'
                                                        '    "fw_latency": 1.0,\n    "bwall_latency": 0\n}',
        "labels/NVIDIA_K80/bert_large-inf-512-8.json": FILES["labels/NVIDIA_L4/bert_large-inf-512-8.json"],
        "labels/NVIDIA_L4/bert_large-inf-512.json": FILES["labels/NVIDIA_L4/bert_large-inf-512-8.json"],
        "paper/perop.csv": FILES["paper/perop.csv"] + "Habitat,18.8,n/a,123.2,74.7,\n",
        "kernels/test/linear.csv": FILES["kernels/test/linear.csv"] + "linear,1.5,NVIDIA L4,p2.1.0\n",
    })
    report = run_ingest(source, tmp_path / "out")
    assert report.ok, report.failures
    dims = report.table("kernels/dims/train_bmm")
    assert (dims.kept, [str(r) for r in dims.rejects]) == (1, ["kernels/dims/train_bmm.csv:2: M: not an integer 'x'"])
    e2e = report.table("labels/e2e")
    reasons = {r.file: (r.line, r.reason) for r in e2e.rejects}
    assert reasons["labels/NVIDIA_L4/gpt2_large-inf-1024-4.json"] == (3, "e2e_latency: must be positive, got -4.0")
    assert reasons["labels/NVIDIA_K80/bert_large-inf-512-8.json"][1].startswith(
        "label directory 'NVIDIA_K80': unknown device 'NVIDIA_K80'")
    assert "does not match" in reasons["labels/NVIDIA_L4/bert_large-inf-512.json"][1]
    assert e2e.kept == 4
    linear = report.table("kernels/test/linear")
    assert [str(r) for r in linear.rejects] == ["kernels/test/linear.csv:4: expected 20 fields, got 4"]
    perop = report.table("paper/perop")
    assert [str(r) for r in perop.rejects] == ["paper/perop.csv:5: In Distribution LN: not a number 'n/a'"]
    assert perop.kept == 8 + 3


def test_missing_column_fails_and_writes_nothing(source: Path, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out"
    assert run_ingest(source, out).ok
    before = tree_digest(out)
    lines = FILES["kernels/test/linear.csv"].splitlines()
    header = lines[0].replace("Latency,", "")
    rows = [",".join(line.split(",")[:1] + line.split(",")[2:]) for line in lines[1:]]
    write_tree(source, {"kernels/test/linear.csv": "\n".join([header, *rows]) + "\n",
                        "kernels/dims/train_bmm.csv": "8;2;18;16\n15;9;7;6\n1;2;3;4\n"})
    with caplog.at_level(logging.ERROR, logger="tilecast.data.ingest"):
        report = run_ingest(source, out)
    assert not report.ok
    assert report.failures == ["kernels/test/linear: kernels/test/linear.csv: missing columns ['Latency']; "
                               f"has {header.split(',')}"]
    assert any("missing columns ['Latency']" in r.getMessage() for r in caplog.records)
    assert tree_digest(out) == before  # the good dims change was not written either


def test_missing_source_and_licence(tmp_path: Path, source: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a folder"):
        run_ingest(tmp_path / "nowhere", tmp_path / "out")
    (source / "LICENSE").unlink()
    report = run_ingest(source, tmp_path / "out")
    assert not report.ok and "MIT notice" in report.failures[0]
    assert not (tmp_path / "out").exists()
