"""Two kinds of nodes among few: the trimmed best split, its calibrated
threshold, the false-alarm rate and power of find_modes, and repetitions too
noisy to name modes (the demo's hpcc_fft on 8 nodes sharing 2 CPUs)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from oddnode.findings import RULE_KINDS, RULES, Sensitivity, find_all
from oddnode.findings.population import analyse, find_modes
from oddnode.core.model import Dataset, Direction, LabelKind, Series, Severity
from oddnode.stats import modes
from oddnode.stats.calibrate import MODES_NULLS, split_ratios
from oddnode.stats.distribution import best_two_group_split

# ---------------------------------------------------------------- builders


def node_series(values, spread=None, benchmark: str = "compute.hpcc_fft", metric: str = "performance",
                repetitions: int = 1) -> Series:
    n = len(values)
    return Series(
        benchmark=benchmark,
        metric=metric,
        unit="GFLOP/s",
        direction=Direction.HIGHER,
        label_kind=LabelKind.NODE,
        labels=np.asarray([f"node{i:02d}" for i in range(1, n + 1)], dtype=object),
        values=np.asarray(values, dtype=np.float64),
        repetitions=np.full(n, repetitions, dtype=np.int64),
        spread=None if spread is None else np.asarray(spread, dtype=np.float64),
    )


def kinds(findings, kind):
    return [f for f in findings if f.kind == kind]


def trimmed_reference(ascending: np.ndarray, least: int):
    """find_modes' trimming written out one split at a time: (start, stop, low size) or None."""
    start, stop = 0, len(ascending)
    for _ in range(modes.MAX_TRIM_ROUNDS + 1):
        kept = ascending[start:stop]
        if len(kept) < 2 * least or kept[0] == kept[-1]:
            return None
        low = best_two_group_split(kept).index
        if low < least:
            start += low
        elif len(kept) - low < least:
            stop -= len(kept) - low
        else:
            return start, stop, low
    return None


# ---------------------------------------------------------------- the split


@pytest.mark.slow
def test_trimmed_splits_of_many_rows_match_one_split_at_a_time():
    rng = np.random.default_rng(1)
    for n, least in ((5, 2), (8, 3), (13, 2), (30, 3), (120, 3), (500, 10)):
        for values in (rng.standard_t(1, (300, n)), rng.integers(0, 3, (300, n)).astype(float)):
            ascending = np.sort(values, axis=1)
            splits = modes.trimmed_splits(ascending, least)
            for i, row in enumerate(ascending):
                expected = trimmed_reference(row, least)
                got = (int(splits.start[i]), int(splits.stop[i]), int(splits.low_size[i]))
                assert (got if splits.found[i] else None) == expected


def test_split_ratio_is_between_over_within_sum_of_squares_even_far_from_zero():
    low, high = np.array([1e9, 1e9 + 1e-3, 1e9 + 2e-3]), np.array([1e9 + 1.0, 1e9 + 1.001, 1e9 + 1.002, 1e9 + 1.003])
    splits = modes.trimmed_splits(np.concatenate([low, high]), 2)
    within = ((low - low.mean()) ** 2).sum() + ((high - high.mean()) ** 2).sum()
    between = 3 * 4 / 7 * (high.mean() - low.mean()) ** 2
    assert splits.found[0] and splits.low_size[0] == 3
    assert splits.ratio[0] == pytest.approx(between / within, rel=1e-6)
    assert modes.trimmed_splits(np.array([1.0, 1.0, 1.0, 5.0, 5.0]), 2).ratio[0] == np.inf
    assert not modes.trimmed_splits(np.full(6, 2.0), 2).found[0]


# ---------------------------------------------------------------- calibration


@pytest.mark.slow
@pytest.mark.parametrize("n", [6, 8, 13, 21, 30])
def test_healthy_nodes_of_every_kind_of_noise_are_named_bimodal_at_most_at_the_nominal_rate(n):
    # 40,000 healthy populations per kind of noise at alpha = 1e-2: at most
    # 400 false alarms expected (sd 20), exactly 400 for the kind of noise
    # that sets the threshold at this n.
    threshold = modes.split_ratio_threshold(n, 1e-2)
    alarms = {}
    for index, null in enumerate(MODES_NULLS):
        rng = np.random.default_rng([n, index, 5])
        alarms[null] = int((split_ratios(rng, n, 40_000, null) > threshold).sum())
    assert max(alarms.values()) <= 470, alarms
    assert max(alarms.values()) >= 330, alarms


