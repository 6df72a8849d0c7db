"""Shared fixtures: the project's shipped data (data/neusight), never ../shared; the suite's one hypothesis profile.

The suite runs on pytest-xdist (``python -m pytest -q -n auto``, as CI does): every test must be safe in a worker
process beside another one (files in ``tmp_path`` only, ports picked free, no order dependence); what costs
seconds to build is built once per worker with a ``scope="session"`` fixture (see ``tests/README.md``).
"""

import os

import pytest
from hypothesis import HealthCheck, settings

#: one profile for every property test: no per-example deadline (a loaded 2-core machine, two xdist workers
#: and a first call that builds a cache make timing flaky, never a failure of the property), derandomised in CI
#: so a failure reproduces. A test's own ``@settings(max_examples=...)`` still applies on top of it.
settings.register_profile("tilecast", deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          derandomize=os.environ.get("CI") == "true", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "tilecast"))


def pytest_configure(config):
    """The jobs' Hydra schemas (``<job>_schema``, :mod:`tilecast.cli.schema`) in Hydra's ConfigStore, as a job registers
    its own before Hydra composes: tests compose the jobs' configs in process."""
    from tilecast.cli.schema import register_all

    register_all()


@pytest.fixture(scope="session")
def test_kernels():
    """``test_kernels(name)`` -> the shipped kernel test table ``name`` (bmm, linear, elem, ln, softmax)."""
    from tilecast.data import load_kernels

    cache = {}

    def load(name: str):
        if name not in cache:
            cache[name] = load_kernels("test", name)
        return cache[name]

    return load


@pytest.fixture(scope="session", autouse=True)
def repo_store_untouched():
    """No test may write into the repository's own MLflow store (``mlruns/``): every test uses a throwaway
    store. A run or logged model under the Default experiment of a fresh sqlite store lands in
    ``./mlruns`` (relative to the working directory) unless the experiment names its artifact location."""
    from tilecast.paths import MLRUNS_DIR

    def snapshot() -> set[str]:
        return {str(p.relative_to(MLRUNS_DIR)) for p in MLRUNS_DIR.rglob("*")} if MLRUNS_DIR.exists() else set()

    before = snapshot()
    yield
    added = sorted(snapshot() - before)
    assert not added, f"tests wrote into {MLRUNS_DIR}: {added[:5]}"
