"""The comparison's statistics on synthetic runs with known truth: identical
distributions over many seeds raise a false alarm (any improved or
regressed verdict) in at most alpha of them, and the stratified test's
three ways to its p (exact, Monte Carlo, normal) agree with each other and
with Mann–Whitney."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from oddnode.judge.compare import Settings, Verdict, compare_samples
from oddnode.stats import significance as sig
from oddnode.store.samples import SeriesSamples
from oddnode.core.model import Direction, LabelKind

# (nodes, repetitions per node, series): shapes that take each path of the
# tests: subjects judged alone, series judged by the exact, Monte Carlo and
# normal stratified test, one value per node (a plot file's).
SHAPES = ((4, 10, 3), (8, 5, 3), (12, 2, 3), (40, 3, 2), (50, 1, 2), (1, 12, 4))
SEEDS = 80


def side(rng: np.random.Generator, nodes: int, repetitions: int, count: int, run: int,
         shift: float = 1.0) -> dict[tuple[str, str], SeriesSamples]:
    """``count`` series on ``nodes`` foreign-named nodes, each node at its
    own level (kept between runs), 5% lognormal noise; ``shift`` scales
    every value (the change planted)."""
    out = {}
    for k in range(count):
        series = SeriesSamples(f"bench{k}", "value", "MB/s", Direction.HIGHER if k % 2 == 0 else Direction.LOWER,
                               LabelKind.NODE, run)
        for i in range(nodes):
            level = 100.0 * (1 + 0.05 * math.sin(i + 1))
            series.values[f"gpu-{i:03d}"] = level * shift * np.exp(0.05 * rng.standard_normal(repetitions))
        out[series.key] = series
    return out


def false_alarm(comparison) -> bool:
    return any(j.verdict in (Verdict.IMPROVED, Verdict.REGRESSED) for j in comparison.judgements)


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_identical_distributions_raise_a_false_alarm_in_at_most_alpha_of_the_seeds(alpha):
    settings = Settings(alpha=alpha, min_effect=0.0)  # no effect floor: the tests alone
    alarms = trials = 0
    for nodes, repetitions, count in SHAPES:
        for seed in range(SEEDS):
            rng = np.random.default_rng([seed, nodes, repetitions])
            comparison = compare_samples(side(rng, nodes, repetitions, count, 1),
                                         side(rng, nodes, repetitions, count, 2), settings)
            alarms += false_alarm(comparison)
            trials += 1
    assert alarms / trials <= alpha, f"{alarms} false alarms in {trials} comparisons at alpha {alpha}"


@pytest.mark.slow
def test_a_shift_of_every_node_is_found_in_every_shape():
    """The same shapes with every value 8% higher: the series are judged
    improved or regressed as their direction says, in nearly every seed."""
    found = trials = 0
    for nodes, repetitions, count in SHAPES:
        for seed in range(10):
            rng = np.random.default_rng([seed, nodes, repetitions, 1])
            comparison = compare_samples(side(rng, nodes, repetitions, count, 1),
                                         side(rng, nodes, repetitions, count, 2, shift=1.08))
            for s in comparison.series:
                expected = Verdict.IMPROVED if s.direction is Direction.HIGHER else Verdict.REGRESSED
                found += s.overall.verdict is expected
                trials += 1
    assert found / trials >= 0.9


def test_one_stratum_gives_mann_whitney_s_exact_p():
    rng = np.random.default_rng(3)
    for n, m in ((3, 3), (4, 6), (7, 5)):
        before, after = rng.normal(0, 1, n), rng.normal(0.8, 1, m)
        exact = stats.mannwhitneyu(after, before, alternative="two-sided", method="exact").pvalue
        got = sig.stratified_test([(before, after)])
        assert got.method == "stratified mann-whitney exact"
        assert got.p == pytest.approx(exact, rel=1e-9)


def test_ties_are_tested_on_their_exact_permutation_distribution():
    before, after = np.array([1.0, 2, 2, 3]), np.array([3.0, 4, 4, 5])
    by_subject = sig.mann_whitney(before, after)
    assert by_subject.method == "mann-whitney exact (ties)"
    # One stratum with ties: the rank-sum distribution by enumeration, as scipy's permutation test.
    assert sig.stratified_test([(before, after)]).p == pytest.approx(by_subject.p, rel=1e-9)


def test_monte_carlo_agrees_with_the_exact_p(monkeypatch):
    rng = np.random.default_rng(5)
    pairs = [(rng.normal(0, 1, 3), rng.normal(0.5, 1, 3)) for _ in range(5)]
    exact = sig.stratified_test(pairs)
    assert exact.method == "stratified mann-whitney exact"
    monkeypatch.setattr(sig, "EXACT_PRODUCT", 1)
    drawn = sig.stratified_test(pairs, draws=200_000, seed=1)
    assert drawn.method.startswith("stratified mann-whitney permutation")
    assert drawn.p == pytest.approx(exact.p, abs=0.004)


def test_the_normal_approximation_over_many_subjects_agrees_with_the_permutations(monkeypatch):
    rng = np.random.default_rng(6)
    pairs = [(rng.normal(0, 1, 3), rng.normal(0.15, 1, 3)) for _ in range(40)]
    normal = sig.stratified_test(pairs)
    assert normal.method == "stratified mann-whitney normal approximation"
    monkeypatch.setattr(sig, "NORMAL_STRATA", 1000)
    drawn = sig.stratified_test(pairs, draws=200_000, seed=2)
    assert drawn.method.startswith("stratified mann-whitney permutation")
    assert 0.01 < drawn.p < 0.5 and normal.p == pytest.approx(drawn.p, abs=0.01)


def test_the_smallest_p_is_what_the_most_extreme_split_gives():
    assert sig.smallest_p(3, 3) == pytest.approx(0.1)
    assert sig.smallest_p(5, 5) == pytest.approx(2 / 252)
    assert sig.values_to_reach(0.1) == 3 and sig.values_to_reach(0.05) == 4 and sig.values_to_reach(2 / 252) == 5
    assert sig.values_to_reach(1e-300, limit=10) is None
    separated = sig.mann_whitney(np.arange(5.0), np.arange(5.0) + 10)
    assert separated.p == pytest.approx(sig.smallest_p(5, 5))
    # Three subjects, each 2 against 2, all after above before: 2 / 6^3.
    pairs = [(np.array([1.0, 2]), np.array([3.0, 4]))] * 3
    assert sig.stratified_test(pairs).p == pytest.approx(sig.smallest_stratified_p([(2, 2)] * 3))
    assert sig.smallest_stratified_p([(2, 2)] * 3) == pytest.approx(2 / 216)
