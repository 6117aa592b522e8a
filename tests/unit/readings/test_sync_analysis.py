"""The readings of sync runs on simulated clusters with a known truth: the
line time = a + b·ranks and its extrapolation, the binomial tail with and
without dispersion, the dispersion of the last counts (left-one-out so a
laggard does not inflate it), the excess wait run by run, and the same
readings through a real store."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from oddnode.readings.sync import (
    RankRun,
    excess_wait,
    fit_time,
    last_dispersion,
    last_tail,
    set_runs_of,
    rank_runs,
    sync_nodes,
    sync_scaling,
)
from support.sync_data import QUANTUM, SyncCluster

NODES = [f"cn-a{i:02d}" for i in range(1, 13)]


def test_the_line_through_exact_points_is_found():
    fit = fit_time([2, 4, 8, 16, 2, 4], [1010, 1030, 1070, 1150, 1010, 1030])
    assert fit.a_us == pytest.approx(990.0) and fit.b_us == pytest.approx(10.0) and fit.runs == 6
    assert fit.at(1250) == pytest.approx(990 + 12500)


@pytest.mark.parametrize("ranks, times, message", [
    ([4, 4, 4], [1, 2, 3], "two node counts"),
    ([2, 4], [0, 10], "times positive"),
    ([2, 4], [1, float("nan")], "finite"),
    ([0, 4], [1, 2], "counts of at least 1"),
    ([2, 4, 8], [1, 2], "same length"),
])
def test_a_line_refuses_what_it_cannot_fit(ranks, times, message):
    with pytest.raises(ValueError, match=message):
        fit_time(ranks, times)


def test_the_scaling_reading_gives_medians_per_count_the_line_and_its_extrapolation():
    cluster = SyncCluster(NODES, laggards={"cn-a03": (0.2, 3000.0)}, repetitions=3)
    (scaling,) = sync_scaling(cluster.dataset(seed=4))
    assert [p.ranks for p in scaling.points] == [2, 4, 8, 12] and all(p.runs == 3 for p in scaling.points)
    # The median set's mean compute: the quantum and what the laggard's detours add to it.
    assert QUANTUM < scaling.compute_us < 1.2 * QUANTUM
    # Each run's time, the line through all of them: the residuals are small where it fits.
    assert scaling.fit is not None and scaling.fit.runs == 12
    for point in scaling.points:
        assert point.fitted_us == pytest.approx(scaling.fit.at(point.ranks))
        assert point.error == pytest.approx((point.fitted_us - point.time_us) / point.time_us)
        assert 0 < point.efficiency_pct < 100
    reached = scaling.extrapolate(1250)
    assert reached.ranks == 1250 and reached.time_us == pytest.approx(scaling.fit.at(1250))
    assert reached.efficiency_pct == pytest.approx(100 * scaling.compute_us / reached.time_us)
    assert reached.slowdown == pytest.approx(reached.time_us / scaling.points[0].time_us)
    document = scaling.to_json(1250)
    assert document["extrapolation"]["ranks"] == 1250 and document["fit"]["runs"] == 12


def test_one_node_count_has_points_but_no_line():
    (scaling,) = sync_scaling(SyncCluster(NODES[:4], counts=[4]).dataset())
    assert scaling.fit is None and scaling.extrapolate(100) is None and math.isnan(scaling.points[0].fitted_us)


def test_the_tail_is_the_binomial_for_sets_of_one_size_and_shrinks_with_dispersion():
    assert last_tail(40, 200, 25.0) == pytest.approx(binom.sf(39, 200, 0.125))
    assert last_tail(20, 200, 25.0) == 1.0  # at or below chance: nothing to test
    assert last_tail(40, 200, 25.0, dispersion=4.0) == pytest.approx(binom.sf(9, 50, 0.125))
    assert last_tail(40, 200, 25.0, dispersion=0.5) == last_tail(40, 200, 25.0)  # never below binomial


def run_of(lasts: list[int], iterations: int = 400, repetition: int = 1, extra: list[float] | None = None,
           names: list[str] | None = None) -> list[RankRun]:
    names = names or [f"n{i}" for i in range(len(lasts))]
    extra = extra or [1.0] * len(lasts)
    return [RankRun(node, repetition, iterations, len(lasts), last, 1000.0, e, 1000.0, 20.0, 98.0)
            for node, last, e in zip(names, lasts, extra)]


def test_binomial_counts_have_no_dispersion_and_stalled_ranks_do():
    rng = np.random.default_rng(0)
    even = [run_of(list(rng.multinomial(400, [1 / 8] * 8)), repetition=r) for r in range(20)]
    assert last_dispersion(even) < 1.6
    # Whole stretches of iterations last on one rank: counts far from even.
    lumpy = [run_of(list(50 * rng.multinomial(8, [1 / 8] * 8)), repetition=r) for r in range(20)]
    assert last_dispersion(lumpy) > 10


def test_a_laggard_does_not_inflate_the_dispersion_it_is_judged_against():
    rng = np.random.default_rng(1)
    runs = []
    for r in range(10):
        others = list(rng.multinomial(100, [1 / 7] * 7))
        runs.append(run_of([300, *others], repetition=r))  # n0 last in 3 of 4 iterations
    assert last_dispersion(runs) > 10  # everyone's counts around 1/8 are far off
    assert last_dispersion(runs, "n0") < 1.6  # the others share the rest evenly


def test_the_excess_wait_compares_each_run_with_its_own_median():
    runs = [run_of([100, 100, 100, 100], extra=[50.0, 10.0, 12.0, 11.0], repetition=1),
            # A set of two with inflated waits on both sides: no excess for either.
            run_of([200, 200], extra=[500.0, 480.0], repetition=2, names=["n0", "n9"])]
    assert excess_wait(runs, "n0") == pytest.approx((400 * (50 - 11.5) + 400 * (500 - 490)) / 800)
    assert excess_wait(runs, "n1") == pytest.approx(10 - 11.5)
    assert math.isnan(excess_wait(runs, "nobody"))


def test_incomplete_set_runs_are_left_out():
    ranks = run_of([100, 100, 200]) + run_of([400, 0], repetition=2)[:1]
    assert [len(r) for r in set_runs_of(ranks)] == [3]


def test_a_laggard_stands_out_in_every_column_of_its_row():
    (reading,) = sync_nodes(SyncCluster(NODES, laggards={"cn-a07": (0.1, 2000.0)}).dataset(seed=2))
    by_node = {n.node: n for n in reading.nodes}
    lag = by_node.pop("cn-a07")
    assert lag.ratio > 1.5 and lag.p < 1e-10 and lag.excess_wait_us > 100
    assert all(n.p > 1e-4 and n.excess_wait_us < 20 for n in by_node.values())
    assert lag.iterations == sum(r.iterations for r in rank_runs(SyncCluster(NODES).dataset(2))[
        ("allreduce", "shuffled")] if r.node == "cn-a07")
    assert reading.to_json()["nodes"][6]["node"] == "cn-a07"


def test_the_readings_are_the_same_through_a_real_store(store):
    cluster = SyncCluster(NODES, laggards={"cn-a02": (0.1, 2000.0)})
    cluster.store(store, seed=3)
    stored = store.load_dataset()
    assert sync_nodes(stored) == sync_nodes(cluster.dataset(seed=3))
    assert [s.to_json() for s in sync_scaling(stored)] == [s.to_json() for s in sync_scaling(cluster.dataset(3))]
