"""Graphs kept between runs: a warm run reuses them and gives the same table; other code misses the cache."""

import pandas as pd

from tilecast.scoring.engine import score_cells
from tilecast.scoring.graph_cache import GraphCache, code_fingerprint
from tilecast.scoring.matrix import expand, load_matrix
from tilecast.scoring.predictors import PredictorSource
from tilecast.scoring.pricing import load_pricing


def _score(client, cfg, cache):
    cells = expand(load_matrix(cfg["matrix"]))
    return score_cells(cells, client, PredictorSource("roofline"), load_pricing(cfg["pricing"]), cache=cache)


def test_warm_run_reuses_graphs_and_matches_the_cold_run(tmp_path, thread_client, compose_cfg):
    cfg = compose_cfg("score", ["matrix=smoke"])
    cold, s1 = _score(thread_client, cfg, GraphCache(tmp_path))
    warm, s2 = _score(thread_client, cfg, GraphCache(tmp_path))
    assert s1.cached_graphs == 0 and s2.cached_graphs == s2.graphs == 14  # failed graphs too: same code, same error
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
    keys = {"model": "m", "batch": 1, "seq_len": 1, "mode": "inference", "parallel": "none", "fused": False}
    info = pd.DataFrame([{**keys, "graph_error": None, "mem_error": None},
                         {**keys, "batch": 2, "graph_error": "WorkloadError: bad", "mem_error": None},
                         {**keys, "batch": 3, "graph_error": None, "mem_error": "ImportError: no module"}])
    rows = pd.DataFrame([{**keys, "kind": "mem"}, {**keys, "batch": 3, "kind": "mem"}])
    cache.save(rows, info)
    got_rows, got_info = cache.load()
    assert got_info["batch"].tolist() == [1, 2] and got_rows["batch"].tolist() == [1]
