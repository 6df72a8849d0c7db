"""Shared fixtures: the project's shipped data (data/neusight), never ../shared."""

import pytest


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