@pytest.mark.slow
def test_at_a_thousandth_too():
    rng = np.random.default_rng(17)
    alarms = int((split_ratios(rng, 10, 200_000, "uniform") > modes.split_ratio_threshold(10, 1e-3)).sum())
    assert 158 <= alarms <= 242  # 200 expected, sd 14


def test_thresholds_fall_with_alpha_and_with_n():
    for n in range(modes.MIN_N, modes.MAX_N + 1):
        levels = [modes.split_ratio_threshold(n, alpha) for alpha in (1e-5, 3e-5, 1e-4, 1e-3, 1e-2)]
        assert np.all(np.diff(levels) < 0)
    at_1e4 = [modes.split_ratio_threshold(n, 1e-4) for n in range(modes.MIN_N, modes.MAX_N + 1)]
    assert np.all(np.diff(at_1e4) < 0)


def test_sizes_and_levels_outside_the_calibration_are_refused():
    with pytest.raises(ValueError, match="bimodality is calibrated for 6 to 30 values, not 31"):
        modes.split_ratio_threshold(31, 1e-4)
    with pytest.raises(ValueError, match="alpha"):
        modes.split_ratio_threshold(8, 0.05)


@pytest.mark.slow
def test_find_modes_names_healthy_normal_nodes_at_most_at_the_nominal_rate():
    # find_modes itself, every n from 5 to 30, 1,000 populations each at
    # alpha = 1e-2: at most 10 false alarms expected per n (sd 3.2), at most
    # 260 in all (sd 16); the normal is not the kind of noise that sets the
    # threshold, so the real count is lower.
    rng = np.random.default_rng(23)
    sensitivity = Sensitivity(alpha=1e-2, min_effect=0.0)
    per_n = {}
    for n in range(modes.MIN_N, modes.MAX_N + 1):
        values = 100.0 + rng.standard_normal((1_000, n))
        per_n[n] = sum(find_modes(row, sensitivity) is not None for row in values)
    assert max(per_n.values()) <= 20 and sum(per_n.values()) <= 300, per_n


# ---------------------------------------------------------------- power


@pytest.mark.parametrize("n, minority, sigmas", [(8, 3, 40), (8, 4, 40), (10, 3, 25), (15, 3, 20),
                                                 (20, 3, 20), (30, 3, 20), (30, 15, 10)])
def test_two_kinds_of_three_or_more_nodes_many_sigma_apart_are_found(n, minority, sigmas):
    # The dip test alone never found a group of 3 among 8 to 30 nodes at
    # alpha = 1e-4, however far (its dip is at most 3/(2n)).
    rng = np.random.default_rng(n * 100 + minority)
    found = 0
    for _ in range(200):
        values = rng.normal(1000.0, 2.0, n)
        values[:minority] += 2.0 * sigmas
        two = find_modes(values, Sensitivity())
        found += two is not None and sorted(two.indices(two.minority).tolist()) == list(range(minority))
    assert found >= 190


@pytest.mark.slow
def test_no_bimodal_warning_on_healthy_small_clusters():
    rng = np.random.default_rng(29)
    for n in range(modes.MIN_N, modes.MAX_N + 1):
        series = [node_series(rng.lognormal(np.log(100.0), 0.1, n), benchmark=f"b{i}") for i in range(40)]
        series += [node_series(100.0 + 5.0 * rng.standard_t(3, n), benchmark=f"t{i}") for i in range(40)]
        assert kinds(find_all(Dataset(series=series), rules=["bimodal"]), "bimodal") == []


# ---------------------------------------------------------------- noisy repetitions


def demo_fft(spread=None) -> Series:
    """The demo's compute.hpcc_fft: 8 nodes sharing 2 CPUs, the best of 3
    repetitions per node; a node whose repetitions all found the CPUs busy
    stays near 1 GFLOP/s, one that had them to itself once reaches 7.6."""
    values = [1.02, 0.98, 1.05, 7.4, 7.7, 1.0, 7.6, 7.5]
    return node_series(values, spread, repetitions=3)


# Relative spread of each node's repetitions, (max - min) / max(|max|, |min|):
# the slow nodes' runs agree within a few %, a fast node's run with the
# CPUs to itself is several times its other two (7.4 against 1.04: 86%).
DEMO_SPREAD = [0.07, 0.11, 0.05, 0.86, 0.49, 0.09, 0.87, 0.85]


def test_the_demo_fft_without_repetitions_would_name_two_modes():
    findings = find_all(Dataset(series=[demo_fft()]))
    bimodal = kinds(findings, "bimodal")
    assert [f.nodes for f in bimodal] == ["node[04-05,07-08]"]
    assert bimodal[0].evidence["test"] == "split ratio"
    assert bimodal[0].evidence["split_ratio"] > bimodal[0].evidence["critical_ratio"]


