"""The smoke matrix through the engine on a real (in-process) Dask cluster: every cell, errors per cell."""

import numpy as np
import pandas as pd
import pytest

from tests.fixtures import smoke_with_failures
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
    cells = expand(load_matrix(smoke_with_failures(cfg["matrix"])))
    table, stats = score_cells(cells, thread_client, PredictorSource("roofline"), load_pricing(cfg["pricing"]),
                               FitPolicy(), DaskConfig(chunk_rows=40))
    return cells, table.assign(run_date="2026-01-01"), stats


def test_every_cell_once_in_input_order(smoke):
    cells, table, stats = smoke
    assert len(table) == len(cells) == stats.cells
    pd.testing.assert_frame_equal(table[list(CELL_KEYS)].reset_index(drop=True), cells[list(CELL_KEYS)])
    assert stats.graphs == len(cells.drop(columns="gpu").drop_duplicates()) == 16  # 14 fp32, 2 bf16
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
    fits = good["fits"].fillna(True).astype(bool)  # a cell that does not fit has no throughput and no cost
    assert (good.loc[fits, "cost_per_1m_tokens_usd"] > 0).all() and (good.loc[fits, "tokens_per_s"] > 0).all()
    assert good.loc[~fits, ["cost_per_1m_tokens_usd", "tokens_per_s"]].isna().all().all()
    assert (good["predictor"] == "roofline").all() and (good["versions"] == "{}").all()


def test_cells_equal_the_one_workload_forecast(smoke):
    _, table, _ = smoke
    ok = table.loc[table["error"].isna()]
    sample = pd.concat([ok.loc[ok["dtype"] == "fp32"].sample(5, random_state=1),
                        ok.loc[ok["dtype"] == "bf16"].sample(3, random_state=1)])
    for r in sample.itertuples(index=False):
        fc = forecast(r.model, r.gpu, r.batch, r.seq_len, r.mode, None if r.parallel == "none" else r.parallel,
                      r.fused, dtype=r.dtype)
        assert r.e2e_ms == pytest.approx(fc.e2e_ms, rel=1e-9)
        for group in ("linear", "tc_gemm", "attn_prefill", "elementwise"):
            assert getattr(r, f"ms_{group}") == pytest.approx(fc.by_group_ms[group], rel=1e-9, abs=1e-12)
        assert r.samples_per_s == pytest.approx(r.batch / (fc.e2e_ms / 1e3))


def test_a_grid_where_every_cell_fails_still_returns_every_cell(thread_client, compose_cfg):
    cfg = compose_cfg("score", ["matrix=smoke"])
    cells = expand(load_matrix({**cfg["matrix"], "models": ["gpt2_large"], "batch_sizes": [2], "modes": ["training"],
                                "parallel": ["dp4"], "dtypes": ["fp32"], "exclude": []}))
    table, stats = score_cells(cells, thread_client, PredictorSource("roofline"), load_pricing(cfg["pricing"]))
    assert len(table) == len(cells) == 3 * 2 and table["error"].notna().all()  # fused and not, 3 GPUs
    assert stats.failed_cells == 6 and stats.distinct_ops == 0
    conform(table.assign(run_date="2026-01-01"))


def test_bf16_cells_differ_from_fp32_and_run_faster_on_tensor_cores(smoke):
    _, table, _ = smoke
    keys = ["model", "gpu", "batch", "seq_len", "mode", "parallel", "fused"]
    bf16 = table.loc[table["dtype"] == "bf16"].set_index(keys)
    fp32 = table.loc[table["dtype"] == "fp32"].set_index(keys).loc[bf16.index]
    assert len(bf16) == 6 and bf16["error"].isna().all()
    # every smoke GPU has bf16 tensor cores: GEMMs leave the fp32 families for tc_gemm, and the step is faster
    assert (bf16["e2e_ms"] < 0.5 * fp32["e2e_ms"]).all()
    assert (bf16["ms_tc_gemm"] > 0).all() and (bf16["ms_linear"] == 0).all() and (bf16["ms_bmm"] == 0).all()
    assert (fp32["ms_tc_gemm"] == 0).all() and (fp32["ms_attn_prefill"] == 0).all()
    assert (bf16["ms_attn_prefill"] > 0).all()  # half precision runs fused attention
    assert (bf16["mem_required_gib"] < fp32["mem_required_gib"]).all()
    both_fit = (bf16["fits"] & fp32["fits"]).fillna(False).astype(bool)  # no throughput where a cell does not fit
    assert both_fit.any() and (bf16.loc[both_fit, "tokens_per_s"] > fp32.loc[both_fit, "tokens_per_s"]).all()


