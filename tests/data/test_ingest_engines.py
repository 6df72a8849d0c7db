"""dataset=aiconfigurator_engines on a miniature source tree: checks, the shape sample, the held-back device."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.data.measured_tree import APACHE, _large
from tests.data.neusight_tree import write_tree
from tilecast.data import load_aiconfigurator_engines, run_ingest
from tilecast.data.aiconfigurator_engines import SAMPLE_EVERY, shape_kept

B200, B300, GB300 = "NVIDIA B200", "NVIDIA B300 SXM6 AC", "NVIDIA GB300"


def _kept_and_dropped(every: int, dims: int) -> tuple[list[tuple], list[tuple]]:
    """Two shapes the sample keeps and one it drops (found by the same crc32 rule)."""
    kept, dropped = [], []
    for a in range(1, 400):
        shape = (a, 64, 128)[:dims] if dims == 3 else (a, 1, 8, 8, 128, 7)
        (kept if shape_kept([shape], every)[0] else dropped).append(shape)
    return kept[:2], dropped[:1]


def gemm_engines() -> tuple[pa.Table, list[tuple]]:
    kept, dropped = _kept_and_dropped(SAMPLE_EVERY["gemm_engines"], 3)
    rows = []  # system, framework, device, dtype, shape, ms
    for shape in kept + dropped:
        rows.append(("b200_sxm", "sglang", B200, "fp8_block", shape, 0.02))
        rows.append(("b200_sxm", "trtllm", B200, "bfloat16", shape, 0.01))
    rows.append(("b300_sxm", "sglang", GB300, "bfloat16", kept[0], 0.01))  # the source's GB300 rows
    rows.append(("b200_sxm", "sglang", B200, "int4", kept[1], 0.01))  # unknown dtype
    cols = {"system": [r[0] for r in rows], "framework": [r[1] for r in rows], "version": ["0.5.14"] * len(rows),
            "device": [r[2] for r in rows], "op_name": ["gemm"] * len(rows), "kernel_source": ["k"] * len(rows),
            "gemm_dtype": [r[3] for r in rows], "m": [r[4][0] for r in rows], "n": [r[4][1] for r in rows],
            "k": [r[4][2] for r in rows], "latency_ms": [r[5] for r in rows]}
    return _large(cols), kept


def attention_engines(op: str) -> pa.Table:
    kept, _ = _kept_and_dropped(SAMPLE_EVERY["generation_attention_engines"], 6)
    shapes = [kept[0], kept[0], kept[1]]
    windows = [0.0, 128.0, None]  # the windowed row is left out
    n = len(shapes)
    cols = {"system": ["b200_sxm"] * n, "framework": ["trtllm"] * n, "version": ["1.3.0rc20"] * n,
            "device": [B200] * n, "op_name": [op] * n, "kernel_source": ["torch_flow"] * n,
            "batch_size": [s[0] for s in shapes], "isl": [s[1] for s in shapes], "num_heads": [s[2] for s in shapes],
            "num_key_value_heads": [s[3] for s in shapes], "head_dim": [s[4] for s in shapes],
            "beam_width": [1] * n, "attn_dtype": ["fp8", "bfloat16", "bfloat16"], "kv_cache_dtype": ["fp8"] * n,
            "step": [s[5] for s in shapes], "latency_ms": [0.01, 0.02, 0.03]}
    table = _large(cols)
    return table.append_column("window_size", pa.array(windows, type=pa.float64()))


def custom_allreduce() -> pa.Table:
    cols = {"system": ["b300_sxm", "l40s"], "framework": ["vllm", "sglang"], "version": ["0.24.0", "0.5.14"],
            "device": [B300, "NVIDIA L40S"], "op_name": ["all_reduce"] * 2,
            "kernel_source": ["vLLM_custom_graph", "SGLang_CustomAllReduce_eager"],
            "allreduce_dtype": ["bfloat16"] * 2, "num_gpus": [8, 2], "message_size": [128, 4096],
            "latency_ms": [0.0074, 0.043], "backend": ["vllm_graph", None], "implementation": [None, "oneshot"]}
    return _large(cols)


@pytest.fixture
def engine_tree(tmp_path: Path) -> tuple[Path, list[tuple]]:
    write_tree(tmp_path / "external", {"LICENSES/aiconfigurator-Apache-2.0.txt": APACHE})
    source = tmp_path / "external" / "aiconfigurator"
    source.mkdir()
    gemm, kept = gemm_engines()
    pq.write_table(gemm, source / "gemm_engines.parquet")
    for op in ("context_attention", "generation_attention"):
        pq.write_table(attention_engines(op), source / f"{op}_engines.parquet")
    pq.write_table(custom_allreduce(), source / "custom_allreduce.parquet")
    return source, kept


def test_ingest_samples_shapes_rejects_the_held_back_device_and_loads(engine_tree, tmp_path):
    source, kept = engine_tree
    out = tmp_path / "out"
    report = run_ingest(source, out, dataset="aiconfigurator_engines")
    assert report.ok, report.failures
    gemm = report.table("gemm_engines")
    reasons = [r.reason for r in gemm.rejects]
    assert any("'NVIDIA GB300' is not system 'b300_sxm''s device" in r for r in reasons)
    assert any("gemm_dtype: unknown value 'int4'" in r for r in reasons)
    got = load_aiconfigurator_engines("gemm_engines", root=out)
    assert sorted(set(zip(got["m"], got["n"], got["k"], strict=True))) == sorted(kept)  # dropped shape gone
    assert len(got) == 4 and "op_name" not in got and set(got["gemm_dtype"]) == {"fp8_block", "bfloat16"}
    assert any("shape sample: kept 4 of 6 rows" in n for n in gemm.notes)
    att = load_aiconfigurator_engines("generation_attention_engines", root=out)
    assert len(att) == 2 and att["window_size"].fillna(0).eq(0).all()
    assert any("left out 1 sliding-window rows" in n for n in report.table("context_attention_engines").notes)
    ar = load_aiconfigurator_engines("custom_allreduce", root=out)
    assert ar["kernel_source"].tolist() == ["vLLM_custom_graph", "SGLang_CustomAllReduce_eager"]
    assert "allreduce_dtype" in ar and ar["backend"].isna().tolist() == [False, True]
    provenance = (out / "PROVENANCE.md").read_text()
    assert "AIConfigurator engine data" in provenance and "NVIDIA GB300" in provenance
    assert (out / "LICENSE").read_text() == APACHE


def test_unknown_engine_table_is_named(tmp_path):
    with pytest.raises(ValueError, match="unknown AIConfigurator engine table 'moe'; known: gemm_engines"):
        load_aiconfigurator_engines("moe", root=tmp_path)


def test_shipped_engine_tables_hold_no_held_back_gpu_and_ship_their_licence():
    from tilecast.data.aiconfigurator import SYSTEM_DEVICES
    from tilecast.paths import AICONFIGURATOR_ENGINES_DIR

    for table in ("gemm_engines", "context_attention_engines", "generation_attention_engines", "custom_allreduce"):
        df = load_aiconfigurator_engines(table)
        assert len(df) > 0 and set(df["system"]) <= set(SYSTEM_DEVICES)
        assert {SYSTEM_DEVICES[s] for s in df["system"]} == set(df["device"])  # no GB300 filed as B300
        assert not any(h in d for d in df["device"].unique() for h in ("H100", "H200", "GB300"))
    assert "Apache License" in (AICONFIGURATOR_ENGINES_DIR / "LICENSE").read_text()
    provenance = (AICONFIGURATOR_ENGINES_DIR / "PROVENANCE.md").read_text()
    assert "Made by `python jobs/ingest.py dataset=aiconfigurator_engines " in provenance
    size = sum(p.stat().st_size for p in AICONFIGURATOR_ENGINES_DIR.iterdir())
    assert size < 4 * 2**20, f"{size / 2**20:.1f} MiB"
