"""Shared fixtures: a fresh store per test and helpers to write result files."""

from __future__ import annotations

from pathlib import Path

import pytest

from oddnode.store import open_store


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "test.duckdb") as opened:
        yield opened


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def pytest_collection_modifyitems(items):
    """Tests that build a testbed are marked ``testbed``: ``make test-fast``
    leaves them out (they need root and take most of the suite's time)."""
    for item in items:
        if any("testbed needs root" in str(mark.kwargs.get("reason", "")) for mark in item.iter_markers("skipif")):
            item.add_marker(pytest.mark.testbed)
