"""The sync report fitted to the terminal: at any width every cell whole and
no line wider than the console; many nodes folded into one row unless
--wide; the laggard first and marked; the scaling table with the line and
its extrapolation; the JSON; nothing without sync runs."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from oddnode.findings import Sensitivity, find_all
from oddnode.core.model import Dataset
from oddnode.report.sync import MAX_NODE_ROWS, print_sync, sync_json, sync_views
from support.sync_data import SyncCluster

MANY = [f"r{rack:02d}n{node:02d}" for rack in range(1, 6) for node in range(1, 9)]  # 40 nodes


def rendered(width: int, dataset: Dataset, **options) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, legacy_windows=False)
    findings = find_all(dataset, Sensitivity(), ["sync-laggard"])
    print_sync(console, dataset, findings, **options)
    return out.getvalue()


@pytest.fixture(scope="module")
def many() -> Dataset:
    return SyncCluster(MANY, laggards={"r03n05": (0.1, 2000.0)}, iterations=300, repetitions=2).dataset(seed=1)


@pytest.mark.parametrize("width", [60, 80, 100, 140])
def test_every_line_fits_and_every_cell_is_whole(many, width):
    text = rendered(width, many, extrapolate=1250)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    joined = " ".join(text.split())
    assert "r03n05" in text and f"{len(MANY) - MAX_NODE_ROWS + 1} other nodes (median)" in joined
    assert "time = a + b·ranks" in joined and "At 1250 ranks the line gives" in joined
    if width < 100:
        assert f"left out to fit {width} columns" in joined


def test_the_laggard_comes_first():
    dataset = SyncCluster(MANY[:8], laggards={"r01n06": (0.1, 2000.0)}).dataset(seed=2)
    text = rendered(200, dataset)
    rows = [line for line in text.splitlines() if line.startswith("│ r01n")]
    assert rows[0].startswith("│ r01n06") and len(rows) == 8


def test_wide_shows_every_node_and_column(many):
    text = rendered(60, many, wide=True)
    assert all(node in text for node in MANY) and "other nodes" not in text and "left out" not in text


def test_the_json_holds_every_node_the_line_and_the_extrapolation(many):
    document = json.loads(json.dumps(sync_json(many, extrapolate=1250)))
    (nodes,) = document["nodes"]
    assert len(nodes["nodes"]) == len(MANY) and nodes["series"] == "sync.allreduce.shuffled"
    lag = next(n for n in nodes["nodes"] if n["node"] == "r03n05")
    assert lag["excess_wait_us"] > lag["excess_floor_us"] and lag["last"] > lag["expected_last"]
    (scaling,) = document["scaling"]
    assert [p["ranks"] for p in scaling["points"]] == [2, 4, 8, 16, 32, 40]
    assert scaling["extrapolation"]["ranks"] == 1250 and scaling["fit"]["runs"] == 12


def test_nothing_is_shown_without_sync_runs():
    assert sync_views(Dataset()) == [] and sync_json(Dataset()) == {"nodes": [], "scaling": []}
