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
