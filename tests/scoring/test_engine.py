"""The smoke matrix through the engine on a real (in-process) Dask cluster: every cell, errors per cell."""

import numpy as np
import pandas as pd
import pytest

from tilecast.forecast import forecast
from tilecast.scoring.cluster import DaskConfig
from tilecast.scoring.engine import score_cells
from tilecast.scoring.matrix import CELL_KEYS, expand, load_matrix
from tilecast.scoring.metrics import FitPolicy
from tilecast.scoring.predictors import PredictorSource
from tilecast.scoring.pricing import load_pricing
from tilecast.scoring.schema import COLUMNS, conform


@pytest.fixture(scope="module")
def smoke(compose_cfg, thread_client):
    cfg = compose_cfg("score", ["matrix=smoke"])
    cells = expand(load_matrix(cfg["matrix"]))
    table, stats = score_cells(cells, thread_client, PredictorSource("roofline"), load_pricing(cfg["pricing"]),
                               FitPolicy(), DaskConfig(chunk_rows=40))
    return cells, table.assign(run_date="2026-01-01"), stats


def test_every_cell_once_in_input_order(smoke):
    cells, table, stats = smoke
    assert len(table) == len(cells) == stats.cells
    pd.testing.assert_frame_equal(table[list(CELL_KEYS)].reset_index(drop=True), cells[list(CELL_KEYS)])
    assert stats.graphs == len(cells.drop(columns="gpu").drop_duplicates()) == 14
    assert stats.distinct_ops < stats.op_rows and stats.tasks > 3  # several chunks of 40 ops
    conform(table)  # the written schema holds
    assert set(COLUMNS) <= set(table.columns)


def test_a_cell_that_cannot_be_forecast_carries_its_error_and_the_rest_are_scored(smoke):
    _, table, stats = smoke
    bad = table["error"].notna()
    # dp4 with a batch of 2 cannot split over 4 GPUs: those cells (one per GPU) fail, nothing else
    expected = (table["parallel"] == "dp4") & (table["batch"] == 2)
    assert bad.tolist() == expected.tolist() and stats.failed_cells == 3
    assert table.loc[bad, "error"].str.contains("batch=2 does not split evenly over 4").all()
    assert table.loc[bad, "e2e_ms"].isna().all()
    good = table.loc[~bad]
    assert np.isfinite(good["e2e_ms"]).all() and (good["e2e_ms"] > 0).all()
    assert (good["cost_per_1m_tokens_usd"] > 0).all() and (good["tokens_per_s"] > 0).all()
    assert (good["predictor"] == "roofline").all() and (good["versions"] == "{}").all()


def test_cells_equal_the_one_workload_forecast(smoke):
    _, table, _ = smoke
    for r in table.loc[table["error"].isna()].sample(6, random_state=1).itertuples(index=False):
        fc = forecast(r.model, r.gpu, r.batch, r.seq_len, r.mode, None if r.parallel == "none" else r.parallel,
                      r.fused)
        assert r.e2e_ms == pytest.approx(fc.e2e_ms, rel=1e-9)
        assert r.ms_linear == pytest.approx(fc.by_group_ms["linear"], rel=1e-9)
        assert r.samples_per_s == pytest.approx(r.batch / (fc.e2e_ms / 1e3))


def test_a_grid_where_every_cell_fails_still_returns_every_cell(thread_client, compose_cfg):
    cfg = compose_cfg("score", ["matrix=smoke"])
    cells = expand(load_matrix({**cfg["matrix"], "models": ["gpt2_large"], "batch_sizes": [2], "modes": ["training"],
                                "parallel": ["dp4"], "exclude": []}))
    table, stats = score_cells(cells, thread_client, PredictorSource("roofline"), load_pricing(cfg["pricing"]))
    assert len(table) == len(cells) == 3 * 2 and table["error"].notna().all()  # fused and not, 3 GPUs
    assert stats.failed_cells == 6 and stats.distinct_ops == 0
    conform(table.assign(run_date="2026-01-01"))
