"""The ``aiconfigurator_moe`` dataset on a miniature source tree: checked rows, averaged repeats, the moe table's
stratified sample, the layout and the loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.data.measured_tree import APACHE
from tilecast.data import load_aiconfigurator_moe, run_ingest
from tilecast.data.aiconfigurator_moe import sample_strata

B200, L40S = "NVIDIA B200", "NVIDIA L40S"


def _write(path: Path, columns: dict[str, list]) -> None:
    pq.write_table(pa.table(columns), path)


def moe_tree(root: Path, moe_rows: int = 12) -> Path:
    """``root/external/aiconfigurator`` with the five tables and the licence beside it."""
    src = root / "external" / "aiconfigurator"
    src.mkdir(parents=True)
    (root / "external" / "LICENSES").mkdir()
    (root / "external" / "LICENSES" / "aiconfigurator-Apache-2.0.txt").write_text(APACHE)
    n = moe_rows
    _write(src / "moe.parquet", {
        "system": ["b200_sxm"] * n, "framework": ["sglang"] * n, "version": ["0.5.14"] * n, "device": [B200] * n,
        "op_name": ["moe"] * n, "kernel_source": ["sglang_flashinfer_trtllm_moe"] * n,
        "moe_dtype": ["bfloat16"] * (n - 2) + ["nvfp4", "fp6"], "num_tokens": [1, 1, *range(2, n)],
        "hidden_size": [4096] * n, "inter_size": [1536] * n, "topk": [8] * n, "num_experts": [128] * n,
        "moe_tp_size": [1] * n, "moe_ep_size": [8] * n, "distribution": ["balanced"] * n,
        "latency_ms": [0.02, 0.04, *np.linspace(0.05, 1.0, n - 2)]})
    mla = {"system": ["b200_sxm", "l40s"], "framework": ["trtllm", "trtllm"], "version": ["1.3.0rc20", "1.0.0"],
           "device": [B200, L40S], "op_name": ["mla_context"] * 2, "kernel_source": ["default"] * 2,
           "mla_dtype": ["bfloat16"] * 2, "kv_cache_dtype": ["bfloat16", "fp8"], "num_heads": [16, 128],
           "batch_size": [1, 2], "isl": [1024, 128], "tp_size": [8, 1], "step": [0, 0], "latency_ms": [0.2, -1.0]}
    _write(src / "context_mla.parquet", mla)
    _write(src / "generation_mla.parquet", {**mla, "op_name": ["mla_generation"] * 2, "isl": [1, 1],
                                            "step": [1023, 4095], "latency_ms": [0.03, 0.2]})
    head = {"system": ["b200_sxm"] * 2, "framework": ["sglang"] * 2, "version": ["0.5.12"] * 2, "device": [B200] * 2,
            "kernel_source": ["deepep"] * 2, "node_num": [1, 1], "hidden_size": [7168, 7168], "num_token": [1, 128],
            "num_topk": [8, 8], "num_experts": [256, 256]}
    _write(src / "deepep_ll.parquet", {**head, "op_name": ["ll"] * 2, "combine_avg_t_us": [22.1, 40.9],
                                       "combine_bandwidth_gbps": [1.0, 191.1], "dispatch_avg_t_us": [22.1, 33.0],
                                       "dispatch_bandwidth_gbps": [0.5, 109.4]})
    _write(src / "deepep_normal.parquet", {**head, "op_name": ["normal"] * 2, "dispatch_sms": [20, 24],
                                           "dispatch_transmit_us": [34.0, 55.0], "dispatch_notify_us": [0.0, 0.0],
                                           "combine_sms": [20, 24], "combine_transmit_us": [54.0, 83.0],
                                           "combine_notify_us": [0.0, 0.0]})
    return src


def test_miniature_tree_is_checked_averaged_and_loadable(tmp_path: Path) -> None:
    src, out = moe_tree(tmp_path), tmp_path / "out"
    report = run_ingest(src, out, source_label="../shared/data/external/aiconfigurator", dataset="aiconfigurator_moe")
    assert report.ok, report.failures
    assert sorted(p.name for p in out.iterdir()) == ["LICENSE", "PROVENANCE.md", "context_mla.parquet",
                                                      "deepep_ll.parquet", "deepep_normal.parquet",
                                                      "generation_mla.parquet", "moe.parquet"]
    moe = load_aiconfigurator_moe("moe", root=out)
    assert "op_name" not in moe  # constant: dropped, named in the notes
    assert len(moe) == 10  # 12 rows: one unknown dtype rejected, two repeats of one configuration averaged
    assert moe.loc[moe["num_tokens"] == 1, "latency_ms"].tolist() == [pytest.approx(0.03)]
    assert [(r.line, r.reason.split(":")[0]) for r in report.table("moe").rejects] == [(12, "moe_dtype")]
    assert [r.line for r in report.table("context_mla").rejects] == [2]  # latency -1
    assert len(load_aiconfigurator_moe("generation_mla", root=out)) == 2
    assert list(load_aiconfigurator_moe("deepep_ll", root=out, columns=["num_token"])) == ["num_token"]
    provenance = (out / "PROVENANCE.md").read_text()
    assert "mixture-of-experts data" in provenance and "repeated measurements averaged" in provenance
    again = tmp_path / "again"
    run_ingest(src, again, source_label="../shared/data/external/aiconfigurator", dataset="aiconfigurator_moe")
    assert (again / "moe.parquet").read_bytes() == (out / "moe.parquet").read_bytes()  # deterministic
    with pytest.raises(ValueError, match="unknown AIConfigurator MoE table 'gemm'"):
        load_aiconfigurator_moe("gemm", root=out)


def test_strata_sample_keeps_every_stratum_and_is_seeded() -> None:
    table = pa.table({"system": ["a"] * 1000 + ["b"] * 30, "framework": ["x"] * 1030, "moe_dtype": ["bf16"] * 1030,
                      "distribution": ["balanced"] * 1030, "v": list(range(1030))})
    kept = sample_strata(table, fraction=0.1, min_stratum=50)
    systems = kept.column("system").to_pylist()
    assert systems.count("a") == 100 and systems.count("b") == 30  # 10% of the big one, the small one whole
    assert kept.column("v").to_pylist() == sorted(kept.column("v").to_pylist())  # table order kept
    assert sample_strata(table, fraction=0.1, min_stratum=50).equals(kept)
