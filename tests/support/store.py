"""The store fixture: an empty store in the test's own directory."""

from __future__ import annotations

import pytest

from oddnode.store import open_store


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "test.duckdb") as opened:
        yield opened
