"""A real score table for the report tests: the smoke matrix scored with the roofline on an in-process Dask
cluster, plus composed report configs."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tilecast.paths import CONF_DIR


def _compose(name: str, overrides: list[str] | None = None) -> dict:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return OmegaConf.to_container(compose(config_name=name, overrides=overrides or []), resolve=True)


@pytest.fixture(scope="session")
def report_cfg() -> dict:
    return _compose("report")


@pytest.fixture(scope="session")
def smoke_scores():
    """The smoke matrix (2 models x 3 GPUs, inference / fused / training / dp4) scored end to end, with the
    three dp4 x batch-2 cells it excludes put back as failed cells (`tests.fixtures.smoke_with_failures`)."""
    from distributed import Client, LocalCluster

    from tests.fixtures import smoke_with_failures
    from tilecast.scoring.engine import score_cells
    from tilecast.scoring.matrix import expand, load_matrix
    from tilecast.scoring.predictors import PredictorSource
    from tilecast.scoring.pricing import load_pricing

    cfg = _compose("score", ["matrix=smoke"])
    cells = expand(load_matrix(smoke_with_failures(cfg["matrix"])))
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        table, _ = score_cells(cells, client, PredictorSource("roofline"), load_pricing(cfg["pricing"]))
    return table.assign(run_date="2026-01-01")


@pytest.fixture(scope="session")
def serve_scores():
    """A real serve table: Llama-3.1-8B on three GPUs, bf16 and fp8, tp 1 and 2, three concurrencies
    (:mod:`tests.reports.serve_data`)."""
    from tests.reports.serve_data import serve_frame

    return serve_frame()


@pytest.fixture(scope="session")
def train_scores():
    """A real training-run table: Llama-3.1-8B on three GPUs (one without a bf16 peak) at 8 and 64 GPUs, ZeRO-3 and
    ZeRO-1, full checkpointing, scored with the roofline as the nightly scores its train_runs section."""
    from tilecast.scoring.matrix import TrainMatrix, expand_train_runs, load_matrix
    from tilecast.scoring.pricing import load_pricing
    from tilecast.scoring.train_runs import score_train_runs

    cfg = _compose("score", ["matrix=smoke"])
    section = {"models": ["llama31_8b"], "gpus": ["h100_sxm_80gb", "a100_sxm4_80gb", "tesla_t4"], "n_gpus": [8, 64],
               "seq_len": 4096, "global_batch": 256, "sharding": ["zero3", "zero1"],
               "activation_checkpointing": ["full"]}
    matrix = load_matrix({**cfg["matrix"], "train_runs": section})
    assert isinstance(matrix.train_runs, TrainMatrix)
    table = score_train_runs(expand_train_runs(matrix), matrix.train_runs, None, load_pricing(cfg["pricing"]))
    return table.assign(predictor="roofline", versions="{}", run_date="2026-01-01")


#: the questions of the test report: two the serve table answers (one impossible), one it does not hold, and
#: a training question
TEST_QUESTIONS = (
    {"model": "llama31_8b", "isl": 1024, "osl": 256, "ttft_ms": 2000, "tpot_ms": 50, "rate_per_min": 600},
    {"model": "llama31_8b", "isl": 1024, "osl": 256, "ttft_ms": 1, "tpot_ms": 0.1, "rate_per_min": 600},
    {"model": "llama31_70b", "isl": 1024, "osl": 1024, "ttft_ms": 1000, "tpot_ms": 40, "rate_per_min": 100},
    {"name": "fine-tuning", "model": "llama31_8b", "tokens": 2e9, "days": 3},
)


@pytest.fixture(scope="session")
def built_report(tmp_path_factory, smoke_scores, serve_scores, train_scores, report_cfg):
    """A report of the smoke run with serve and training tables and plans, compared with a previous run 10% faster,
    in process."""
    import dataclasses

    from tilecast.pipelines.report import settings_from_config
    from tilecast.reports.build import build_report
    from tilecast.reports.diff import compare_runs
    from tilecast.reports.plans import answer_all, load_questions
    from tilecast.reports.tables import Slice

    settings, fleet = settings_from_config(report_cfg)
    settings = dataclasses.replace(settings, slice=Slice(seq_len=512), questions=load_questions(TEST_QUESTIONS))
    tonight = smoke_scores.copy()
    tonight.loc[tonight["error"].isna(), "e2e_ms"] *= 1.10
    diff = compare_runs(tonight, smoke_scores, "2026-01-02", "2026-01-01", settings.diff_threshold)
    directory = tmp_path_factory.mktemp("report")
    plans = answer_all(settings.questions, serve_scores, train_scores)
    build_report(directory, tonight, {"date": "2026-01-02", "matrix": "smoke", "predictor": "roofline"}, settings,
                 fleet, diff, serve=serve_scores, previous_serve=serve_scores, train=train_scores, plans=plans,
                 previous_plans=plans)
    return directory