def test_an_unsupported_gpu_dtype_pair_fails_alone(thread_client, compose_cfg):
    cfg = compose_cfg("score", ["matrix=smoke"])
    cells = expand(load_matrix({"name": "t", "models": ["gpt2_large"], "batch_sizes": [4], "seq_lens": [512],
                                "gpus": ["tesla_v100_pcie_32gb", "a100_pcie_40gb", "h100_sxm_80gb"],
                                "modes": ["inference", "training"], "dtypes": ["fp32", "fp8", "fp16"]}))
    table, stats = score_cells(cells, thread_client, PredictorSource("roofline"), load_pricing(cfg["pricing"]))
    bad = table["error"].notna()
    # neither the V100 nor the A100 has an fp8 peak: those cells (one per mode) fail, every other cell is scored
    expected = (table["dtype"] == "fp8") & table["gpu"].isin(["tesla_v100_pcie_32gb", "a100_pcie_40gb"])
    assert bad.tolist() == expected.tolist() and stats.failed_cells == stats.unsupported_cells == 4
    for r in table.loc[bad].itertuples(index=False):
        assert r.error.startswith(f"dtype fp8 is not supported on GPU {r.gpu}: ")
        assert "no published dense fp8 peak" in r.error
    assert table.loc[bad, "e2e_ms"].isna().all() and table.loc[bad, "tokens_per_s"].isna().all()
    good = table.loc[~bad]
    assert np.isfinite(good["e2e_ms"]).all() and (good["e2e_ms"] > 0).all() and len(good) == len(table) - 4
    assert any("tesla_v100_pcie_32gb/fp8" in n for n in stats.notes)
    h100 = table.loc[(table["gpu"] == "h100_sxm_80gb")].set_index(["mode", "dtype"])["e2e_ms"]
    assert (h100.xs("fp8", level="dtype") < h100.xs("fp16", level="dtype")).all()
    assert (h100.xs("fp16", level="dtype") < h100.xs("fp32", level="dtype")).all()
    conform(table.assign(run_date="2026-01-01"))


def test_a_forecast_error_goes_to_the_cells_whose_ops_it_hit():
    from tilecast.scoring.engine import OpErrors, _forecast_errors

    rows = pd.DataFrame({"graph_id": [0, 0, 1, 1, 2], "op_id": [0, 1, 1, 2, 3]})
    errors = OpErrors(np.full((4, 2), -1, dtype=np.int32))
    errors.add(np.array([2]), np.array([0]), "no predictor for family 'tc_gemm'")
    errors.add(np.array([3]), np.array([0, 1]), "ValueError: boom")
    errors.add(np.array([2, 3]), np.array([1]), "ValueError: boom")
    got = _forecast_errors(rows, errors, ["l4", "h100_sxm_80gb"]).sort_values(["gpu", "graph_id"])
    assert got[["graph_id", "gpu"]].values.tolist() == [[1, "h100_sxm_80gb"], [2, "h100_sxm_80gb"], [1, "l4"],
                                                        [2, "l4"]]
    assert got["forecast_error"].tolist() == ["forecast failed: ValueError: boom"] * 2 + [
        "forecast failed: no predictor for family 'tc_gemm'", "forecast failed: ValueError: boom"]
