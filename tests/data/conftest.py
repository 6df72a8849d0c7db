"""Fixtures for the data tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.data.neusight_tree import FILES, write_tree


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A fresh miniature source tree."""
    return write_tree(tmp_path / "neusight", FILES)
