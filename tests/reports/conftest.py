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
def built_report(tmp_path_factory, smoke_scores, serve_scores, report_cfg):
    """A report of the smoke run with a serve table, compared with a previous run 10% faster, in process."""
    import dataclasses

    from tilecast.pipelines.report import settings_from_config
    from tilecast.reports.build import build_report
    from tilecast.reports.diff import compare_runs
    from tilecast.reports.tables import Slice

    settings, fleet = settings_from_config(report_cfg)
    settings = dataclasses.replace(settings, slice=Slice(seq_len=512))  # the smoke matrix's length
    tonight = smoke_scores.copy()
    tonight.loc[tonight["error"].isna(), "e2e_ms"] *= 1.10
    diff = compare_runs(tonight, smoke_scores, "2026-01-02", "2026-01-01", settings.diff_threshold)
    directory = tmp_path_factory.mktemp("report")
    build_report(directory, tonight, {"date": "2026-01-02", "matrix": "smoke", "predictor": "roofline"}, settings,
                 fleet, diff, serve=serve_scores, previous_serve=serve_scores)
    return directory
