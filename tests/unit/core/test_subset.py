"""The part of a dataset about some nodes (analyze -w/-x): a node's own
results and facts follow it, a pair or set only with all its members."""

from __future__ import annotations

import numpy as np

from oddnode.core.model import Dataset, Direction, Failure, LabelKind, Series, SetRuns
from oddnode.core.subset import restricted


def series(benchmark: str, kind: LabelKind, labels: list[str]) -> Series:
    count = len(labels)
    return Series(benchmark, "value", "GB/s", Direction.HIGHER, kind, np.array(labels, dtype=object),
                  np.arange(1.0, count + 1), np.ones(count, dtype=np.int64), np.zeros(count))


def dataset() -> Dataset:
    return Dataset(
        series=[series("triad", LabelKind.NODE, ["r01n01", "r01n02", "r02n01"]),
                series("pingpong.cut", LabelKind.PAIR, ["r01n01-r01n02", "r01n02-r02n01"]),
                series("hpl", LabelKind.NODE, ["r02n01"])],
        failures=[Failure("triad", "r02n02", LabelKind.NODE, 1, ("r02n02",)),
                  Failure("pingpong.cut", "r01n01-r02n02", LabelKind.PAIR, 1, ("r01n01", "r02n02"))],
        facts={"cores": {"r01n01": "64", "r02n01": "64"}, "bios": {"r02n01": "1.2"}},
        declared_nodes=["r01n01", "r01n02", "r02n01", "r02n02"],
        set_runs=[SetRuns("sets.chain", "value", "MB/s", Direction.HIGHER,
                          np.array(["r01n[01-02]", "r0[1-2]n01"], dtype=object), np.array([1, 1]),
                          np.array([5.0, 6.0]))],
        details={"noise.lost_fraction": {"r01n01": [{}], "r02n01": [{}]}},
    )


def test_a_rack_keeps_its_nodes_pairs_and_sets_and_nothing_of_the_others():
    part = restricted(dataset(), lambda node: node.startswith("r01"))
    assert [(s.benchmark, s.labels.tolist()) for s in part.series] == [
        ("triad", ["r01n01", "r01n02"]), ("pingpong.cut", ["r01n01-r01n02"])]
    assert part.series[0].values.tolist() == [1.0, 2.0]
    assert part.failures == [] and part.facts == {"cores": {"r01n01": "64"}}
    assert part.declared_nodes == ["r01n01", "r01n02"]
    assert [runs.labels.tolist() for runs in part.set_runs] == [["r01n[01-02]"]]
    assert part.details == {"noise.lost_fraction": {"r01n01": [{}]}}


def test_leaving_one_node_out_keeps_everything_else_whole():
    whole = dataset()
    part = restricted(whole, lambda node: node != "r02n02")
    assert [s.labels.tolist() for s in part.series] == [s.labels.tolist() for s in whole.series]
    assert part.failures == [] and part.facts == whole.facts
    assert part.declared_nodes == ["r01n01", "r01n02", "r02n01"]
