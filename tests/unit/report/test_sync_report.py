"""The HTML report's synchronisation section: a table per operation and
ordering, every node's row, the laggard marked; none without sync runs."""

from __future__ import annotations

import pytest

from oddnode.judge.analysis import analyze
from oddnode.report.html import render_report
from oddnode.report.sync import sync_section
from oddnode.store import open_store
from support.series import memory
from support.sync_data import SyncCluster
from oddnode.core.model import Dataset

NODES = [f"r1n{i:02d}" for i in range(1, 9)]


@pytest.mark.slow
def test_the_laggard_is_marked_in_its_table(tmp_path):
    with open_store(tmp_path / "s.duckdb") as store:
        SyncCluster(NODES, laggards={"r1n05": (0.6, 300.0)}).store(store)
        analysis = analyze(store.load_dataset(), correlations=False)
    section = sync_section(analysis)
    assert section["flagged"] == ["r1n05"] and section["tables"]
    (table,) = section["tables"]
    assert [row[0] for row in table["rows"]] == NODES and len(table["rows"][0]) == len(section["columns"])
    html = render_report(analysis)
    assert '<section id="sync">' in html and '<tr class="sev-warning"><td class="">r1n05</td>' in html


def test_a_store_without_sync_runs_has_no_section():
    analysis = analyze(Dataset(series=[memory(NODES, {})]), correlations=False)
    assert sync_section(analysis) is None and '<section id="sync">' not in render_report(analysis)