def test_the_demo_fft_with_its_repetitions_says_the_benchmark_is_noisy_instead():
    findings = find_all(Dataset(series=[demo_fft(DEMO_SPREAD)]))
    assert kinds(findings, "bimodal") == []
    assert [f.kind for f in findings] == ["noisy-benchmark"]
    noisy = findings[0]
    assert noisy.severity is Severity.INFO and noisy.subject == "compute.hpcc_fft:performance" and noisy.nodes == ""
    # The faster mode's spreads 86, 49, 87, 85%: median 85.5%, against
    # modes (7.55 - 1.0125) / 7.55 = 86.6% apart.
    assert noisy.evidence["median_spread_pct"] == pytest.approx(85.5)
    assert noisy.evidence["separation_pct"] == pytest.approx(100.0 * (7.55 - 1.0125) / 7.55)
    assert noisy.evidence["better"] == "high" and noisy.evidence["nodes_with_spread"] == 4
    assert ("the median node of the better candidate mode (node[04-05,07-08]) spans 85.5% between its "
            "repetitions, while the two candidate modes are 86.6% apart") in noisy.message
    assert "repeatable" in noisy.remedy and "quiet the nodes" in noisy.remedy
    assert json.loads(json.dumps(noisy.to_json(), allow_nan=False))["kind"] == "noisy-benchmark"
    assert analyse(demo_fft(DEMO_SPREAD), Sensitivity()).bad_labels().tolist() == []


def test_lucky_runs_are_noise_when_lower_is_better_too():
    # Run times: a node's lucky run takes 0.13 s, its others 1 s, a spread
    # of 87% of its slowest run: the gap between the modes relative to the
    # slower one, whichever direction is better.
    times = [1.0, 1.02, 0.98, 0.13, 0.135, 1.01, 0.13, 0.128]
    spread = [0.05, 0.03, 0.06, 0.87, 0.86, 0.04, 0.88, 0.87]
    series = dataclasses.replace(node_series(times, spread, "npb.ep", "time", 3), direction=Direction.LOWER)
    findings = find_all(Dataset(series=[series]))
    assert [f.kind for f in findings] == ["noisy-benchmark"]
    assert findings[0].evidence["better"] == "low"
    assert findings[0].evidence["median_spread_pct"] == pytest.approx(87.0)


@pytest.mark.parametrize("spread_range", [(0.002, 0.01), (0.02, 0.05)])
def test_two_kinds_with_quiet_repetitions_are_still_named(spread_range):
    rng = np.random.default_rng(31)
    values = rng.normal(1000.0, 2.0, 12)
    values[:4] += 150.0  # 15% faster memory on 4 nodes
    spread = rng.uniform(*spread_range, 12)  # repetitions within 1%, or within 5%
    findings = find_all(Dataset(series=[node_series(values, spread, "memory.triad", "value", 5)]))
    assert [f.nodes for f in kinds(findings, "bimodal")] == ["node[01-04]"]
    assert kinds(findings, "noisy-benchmark") == []
    assert json.loads(json.dumps(kinds(findings, "bimodal")[0].to_json(), allow_nan=False))


def test_a_node_far_below_all_others_is_still_an_outlier_when_the_modes_are_noise():
    # Repetitions spanning 10% make two candidate modes 4% apart noise; the
    # node at a tenth of the others is named all the same.
    rng = np.random.default_rng(37)
    values = np.concatenate([rng.normal(100.0, 0.3, 10), rng.normal(104.0, 0.3, 9), [10.0]])
    findings = find_all(Dataset(series=[node_series(values, np.full(20, 0.1), repetitions=4)]))
    assert len(kinds(findings, "noisy-benchmark")) == 1 and kinds(findings, "bimodal") == []
    assert [f.nodes for f in kinds(findings, "outlier")] == ["node20"]


def test_without_repetition_spreads_modes_are_judged_on_the_values_alone():
    spread = np.full(8, np.nan)
    spread[:3] = 5.0  # too few nodes with two or more repetitions to judge
    for series in (demo_fft(), demo_fft(spread)):
        population = analyse(series, Sensitivity())
        assert population.modes is not None and population.noise is None


def test_noisy_benchmark_is_a_registered_rule_of_its_own_kind():
    assert "noisy-benchmark" in RULES and RULE_KINDS["noisy-benchmark"] == ("noisy-benchmark",)
    findings = find_all(Dataset(series=[demo_fft(DEMO_SPREAD)]), rules=["bimodal", "normality"])
    assert findings == []
