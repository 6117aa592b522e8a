"""Bisection bandwidth: its arithmetic, and the runner on a scripted cluster
whose switch shares a fixed capacity between the pairs streaming at once."""

from __future__ import annotations


import pytest

from oddnode.measure.pair.bisection import (
    ALONE_BENCHMARK,
    BISECTION_BENCHMARK,
    CUT_BENCHMARK,
    bisection_figures,
    repetition_sums,
    run_bisection,
)
from oddnode.reach.base import Target
from support.clusters.pairs import NODES
from support.clusters.bisection import BisectionCluster as SwitchCluster, OPTIONS


def test_demonstrated_is_the_best_sum_and_full_is_pairs_times_the_median_alone():
    pairs = ["a-e", "b-f", "c-g", "d-h"]
    concurrent = [{"a-e": 100.0, "b-f": 110.0, "c-g": 90.0, "d-h": 100.0},
                  {"a-e": 120.0, "b-f": 120.0, "c-g": 120.0, "d-h": None}]
    figures = bisection_figures(concurrent, {"a-e": 300.0, "b-f": 280.0, "c-g": 320.0, "d-h": 100.0}, pairs)
    assert repetition_sums(concurrent, pairs) == [400.0, None]
    assert figures.demonstrated == 400.0  # the second repetition lacks a pair: no sum
    assert figures.single_pair == 290.0 and figures.full == 4 * 290.0
    assert figures.fraction == pytest.approx(400.0 / 1160.0)
    empty = bisection_figures([{"a-e": None}], {}, ["a-e"])
    assert empty.demonstrated is None and empty.full is None and empty.fraction is None


@pytest.mark.slow
def test_cut_pairs_stream_at_once_then_alone_and_the_figures_are_stored(store):
    cluster = SwitchCluster(link=1000.0, capacity=2000.0)
    summary = run_bisection(store, Target(NODES, cluster), 2, options=OPTIONS)
    cut = [("node01", "node05"), ("node02", "node06"), ("node03", "node07"), ("node04", "node08")]
    # Per repetition: the four cut pairs at once, then each alone.
    assert cluster.rounds == 2 * ([cut] + [[pair] for pair in cut])
    assert summary.concurrent == {f"{a}-{b}": pytest.approx(500.0) for a, b in cut}
    assert summary.alone == {f"{a}-{b}": pytest.approx(1000.0) for a, b in cut}
    assert summary.figures.demonstrated == pytest.approx(2000.0)
    assert summary.figures.full == pytest.approx(4000.0) and summary.figures.fraction == pytest.approx(0.5)
    assert summary.nodes == "node[01-08]" and summary.notes == []
    rows = dict(store.con.execute(f"""SELECT metric, value FROM best WHERE benchmark = '{BISECTION_BENCHMARK}'
                                      AND label = 'node[01-08]'""").fetchall())
    assert rows == pytest.approx({"demonstrated": 2000.0, "single_pair": 1000.0, "full": 4000.0, "fraction": 0.5})
    kinds = dict(store.con.execute("SELECT benchmark, any_value(label_kind) FROM results GROUP BY 1").fetchall())
    assert kinds == {CUT_BENCHMARK: "pair", ALONE_BENCHMARK: "pair", BISECTION_BENCHMARK: "set"}
    (concurrency,) = store.con.execute(f"""SELECT DISTINCT json_extract(parameters, '$.concurrency')::INT
                                           FROM results WHERE benchmark = '{CUT_BENCHMARK}'""").fetchone()
    assert concurrency == 4


@pytest.mark.slow
def test_a_full_bisection_switch_reaches_one(store):
    summary = run_bisection(store, Target(NODES, SwitchCluster(capacity=1e9)), 1, options=OPTIONS)
    assert summary.figures.fraction == pytest.approx(1.0)


@pytest.mark.slow
def test_odd_count_leaves_a_node_out_and_a_dead_pair_voids_the_sum(store):
    cluster = SwitchCluster(down={"node06"})
    summary = run_bisection(store, Target(NODES[:7], cluster), 1, options=OPTIONS)
    assert "node07 sits out" in summary.notes[0]
    assert summary.per_pair["node03-node06"]["failed"] == 2
    assert summary.sums == [None] and summary.figures.demonstrated is None
    assert summary.figures.single_pair == pytest.approx(1000.0)
    (valid,) = store.con.execute(f"""SELECT valid FROM results WHERE benchmark = '{BISECTION_BENCHMARK}'
                                     AND metric = 'demonstrated'""").fetchone()
    assert valid is False


def test_repetitions_must_be_positive(store):
    with pytest.raises(ValueError):
        run_bisection(store, Target(NODES, SwitchCluster()), 0, options=OPTIONS)


@pytest.mark.slow
def test_the_report_shows_the_bisection_only_when_stored(store):
    from oddnode.judge.analysis import analyze
    from oddnode.report.html import render_report

    assert 'id="bisection"' not in render_report(analyze(store.load_dataset()))
    run_bisection(store, Target(NODES, SwitchCluster()), 1, options=OPTIONS)
    html = render_report(analyze(store.load_dataset()))
    assert 'id="bisection"' in html and "50.0%" in html and 'id="matrix"' not in html
