"""A matrix's train_runs section: validated, expanded, scored per run (the same numbers as forecast_train_run),
errors per cell, the table's schema; a score run writes train_scores.parquet and the report shows it."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tilecast.forecast.train_run import forecast_train_run
from tilecast.pipelines.score import TRAIN_SCORES, ScoreSettings, read_train, run_score
from tilecast.scoring.cluster import DaskConfig
from tilecast.scoring.matrix import TRAIN_KEYS, MatrixError, expand_train_runs, load_matrix
from tilecast.scoring.pricing import load_pricing
from tilecast.scoring.train_runs import TRAIN_COLUMNS, conform_train, score_train_runs
from tilecast.specs.train_run import TrainRun

BASE = {"models": ["gpt2_large"], "gpus": ["l4"], "batch_sizes": [1], "seq_lens": [512], "modes": ["inference"]}
TRAIN = {"models": ["llama31_8b", "llama31_70b"], "gpus": ["h100_sxm_80gb", "a10", "tesla_t4"], "n_gpus": [64, 256],
         "seq_len": 4096, "global_batch": 512, "sharding": ["zero3"], "activation_checkpointing": ["full", "none"],
         "train_tokens": 1.0e+11}


@pytest.fixture(scope="module")
def scored(compose_cfg):
    pricing = load_pricing(compose_cfg("score")["pricing"])
    matrix = load_matrix({**BASE, "train_runs": TRAIN})
    cells = expand_train_runs(matrix)
    return matrix, cells, score_train_runs(cells, matrix.train_runs, None, pricing)


def test_section_is_validated():
    for bad, text in (({"sharding": ["zero7"]}, "train_runs.sharding"), ({"n_gpus": [0]}, "train_runs.n_gpus"),
                      ({"bogus": 1}, "unknown field 'bogus'"), ({"train_tokens": -1}, "train_tokens"),
                      ({"dtypes": ["fp32"]}, "train_runs.dtypes")):
        with pytest.raises(MatrixError, match=text):
            load_matrix({**BASE, "train_runs": {**TRAIN, **bad}})
    assert load_matrix(BASE).train_runs is None and expand_train_runs(load_matrix(BASE)).empty


def test_one_row_per_cell_with_the_forecast_numbers(scored):
    matrix, cells, out = scored
    assert len(out) == 2 * 3 * 2 * 2 and list(out[list(TRAIN_KEYS)].columns) == list(TRAIN_KEYS)
    table = conform_train(out.assign(predictor="roofline", versions="{}", run_date="2026-12-01"))
    assert tuple(table.schema.names) == TRAIN_COLUMNS
    ok = out.loc[out["error"].isna()]
    row = ok.loc[(ok["model"] == "llama31_8b") & (ok["gpu"] == "h100_sxm_80gb")].iloc[0]
    run = TrainRun("llama31_8b", 4096, 1, int(row["n_gpus"]), global_batch=512, sharding="zero3",
                   activation_checkpointing=row["activation_checkpointing"])
    fc = forecast_train_run(run, "h100_sxm_80gb")
    assert row["tokens_per_s_per_gpu"] == pytest.approx(fc.tokens_per_s_per_gpu, rel=1e-9)
    assert row["mfu_pct"] == pytest.approx(fc.mfu_pct, rel=1e-9)
    assert row["days_to_train"] == pytest.approx(1e11 / fc.tokens_per_s / 86400, rel=1e-9)
    assert row["usd_to_train"] == pytest.approx(row["usd_per_1b_tokens"] * 100, rel=1e-9)


def test_errors_and_misfits_stay_with_their_cells(scored):
    _, _, out = scored
    t4 = out["gpu"] == "tesla_t4"
    assert out.loc[t4, "error"].str.contains("bf16 is unsupported").all()
    assert out.loc[t4, ["step_s", "usd_per_1b_tokens"]].isna().all().all()
    misfit = out.loc[out["error"].isna() & ~out["fits"].fillna(True).astype(bool)]
    assert len(misfit) and misfit["step_s"].notna().all() and misfit["fits_with"].notna().all()
    big_a10 = out.loc[(out["gpu"] == "a10") & (out["model"] == "llama31_70b") & (out["n_gpus"] == 64)
                      & (out["activation_checkpointing"] == "none")]
    assert not big_a10["fits"].iloc[0]


def test_a_score_run_writes_the_training_table_and_the_report_shows_it(tmp_path, compose_cfg):
    cfg = compose_cfg("score", ["matrix=smoke"])
    small = {**TRAIN, "models": ["llama31_8b"], "gpus": ["h100_sxm_80gb", "a10"], "n_gpus": [64],
             "activation_checkpointing": ["full"]}
    settings = ScoreSettings(matrix={**cfg["matrix"], "train_runs": small}, pricing=cfg["pricing"],
                             dask=DaskConfig(n_workers=1, threads_per_worker=1, processes=False),
                             predictor="roofline", output_dir=tmp_path, date="2026-12-01", progress=False,
                             graph_cache=False)
    run = run_score(settings)
    assert (run.path / TRAIN_SCORES).exists() and len(run.train) == 2
    back = read_train(run.path)
    assert back["predictor"].eq("roofline").all() and back["run_date"].eq("2026-12-01").all()
    assert pq.read_schema(run.path / TRAIN_SCORES).names == list(TRAIN_COLUMNS)
    from tilecast.pipelines.report import run_report, settings_from_config

    report_settings, fleet = settings_from_config(compose_cfg("report"))
    md = run_report(tmp_path, "latest", report_settings, fleet).markdown.read_text()
    assert "Training runs at scale: cost per 1B tokens and days to train" in md
    assert "| llama31_8b | 64 | amp_bf16 | zero3 | full | 1 |" in md
