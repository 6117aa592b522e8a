"""`oddnode stats` on a pair pattern: a row per message size, as STAB's ``anal spp cut bw``."""

import json

import pytest

from oddnode.core.model import Dataset, Direction, LabelKind
from oddnode.store import ResultBatch, open_store
from support.cli import oddnode

SIZES = (0, 256, 1024, 65536)
PAIRS = ("node1-node5", "node2-node6", "node3-node7", "node4-node8")


@pytest.fixture
def pair_store(tmp_path):
    batch = ResultBatch()
    for index, pair in enumerate(PAIRS):
        for size in SIZES:
            batch.add("pingpong.cut", pair, 10.0 + index, metric=f"latency.{size}", unit="us",
                      direction=Direction.LOWER, label_kind=LabelKind.PAIR, repetition=1)
            if size:
                batch.add("pingpong.cut", pair, size / 100 + index, metric=f"bandwidth.{size}", unit="MB/s",
                          label_kind=LabelKind.PAIR, repetition=1)
    with open_store(tmp_path / "pairs.duckdb") as store:
        store.add_results(store.new_run("test"), batch)
    return tmp_path


@pytest.mark.slow
def test_a_pattern_gives_a_row_per_message_size_in_size_order(pair_store):
    out = oddnode("stats", "pingpong.cut", "--db", "pairs.duckdb", cwd=pair_store).stdout
    rows = [line.strip("│ ").split()[0] for line in out.splitlines() if "pingpong.cut:" in line]
    assert rows == [f"pingpong.cut:bandwidth.{s}" for s in SIZES[1:]] + [f"pingpong.cut:latency.{s}" for s in SIZES]


@pytest.mark.slow
def test_a_metric_prefix_picks_one_quantity_and_json_gives_the_rows(pair_store):
    out = oddnode("stats", "pingpong.cut:bandwidth", "--json", "--db", "pairs.duckdb", cwd=pair_store).stdout
    rows = json.loads(out)
    assert [row["metric"] for row in rows] == ["bandwidth.256", "bandwidth.1024", "bandwidth.65536"]
    assert all(row["n"] == 4 and row["population"] == "pair" and row["unit"] == "MB/s" for row in rows)
    assert rows[0]["low"] == pytest.approx(2.56) and rows[0]["high"] == pytest.approx(5.56)


@pytest.mark.slow
def test_an_unknown_name_says_which_benchmarks_there_are(pair_store):
    result = oddnode("stats", "pingpong.sort", "--db", "pairs.duckdb", cwd=pair_store, check=False)
    assert result.returncode != 0 and "pingpong.cut" in result.stderr + result.stdout


def test_select_prefers_an_exact_series_name_then_the_benchmark(pair_store):
    with open_store(pair_store / "pairs.duckdb", read_only=True) as store:
        dataset = store.load_dataset()
    assert [s.name for s in dataset.select("pingpong.cut:latency.256")] == ["pingpong.cut:latency.256"]
    assert len(dataset.select("pingpong.cut")) == 7
    with pytest.raises(KeyError, match="benchmarks: pingpong.cut"):
        dataset.select("pingpong.cut:jitter")
    assert pytest.raises(KeyError, Dataset().select, "anything")
