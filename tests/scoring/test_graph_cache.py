"""Graphs kept between runs: a warm run reuses them and gives the same table; other code misses the cache."""

import pandas as pd

from tests.fixtures import smoke_with_failures
from tilecast.scoring.engine import score_cells
from tilecast.scoring.graph_cache import GraphCache, code_fingerprint
from tilecast.scoring.graphs import FRAME_COLUMNS
from tilecast.scoring.matrix import expand, load_matrix
from tilecast.scoring.predictors import PredictorSource
from tilecast.scoring.pricing import load_pricing


def _score(client, cfg, cache):
    cells = expand(load_matrix(cfg["matrix"]))
    return score_cells(cells, client, PredictorSource("roofline"), load_pricing(cfg["pricing"]), cache=cache)


def test_warm_run_reuses_graphs_and_matches_the_cold_run(tmp_path, thread_client, compose_cfg):
    cfg = compose_cfg("score", ["matrix=smoke"])
    cfg = {**cfg, "matrix": smoke_with_failures(cfg["matrix"])}
    cold, s1 = _score(thread_client, cfg, GraphCache(tmp_path))
    warm, s2 = _score(thread_client, cfg, GraphCache(tmp_path))
    assert s1.cached_graphs == 0 and s2.cached_graphs == s2.graphs == 16  # failed graphs too: same code, same error
    pd.testing.assert_frame_equal(cold, warm)
    other, s3 = _score(thread_client, cfg, GraphCache(tmp_path, fingerprint="another-code"))
    assert s3.cached_graphs == 0
    other_opt, s4 = _score(thread_client, cfg, GraphCache(tmp_path, variant="optimizer=None"))
    assert s4.cached_graphs == 0
    assert len(list(tmp_path.glob("graphs-*.parquet"))) == 6  # three caches side by side


def test_fingerprint_follows_the_graph_code(tmp_path):
    fp = code_fingerprint()
    assert fp == code_fingerprint() and len(fp) == 16
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    assert code_fingerprint(conf) != fp  # the model catalog is part of it


def test_transient_failures_are_not_kept(tmp_path):
    cache = GraphCache(tmp_path)
    keys = {"model": "m", "batch": 1, "seq_len": 1, "mode": "inference", "parallel": "none", "fused": False,
            "dtype": "fp32", "kv_len": 0, "serving": False}
    ok = {"graph_error": None, "mem_error": None}
    info = pd.DataFrame([{**keys, **ok, "graph_id": 0},
                         {**keys, **ok, "graph_id": 1, "batch": 2, "graph_error": "WorkloadError: bad"},
                         {**keys, **ok, "graph_id": 2, "batch": 3, "mem_error": "ImportError: no module"}])
    op = {c: 0 for c in FRAME_COLUMNS} | {"phase": "fw", "kind": "mem", "op": "mem", "dtype": "fp32"}
    rows = pd.DataFrame([{**op, "graph_id": 0}, {**op, "graph_id": 2}])
    cache.save(rows, info)
    got_rows, got_info = cache.load()
    assert got_info["batch"].tolist() == [1, 2] and got_rows["graph_id"].tolist() == [0]


def test_dtype_is_part_of_a_cached_graphs_key(tmp_path, thread_client, compose_cfg):
    cfg = compose_cfg("score", ["matrix=smoke"])
    cfg = {**cfg, "matrix": smoke_with_failures(cfg["matrix"])}
    fp32 = {**cfg, "matrix": {**cfg["matrix"], "dtypes": ["fp32"]}}
    _, s1 = _score(thread_client, fp32, GraphCache(tmp_path))
    both, s2 = _score(thread_client, cfg, GraphCache(tmp_path))
    assert s1.graphs == 14 and s2.cached_graphs == 14 and s2.graphs == 16  # the bf16 graphs are built, not reused
    fresh, _ = _score(thread_client, cfg, None)
    pd.testing.assert_frame_equal(both, fresh)


def test_a_cache_of_another_layout_is_rebuilt_not_read(tmp_path):
    cache = GraphCache(tmp_path, fingerprint="same-code")
    keys = {"model": "m", "batch": 1, "seq_len": 1, "mode": "inference", "parallel": "none", "fused": False}
    # the first layout: no dtype, op rows keyed by the graph keys
    old_info = pd.DataFrame([{**keys, "graph_error": None, "mem_error": None}])
    old_rows = pd.DataFrame([{**keys, "phase": "fw", "kind": "mem", "op": "mem", "count": 1}])
    old_rows.to_parquet(cache.rows_path)
    old_info.to_parquet(cache.info_path)
    assert cache.load() is None
    assert GraphCache(tmp_path, fingerprint="same-code").fingerprint != "same-code"  # the layout version is in the name
