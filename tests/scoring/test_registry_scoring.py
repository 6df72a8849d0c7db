"""Scoring with registered models: versions pinned and models loaded once on the client, shipped to the workers
(or, without a shipped copy, loaded once by each worker from the store)."""

import json

import mlflow
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster

from tilecast.scoring.engine import score_cells
from tilecast.scoring.graphs import build_graphs, dedupe_ops
from tilecast.scoring.matrix import GRAPH_KEYS, expand, load_matrix
from tilecast.scoring.predictors import _PROBE_ROWS, PredictorSource, latency_chunk, resolve_source
from tilecast.scoring.pricing import load_pricing
from tilecast.scoring.schema import conform
from tilecast.tiles.ops import FAMILIES, FP32_FAMILIES, MOE_MLA_FAMILIES


def distinct_ops_of(cells):
    graphs = cells[list(GRAPH_KEYS)].drop_duplicates().head(3).reset_index(drop=True)
    rows, info = build_graphs(graphs.assign(graph_id=range(len(graphs))))
    return dedupe_ops(rows, info.set_index("graph_id")["degree"]).distinct


@pytest.fixture(scope="module")
def champions(sqlite_uri):
    """Roofline predictors registered for every family with @champion, on a throwaway sqlite store."""
    from tilecast.predictors import fit_predictor
    from tilecast.registry import configure, log_predictor, move_alias
    from tilecast.registry.tracking import ensure_experiment

    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    uri = configure(sqlite_uri)
    example = {"bmm": {"OPName": "bmm", "B": 2, "M": 64, "N": 64, "K": 64},
               "linear": {"OPName": "linear", "B": 1, "M": 64, "N": 64, "K": 64},
               "elementwise": {"OPName": "add", "B": 64, "H": 512}, "softmax": {"OPName": "softmax", "B": 64, "H": 512},
               "layernorm": {"OPName": "ln", "B": 64, "H": 512},
               "tc_gemm": {"OPName": "linear", "B": 1, "M": 64, "N": 64, "K": 64, "H": 0, "dtype": "bf16"},
               "attn_prefill": {"OPName": "attn_prefill", "B": 2, "M": 64, "N": 64, "K": 64, "H": 4, "Hkv": 4,
                                "dtype": "bf16"},
               "attn_decode": {"OPName": "attn_decode", "B": 2, "M": 1, "N": 64, "K": 64, "H": 4, "Hkv": 4,
                               "dtype": "bf16"},
               "vec_half": {"OPName": "rmsnorm", "B": 64, "H": 512, "dtype": "bf16"},
               **{fam: _PROBE_ROWS[fam] for fam in MOE_MLA_FAMILIES}}  # their own dims
    with mlflow.start_run(experiment_id=ensure_experiment("scoring-test")):  # artifacts inside the store
        for fam in FAMILIES:
            mv = log_predictor(fit_predictor("roofline", fam, pd.DataFrame()),
                               pd.DataFrame([{**example[fam], "Device": "NVIDIA L4"}] * 2))
            move_alias(mv.name, "champion", mv.version, reason="test")
            if fam in FP32_FAMILIES:  # an alias only the fp32 families have (no tensor-core predictors)
                move_alias(mv.name, "fp32only", mv.version, reason="test")
    yield uri
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def test_registered_champions_score_like_the_roofline_and_load_once(champions, compose_cfg):
    from tilecast.registry import models
    from tilecast.scoring import predictors

    predictors._CACHE.clear()  # other tests in this process may have loaded models already
    models._CACHE.clear()
    cfg = compose_cfg("score", ["matrix=smoke"])
    cells = expand(load_matrix(cfg["matrix"]))
    pricing = load_pricing(cfg["pricing"])
    source = resolve_source("registry", "champion", champions)
    assert source.versions == {f: "1" for f in FAMILIES} and source.label == "registry@champion"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:  # a worker process: it configures MLflow and loads the models itself
        reg, _ = score_cells(cells, client, source, pricing)
        reg2, _ = score_cells(cells, client, source, pricing)

        def loaded() -> tuple[int, int]:
            from tilecast.registry import models
            from tilecast.scoring import predictors

            return len(predictors._CACHE), len(models._CACHE)

        assert list(client.run(loaded).values()) == [(0, 0)]  # the worker got the client's copy
        assert loaded() == (1, len(FAMILIES))  # which the client loaded once for both runs
        # without a shipped copy a worker loads every model itself, once, from the store
        ops = distinct_ops_of(cells)
        for _ in range(2):
            ms, errors = client.submit(latency_chunk, source, ops, ["l4", "a100_pcie_40gb"], pure=False).result()
            assert errors == {} and np.isfinite(ms).all()
        assert list(client.run(loaded).values()) == [(1, len(FAMILIES))]
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, Client(cluster) as client:
        roof, _ = score_cells(cells, client, PredictorSource("roofline"), pricing)
    ok = reg["error"].isna()
    assert ok.sum() == 45 and (reg.loc[ok, "dtype"] == "bf16").sum() == 6
    np.testing.assert_allclose(reg.loc[ok, "e2e_ms"], roof.loc[ok, "e2e_ms"], rtol=1e-9)
    pd.testing.assert_frame_equal(reg, reg2)
    assert (reg["predictor"] == "registry@champion").all()
    assert json.loads(reg["versions"].iloc[0]) == {f: "1" for f in FAMILIES}


def test_a_family_without_a_registered_model_fails_its_cells_only(champions, compose_cfg, thread_client):
    from tilecast.registry.models import RegistryError
    from tilecast.scoring.predictors import families_for

    cfg = compose_cfg("score", ["matrix=smoke"])
    cells = expand(load_matrix({**cfg["matrix"], "models": ["gpt2_large"], "batch_sizes": [8], "parallel": ["none"],
                                "fused": [False], "exclude": []}))
    source = resolve_source("registry", "fp32only", champions, families_for(cells["dtype"]))
    assert sorted(f for f, _ in source.missing) == ["attn_decode", "attn_prefill", "tc_gemm", "vec_half"]
    assert source.versions == {f: "1" for f in FP32_FAMILIES} and "tc_gemm: none registered" in source.describe()
    with pytest.raises(RegistryError, match="no alias @fp32only"):  # a missing fp32 family still stops the run
        resolve_source("registry", "fp32only", champions, FAMILIES, optional=())
    table, stats = score_cells(cells, thread_client, source, load_pricing(cfg["pricing"]))
    bad = table["error"].notna()
    assert bad.tolist() == (table["dtype"] == "bf16").tolist() and stats.failed_cells == 6
    assert table.loc[bad, "error"].str.contains("no predictor for family 'tc_gemm'").all()
    assert table.loc[bad, "error"].str.contains("tilecast-tc_gemm").all()  # names the model to register
    assert np.isfinite(table.loc[~bad, "e2e_ms"]).all()
    conform(table.assign(run_date="2026-01-01"))
