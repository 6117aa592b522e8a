"""Rules that trace poor results to a weak node or a weak group (switch,
chassis) from who the poor results have in common: the reading of STAB's
ping-pong patterns (sort, cut, fold, shuffle).  Also: sorted against
shuffled pairs (oversubscribed uplinks), and the all-pairs matrix's slow
pairs told apart by their retest (a bad link or contention)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from oddnode.readings.interconnect_series import BAD_LINK, CONCURRENCY_METRIC, CONTENTION, NOT_RETESTED
from oddnode.readings.interconnect_series import MATRIX as MATRIX_BENCHMARK
from oddnode.readings.interconnect_series import MATRIX_RETEST as MATRIX_RETEST_BENCHMARK
from oddnode.readings.interconnect_series import PAIR_FAMILIES as POOLED_FAMILIES
from oddnode.readings.interconnect_series import SHUFFLED as SHUFFLED_BENCHMARKS
from oddnode.readings.interconnect_series import SORTED as SORTED_BENCHMARK
from oddnode.readings.interconnect_series import PINGPONG, pattern_series, split_network
from oddnode.findings.population import analyse
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.model import Dataset, Finding, LabelKind, Series, Severity
from oddnode.core.nodes import fold, split_pair
from oddnode.stats.robust import MIN_OUTLIER_SAMPLE, outlier_threshold, robust_scale

# A node is weak when its poor pairs have at least this many different partners
# ... and they are more than this share of its pairs in the series where it has
# poor ones: a weak card, cable or port drags down every pair it is in, while
# a node that chance put in two of a few slow pairs (noisy latencies on busy
# hosts) has fast pairs beside them.
MIN_WEAK_PARTNERS = 2
MIN_WEAK_SHARE = 0.5
# A group is weak when at least this many poor labels touch it ...
MIN_GROUP_LOW = 2
# ... and they are at least this share of all the poor labels of the series.
MIN_GROUP_DOMINANCE = 0.5
# An uplink is suspected when at least this share of the group's poor pairs
# cross to another group, and at most this share of its within-group pairs are poor.
UPLINK_CROSS_SHARE = 0.9
UPLINK_WITHIN_TOLERANCE = 0.1
# Kernels whose pattern runs are judged as one population per metric, and
# the patterns they pool (the patterns of oddnode.readings.patterns and a
# pairs file).
POOLED_PATTERNS = ("sort", "cut", "fold", "shuffle", "random", "file")
# The sorted pattern's name and the prefix of every ping-pong pattern's series
# (pingpong.sort, pingpong.sort@ib).
SORTED_PATTERN = SORTED_BENCHMARK.partition(".")[2]
PATTERN_FAMILY = f"{PINGPONG}."
# How many partners or series a message spells out.
MESSAGE_ITEMS = 6

FIT_BANDWIDTH = "fit.bandwidth"

# Oversubscription: a switch with full bisection bandwidth carries shuffled
# pairs as fast as sorted neighbours, within a few percent of noise.  When
# the shuffled median is below half the sorted one, the links between
# switches carry at least two pairs' traffic each: 2:1 oversubscribed or
# worse (the case study saw 115 MB/s sorted against 10 MB/s shuffled).
OVERSUBSCRIPTION_RATIO = 0.5
# ... and the two distributions must be separated, not merely apart in the
# median: a one-sided Mann-Whitney test, shuffled below sorted, at p < 0.01.
# One test per pair of patterns, so no correction for multiplicity; 0.01 keeps
# small samples out of the way of chance while 4 sorted pairs (8 nodes)
# against 12 shuffled ones can reach it: complete separation gives
# p = 1/C(16, 4) = 5e-4.
OVERSUBSCRIPTION_ALPHA = 0.01

# A matrix pair below half the median bandwidth is slow whatever the spread
# of the others: when many pairs are slow (a leaf behind a poor uplink) the
# MAD widens and the outlier rule's bound can sink below it.
SLOW_LINK_FRACTION = 0.5


def _is_population(series: Series) -> bool:
    """Whether a series' labels are a population to judge: not the retest
    of a matrix, whose labels are the pairs picked for being slow."""
    return series.benchmark != MATRIX_RETEST_BENCHMARK


def pair_series(dataset: Dataset) -> list[Series]:
    """The pair populations to judge: the pattern runs of one kernel pooled
    per metric (see pooled_patterns), every other pair series as it is."""
    return pooled_patterns([s for s in dataset.series if s.label_kind is LabelKind.PAIR and _is_population(s)])


def pooled_patterns(series: list[Series]) -> list[Series]:
    """One population per kernel, network and metric out of its pattern runs
    (pingpong.sort, .cut, .fold, .shuffle -> pingpong.sort+cut+fold+shuffle;
    pingpong.sort@ib, .cut@ib -> pingpong.sort+cut@ib).

    A pattern over N nodes has only N/2 pairs: on 8 to 12 nodes, 4 to 6
    values, too few for the outlier test to call even a link ten times slower
    an outlier at alpha (the threshold for 6 values is 49 sigma at 1e-4).
    The four patterns together give 2N pairs, each node with up to four
    partners; a weak node is in the poor pairs of every pattern, a weak
    uplink in the cross-group pairs of each, so pooling keeps what the
    patterns tell apart while giving the test enough values.
    """
    pooled: dict[tuple[str, str, str], list[Series]] = defaultdict(list)
    alone = []
    for s in series:
        family, _, pattern = s.benchmark.partition(".")
        pattern, network = split_network(pattern)
        if family in POOLED_FAMILIES and pattern in POOLED_PATTERNS:
            pooled[(family, network or "", s.metric)].append(s)  # each network its own population
        else:
            alone.append(s)
    for (family, network, metric), members in sorted(pooled.items()):
        if len(members) == 1:
            alone.append(members[0])
            continue
        labels = np.concatenate([m.labels for m in members])
        order = np.argsort(labels, kind="stable")
        patterns = "+".join(split_network(m.benchmark.partition(".")[2])[0] for m in members)
        alone.append(Series(
            benchmark=pattern_series(family, patterns, network or None), metric=metric, unit=members[0].unit, direction=members[0].direction,
            label_kind=LabelKind.PAIR, labels=labels[order],
            values=np.concatenate([m.values for m in members])[order],
            repetitions=np.concatenate([m.repetitions for m in members])[order]))
    return alone


def _known_nodes(dataset: Dataset) -> set[str] | None:
    known = set(dataset.topology) | dataset.inventory_nodes()
    for series in dataset.series:
        if series.label_kind is LabelKind.NODE:
            known.update(series.labels.tolist())
    return known or None


@dataclass
class LowPair:
    series: str
    label: str
    node: str
    partner: str
    value: float
    median: float

    def to_json(self) -> dict:
        return {
            "series": self.series,
            "pair": self.label,
            "partner": self.partner,
            "value": self.value,
            "median": self.median,
            "deviation_pct": (self.value - self.median) / abs(self.median) * 100.0 if self.median else None,
        }


@dataclass
class WeakGroup:
    """A group that holds far more of the poor results than its share."""

    group: str
    members: list[str]
    series: dict[str, dict]  # series name -> counts and p
    low_labels: dict[str, list[str]]
    low_cross: int = 0
    low_within: int = 0
    within_pairs: int = 0  # within-group pairs measured in any pair series
    within_pairs_low: int = 0
    # Groups touching exactly the same poor results, which the pairs cannot
    # tell from this one (two leaves: every crossing pair uses both uplinks);
    # ``members`` then holds theirs too.
    alike: list[str] = field(default_factory=list)

    @property
    def groups(self) -> list[str]:
        return [self.group, *self.alike]

    @property
    def uplink(self) -> bool:
        low = self.low_cross + self.low_within
        return (
            low > 0
            and self.low_cross >= UPLINK_CROSS_SHARE * low
            and self.within_pairs > 0
            and self.within_pairs_low <= UPLINK_WITHIN_TOLERANCE * self.within_pairs
        )


def _member_groups(
    series: Series, topology: dict[str, str], codes: dict[str, int], known: set[str] | None
) -> np.ndarray:
    """Group code of each member of each label, shape (labels, 1) for nodes and
    (labels, 2) for pairs; -1 for a node outside the topology or a label
    that is not a pair."""
    labels = series.labels.tolist()
    if series.label_kind is LabelKind.NODE:
        return np.array([codes.get(topology.get(label), -1) for label in labels], dtype=np.int64).reshape(-1, 1)
    out = np.full((len(labels), 2), -1, dtype=np.int64)
    for index, label in enumerate(labels):
        pair = split_pair(label, known)
        if pair is not None:
            out[index] = [codes.get(topology.get(pair[0]), -1), codes.get(topology.get(pair[1]), -1)]
    return out


@dataclass
class _SeriesTally:
    """The poor labels of one series and which groups they touch."""

    name: str
    total: int
    bad: set[int]
    touching: dict[str, int]  # group -> labels touching it
    low: dict[str, set[int]]  # group -> poor labels touching it
    crossing: set[int]  # poor pairs whose members are in different groups
    within: set[int]  # poor pairs whose members are in the same group
    labels: list[str]
    leaving: dict[str, int] = field(default_factory=dict)  # group -> pairs with one member in it


def _tally(series: Series, bad: np.ndarray, member_groups: np.ndarray, names: list[str]) -> _SeriesTally:
    # Labels touching each group, a pair inside one group counted once.
    touching_counts = np.zeros(len(names), dtype=np.int64)
    for column in range(member_groups.shape[1]):
        known_column = member_groups[:, column]
        touching_counts += np.bincount(known_column[known_column >= 0], minlength=len(names))
    leaving_counts = np.zeros(len(names), dtype=np.int64)
    if member_groups.shape[1] == 2:
        same = member_groups[:, 0] == member_groups[:, 1]
        inside = member_groups[same & (member_groups[:, 0] >= 0), 0]
        touching_counts -= np.bincount(inside, minlength=len(names))
        leaving_counts = touching_counts - np.bincount(inside, minlength=len(names))
    low: dict[str, set[int]] = defaultdict(set)
    crossing: set[int] = set()
    within: set[int] = set()
    for index in bad.tolist():
        groups = member_groups[index].tolist()
        for code in set(groups):
            if code >= 0:
                low[names[code]].add(index)
        if len(groups) == 2 and groups[0] >= 0 and groups[1] >= 0:
            (within if groups[0] == groups[1] else crossing).add(index)
    touching = {names[code]: int(count) for code, count in enumerate(touching_counts) if count}
    leaving = {names[code]: int(count) for code, count in enumerate(leaving_counts) if count}
    return _SeriesTally(
        series.name, len(series), set(bad.tolist()), touching, dict(low), crossing, within, series.labels.tolist(),
        leaving,
    )


@dataclass(frozen=True)
class _GroupTest:
    """A group's counts in one series and their Bonferroni p."""

    low: frozenset[int]  # poor labels touching the group, not explained by another group
    labels: int  # labels touching the group
    low_total: int  # poor labels of the series
    total: int  # labels of the series
    p: float

    def to_json(self) -> dict:
        return {"low": len(self.low), "labels": self.labels, "low_total": self.low_total, "total": self.total,
                "p": self.p}


def _group_test(
    tally: _SeriesTally, group: str, explained: set[int], group_count: int, alpha: float
) -> _GroupTest | None:
    """Counts and Bonferroni p of a group in one series, leaving out the poor
    labels (and their pairs) already explained by another group; None when
    the group is not weak there."""
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    touching_low = tally.low.get(group, set())
    low = touching_low - explained
    low_total = len(tally.bad - explained)
    if len(low) < MIN_GROUP_LOW or len(low) < MIN_GROUP_DOMINANCE * low_total:
        return None
    total = tally.total - len(explained)
    labels = tally.touching[group] - (len(touching_low) - len(low))
    # P(at least len(low) of the low_total poor labels touch the group) when
    # poor labels are drawn at random from all labels, times the number of
    # groups (Bonferroni).
    p = float(stats.hypergeom.sf(len(low) - 1, total, labels, low_total))
    tests = 1
    if tally.leaving.get(group):
        # A poor uplink slows only the pairs that leave the group: the same
        # test on those pairs alone is sharper there (the group's own pairs,
        # fast, no longer dilute it).  Two tests: Bonferroni doubles.
        leaving_low = low & tally.crossing
        leaving = tally.leaving[group] - len((touching_low & tally.crossing) - leaving_low)
        if len(leaving_low) >= MIN_GROUP_LOW and len(leaving_low) >= MIN_GROUP_DOMINANCE * low_total:
            p_leaving = float(stats.hypergeom.sf(len(leaving_low) - 1, total, leaving, low_total))
            tests = 2
            if p_leaving < p:
                p, low, labels = p_leaving, leaving_low, leaving
    p_adjusted = min(1.0, p * group_count * tests)
    if not p_adjusted < alpha:
        return None
    return _GroupTest(frozenset(low), labels, low_total, total, p_adjusted)


def find_weak_groups(dataset: Dataset, sensitivity: Sensitivity) -> list[WeakGroup]:
    """Groups over-represented among the poor labels of node and pair series.

    In each series with poor labels, a group is weak when at least 2 poor
    labels touch it, they are at least half of the series' poor labels, and
    the hypergeometric test of its share against its share of all labels
    gives p < alpha after Bonferroni over the groups.

    A fixed pattern implicates the partner group too (cut pairs the bad
    chassis with the chassis half a cluster away), so groups are accepted
    greedily across series: the group touching the most poor labels first,
    each next one tested again on the poor labels that touch no group
    already accepted, in any series.
    """
    topology = dataset.topology
    if not topology:
        return []
    poor = []
    for series in [s for s in dataset.series if s.label_kind is LabelKind.NODE] + pair_series(dataset):
        bad = analyse(series, sensitivity).bad_labels()
        if len(bad) >= MIN_GROUP_LOW:
            poor.append((series, bad))
    if not poor:
        return []
    known = _known_nodes(dataset)
    names = sorted(set(topology.values()))
    codes = {name: code for code, name in enumerate(names)}
    tallies = [_tally(series, bad, _member_groups(series, topology, codes, known), names) for series, bad in poor]

    alpha, group_count = sensitivity.alpha, len(names)
    candidates = {
        group
        for tally in tallies
        for group in tally.low
        if _group_test(tally, group, set(), group_count, alpha) is not None
    }
    explained: list[set[int]] = [set() for _ in tallies]
    flagged: dict[str, WeakGroup] = {}

    def unexplained(group: str) -> int:
        return sum(len(t.low.get(group, set()) - e) for t, e in zip(tallies, explained))

    def still_low(group: str) -> list[set[int]]:
        return [t.low.get(group, set()) - e for t, e in zip(tallies, explained)]

    while candidates:
        # The candidate touching the most poor labels not yet explained.
        group = min(candidates, key=lambda g: (-unexplained(g), g))
        candidates.discard(group)
        results = [_group_test(t, group, e, group_count, alpha) for t, e in zip(tallies, explained)]
        if not any(results):
            continue
        alike = sorted(other for other in candidates if still_low(other) == still_low(group))
        candidates.difference_update(alike)
        members = sorted(node for node, g in topology.items() if g == group or g in alike)
        weak = flagged[group] = WeakGroup(group, members, {}, {}, alike=alike)
        for tally, done, result in zip(tallies, explained, results):
            # The group explains every poor label that touches it, in every
            # series, even where it is not weak on its own: a pair across a
            # poor uplink is no evidence against the group at its other end.
            for accepted in weak.groups:
                done.update(tally.low.get(accepted, ()))
            if result is None:
                continue
            low = result.low
            weak.series[tally.name] = result.to_json()
            weak.low_labels[tally.name] = [tally.labels[i] for i in sorted(low)]
            weak.low_cross += len(low & tally.crossing)
            weak.low_within += len(low & tally.within)
    if flagged:
        _count_within_group_pairs(dataset, sensitivity, flagged, codes, known)
    return [flagged[group] for group in sorted(flagged)]


def _count_within_group_pairs(
    dataset: Dataset,
    sensitivity: Sensitivity,
    flagged: dict[str, WeakGroup],
    codes: dict[str, int],
    known: set[str] | None,
) -> None:
    """How many pairs inside each flagged group were measured, and how many were poor."""
    flagged_codes = {codes[group]: weak for weak in flagged.values() for group in weak.groups}
    for series in pair_series(dataset):
        member_groups = _member_groups(series, dataset.topology, codes, known)
        inside = np.flatnonzero(member_groups[:, 0] == member_groups[:, 1])
        is_bad = np.zeros(len(series), dtype=bool)
        is_bad[analyse(series, sensitivity).bad_labels()] = True
        for index in inside.tolist():
            weak = flagged_codes.get(int(member_groups[index, 0]))
            if weak is not None:
                weak.within_pairs += 1
                weak.within_pairs_low += int(is_bad[index])


def _weak_group_finding(weak: WeakGroup) -> Finding:
    nodes = fold(weak.members)
    per_series = first_few([
        f"{name}: {c['low']} of its {c['low_total']} poor results (group touches {c['labels']} of {c['total']}, "
        f"p = {c['p']:.2g})"
        for name, c in weak.series.items()
    ], MESSAGE_ITEMS, separator="; ", rest="more series")
    if weak.alike:
        names = " or ".join(weak.groups)
        message = (
            f"groups {names} ({nodes}) hold most of the poor results alike ({per_series}); "
            + (f"their {weak.within_pairs} within-group pairs are fine: suspect the uplink of {names} (or all): "
               if weak.uplink else "")
            + "every pair that touches one touches the others, so the pairs cannot tell which"
        )
        remedy = (
            f"Check the uplinks of {names} one by one (cables, switch ports, error counters); a pair from each "
            "to a group outside them, or the switches' port counters, tells which one is slow."
        )
    elif weak.uplink:
        message = (
            f"group {weak.group} ({nodes}) is slow only in pairs that cross to other groups ({per_series}); "
            f"its {weak.within_pairs} within-group pairs are fine: suspect the group's uplink"
        )
        remedy = (
            f"Check {weak.group}'s uplink: cables, switch ports and the group's switch (error counters, "
            "trunk configuration, logs); reseat the switch and rerun the cross-group pairs."
        )
    else:
        message = f"group {weak.group} ({nodes}) holds most of the poor results: {per_series}"
        remedy = (
            f"Look at what {weak.group}'s nodes share: its switch and uplink cables and ports, the "
            "chassis' power and cooling, firmware; rerun the benchmark on the group alone."
        )
    return Finding(
        kind="weak-group",
        severity=Severity.WARNING,
        subject=", ".join(weak.series),
        nodes=nodes,
        message=message,
        evidence={
            "group": weak.group,
            "alike": weak.alike,
            "series": weak.series,
            "low_labels": weak.low_labels,
            "cross_group_low": weak.low_cross,
            "within_group_low": weak.low_within,
            "within_group_pairs": weak.within_pairs,
            "within_group_pairs_low": weak.within_pairs_low,
            "uplink": weak.uplink,
        },
        remedy=remedy,
    )


@rule("weak-group")
def weak_group(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """A switch, chassis or rack (from the topology) that holds most of the poor results."""
    return [_weak_group_finding(weak) for weak in find_weak_groups(dataset, sensitivity)]


def with_matrix_retests(series: Series, dataset: Dataset) -> Series:
    """A matrix series with each retested pair at the best of its matrix
    value and its retests; any other series as it is.

    A matrix measures each pair once, in one round: a node held up for a few
    rounds (a burst of OS work) is in as many slow pairs as a weak card.  The
    matrix retests its slow pairs at once; a pair that is fine again was
    neither node's fault, as a pattern pair's best of three is not.  A weak
    card, cable or port stays slow in its retests.
    """
    if series.benchmark != MATRIX_BENCHMARK:
        return series
    retest = _series_of(dataset, MATRIX_RETEST_BENCHMARK, series.metric)
    if retest is None:
        return series
    retested = dict(zip(retest.labels.tolist(), zip(retest.values.tolist(), retest.repetitions.tolist())))
    best = max if series.higher_is_better else min
    values, repetitions = series.values.copy(), series.repetitions.copy()
    for index, label in enumerate(series.labels.tolist()):
        if label in retested and np.isfinite(retested[label][0]):
            value, count = retested[label]
            values[index] = best(values[index], value) if np.isfinite(values[index]) else value
            repetitions[index] += count
    return replace(series, values=values, repetitions=repetitions)


def low_pairs(
    dataset: Dataset, sensitivity: Sensitivity
) -> tuple[dict[str, list[LowPair]], Counter[str], dict[str, set[str]]]:
    """Every poor pair of every pair series (a matrix pair at its best
    retest), listed under both of its nodes; per node how many pairs it is
    in over the series where it has poor ones; and its partners there."""
    by_node: dict[str, list[LowPair]] = defaultdict(list)
    pairs_of: Counter[str] = Counter()
    partners_of: dict[str, set[str]] = defaultdict(set)
    known: set[str] | None = None
    computed_known = False
    for series in (with_matrix_retests(s, dataset) for s in pair_series(dataset)):
        bad = analyse(series, sensitivity).bad_labels()
        if len(bad) == 0:
            continue
        if not computed_known:
            known, computed_known = _known_nodes(dataset), True
        labels = [str(label) for label in series.labels.tolist()]
        pairs = [split_pair(label, known) for label in labels]
        members = Counter(node for pair in pairs if pair is not None for node in pair)
        partners = defaultdict(set)
        for pair in pairs:
            if pair is not None and pair[0] != pair[1]:
                partners[pair[0]].add(pair[1])
                partners[pair[1]].add(pair[0])
        median = float(np.median(series.values[np.isfinite(series.values)]))
        poor_nodes = set()
        for index in bad.tolist():
            pair = pairs[index]
            if pair is None or pair[0] == pair[1]:
                continue
            value = float(series.values[index])
            a, b = pair
            by_node[a].append(LowPair(series.name, labels[index], a, b, value, median))
            by_node[b].append(LowPair(series.name, labels[index], b, a, value, median))
            poor_nodes.update(pair)
        for node in poor_nodes:
            pairs_of[node] += members[node]
            partners_of[node] |= partners[node]
    return by_node, pairs_of, partners_of


def slow_together(node: str, by_node: dict[str, list[LowPair]], partners_of: dict[str, set[str]]) -> list[str]:
    """The partners a node's pairs are fine with that are poor with most of
    its own poor partners.

    A weak card slows every pair of its node, and its node's partners are
    each in few poor pairs.  Two nodes fine with each other and both slow
    with the same others share what those pairs cross: a switch, an uplink,
    a path with more hops.  Neither is the weak member; with a topology
    the weak-group rule judges their group."""
    poor = {p.partner for p in by_node[node]}
    together = []
    for other in sorted(partners_of[node] - poor):
        shared = poor & {p.partner for p in by_node.get(other, ())}
        if len(shared) >= MIN_WEAK_PARTNERS and len(shared) > MIN_WEAK_SHARE * len(poor):
            together.append(other)
    return together


@rule("weak-pair-member")
def weak_pair_member(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """The node common to poor pairs with different partners: a weak card, cable or port."""
    by_node, pairs_of, partners_of = low_pairs(dataset, sensitivity)
    if not by_node:
        return []
    count = {node: len(pairs) for node, pairs in by_node.items()}
    explained: set[str] = set()
    if dataset.topology:
        for weak in find_weak_groups(dataset, sensitivity):
            explained.update(weak.members)
    findings = []
    for node in sorted(by_node):
        pairs = by_node[node]
        partners = sorted({p.partner for p in pairs})
        if len(partners) < MIN_WEAK_PARTNERS or node in explained or len(pairs) <= MIN_WEAK_SHARE * pairs_of[node]:
            continue
        partner_most = max(count[p] for p in partners)
        if count[node] <= partner_most or slow_together(node, by_node, partners_of):
            continue
        series_names = sorted({p.series for p in pairs})
        shown = first_few(partners, MESSAGE_ITEMS)
        findings.append(
            Finding(
                kind="weak-pair-member",
                severity=Severity.WARNING,
                subject=", ".join(series_names),
                nodes=node,
                message=(
                    f"{node} is in {count[node]} poor pairs with {len(partners)} different partners ({shown}) "
                    f"across {', '.join(series_names)}; none of those partners is in more than "
                    f"{partner_most}: {node} is the weak member"
                ),
                evidence={
                    "low_pairs": [p.to_json() for p in pairs],
                    "count": count[node],
                    "partners": partners,
                    "partner_max_count": partner_most,
                    "pairs_in_those_series": pairs_of[node],
                    "series": series_names,
                    "series_count": dict(sorted(Counter(p.series for p in pairs).items())),
                },
                remedy=(
                    f"Check {node}'s interconnect: reseat or swap its cable, then its card, check its switch "
                    "port's error counters, and rerun its pairs."
                ),
            )
        )
    return findings


# --- sorted against shuffled: oversubscribed uplinks ---------------------------------


def _series_of(dataset: Dataset, benchmark: str, metric: str) -> Series | None:
    for series in dataset.series:
        if series.benchmark == benchmark and series.metric == metric:
            return series
    return None


def _bandwidth_sizes(dataset: Dataset, benchmark: str) -> set[int]:
    """The message sizes at which a benchmark has a bandwidth series."""
    sizes = set()
    for series in dataset.series:
        if series.benchmark == benchmark and series.metric.startswith("bandwidth."):
            size = series.metric.removeprefix("bandwidth.")
            if size.isdigit():
                sizes.add(int(size))
    return sizes


def comparison_metric(dataset: Dataset, first: str, second: str) -> str | None:
    """The metric two pair benchmarks are compared on: bandwidth at their
    largest common message size (where a pair's link, not its latency, sets
    the pace), else their fitted bandwidth; None when they share neither."""
    common = _bandwidth_sizes(dataset, first) & _bandwidth_sizes(dataset, second)
    if common:
        return f"bandwidth.{max(common)}"
    if _series_of(dataset, first, FIT_BANDWIDTH) and _series_of(dataset, second, FIT_BANDWIDTH):
        return FIT_BANDWIDTH
    return None


@dataclass(frozen=True)
class PatternComparison:
    """Sorted against shuffled pairs on one metric: medians, their ratio and
    the one-sided Mann-Whitney p that the shuffled pairs are slower."""

    sorted_benchmark: str
    shuffled_benchmark: str
    metric: str
    unit: str
    sorted_count: int
    shuffled_count: int
    sorted_median: float
    shuffled_median: float
    p: float
    left_out_groups: tuple[str, ...] = ()  # weak groups whose pairs were left out
    shuffled_nodes: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        return self.shuffled_median / self.sorted_median if self.sorted_median > 0 else float("nan")

    @property
    def oversubscribed(self) -> bool:
        return self.ratio < OVERSUBSCRIPTION_RATIO and self.p < OVERSUBSCRIPTION_ALPHA

    def to_json(self) -> dict:
        return {"sorted": self.sorted_benchmark, "shuffled": self.shuffled_benchmark, "metric": self.metric,
                "unit": self.unit, "sorted_pairs": self.sorted_count, "shuffled_pairs": self.shuffled_count,
                "sorted_median": self.sorted_median, "shuffled_median": self.shuffled_median,
                "ratio": self.ratio, "p": self.p, "ratio_threshold": OVERSUBSCRIPTION_RATIO,
                "alpha": OVERSUBSCRIPTION_ALPHA, "left_out_groups": list(self.left_out_groups)}


def _pair_values(series: Series, skip: set[str], known: set[str] | None) -> tuple[np.ndarray, list[str]]:
    """The finite values of a pair series whose pairs touch no node of
    ``skip``, and the nodes of those pairs."""
    values, nodes = [], []
    for label, value in zip(series.labels.tolist(), series.values.tolist()):
        pair = split_pair(label, known)
        if not np.isfinite(value) or (pair is not None and skip.intersection(pair)):
            continue
        values.append(value)
        if pair is not None:
            nodes.extend(pair)
    return np.asarray(values, dtype=np.float64), sorted(set(nodes))


def compare_sorted_shuffled(dataset: Dataset, sensitivity: Sensitivity) -> list[PatternComparison]:
    """pingpong.sort against each shuffled pattern the store holds, on each
    network (pingpong.sort@ib against pingpong.shuffle@ib).

    With a topology, the pairs touching a weak group are left out of both
    sides: a group behind a poor uplink is that group's fault (weak-group),
    not the fabric's oversubscription.
    """
    # The networks with sorted pairs: None for the one node names reach.
    patterns = {split_network(s.benchmark.removeprefix(PATTERN_FAMILY)) for s in dataset.series
                if s.benchmark.startswith(PATTERN_FAMILY)}
    networks = {network for pattern, network in patterns if pattern == SORTED_PATTERN}
    if not networks:
        return []
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    weak = find_weak_groups(dataset, sensitivity) if dataset.topology else []
    skip = {node for group in weak for node in group.members}
    known = _known_nodes(dataset)
    comparisons = []
    for network in sorted(networks, key=lambda name: name or ""):
        sorted_name = pattern_series(PINGPONG, SORTED_PATTERN, network)
        for shuffled in (pattern_series(PINGPONG, name.partition(".")[2], network) for name in SHUFFLED_BENCHMARKS):
            metric = comparison_metric(dataset, sorted_name, shuffled)
            if metric is None:
                continue
            first, second = _series_of(dataset, sorted_name, metric), _series_of(dataset, shuffled, metric)
            assert first is not None and second is not None
            sorted_values, _ = _pair_values(first, skip, known)
            shuffled_values, nodes = _pair_values(second, skip, known)
            if len(sorted_values) == 0 or len(shuffled_values) == 0:
                continue
            # Lower bandwidth is worse; for a lower-is-better metric flip the test.
            alternative = "less" if second.higher_is_better else "greater"
            p = float(stats.mannwhitneyu(shuffled_values, sorted_values, alternative=alternative).pvalue)
            comparisons.append(PatternComparison(
                sorted_name, shuffled, metric, second.unit, len(sorted_values), len(shuffled_values),
                float(np.median(sorted_values)), float(np.median(shuffled_values)), p,
                tuple(group.group for group in weak), tuple(nodes)))
    return comparisons


@rule("oversubscription")
def oversubscription(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Shuffled pairs far slower than sorted neighbours: the links between switches are oversubscribed."""
    findings = []
    for c in compare_sorted_shuffled(dataset, sensitivity):
        if not c.oversubscribed:
            continue
        left_out = f" (pairs of the weak group {', '.join(c.left_out_groups)} left out)" if c.left_out_groups else ""
        findings.append(Finding(
            kind="oversubscription",
            severity=Severity.WARNING,
            subject=f"{c.shuffled_benchmark}:{c.metric}",
            nodes=fold(c.shuffled_nodes),
            message=(
                f"shuffled pairs reach a median {c.shuffled_median:.4g} {c.unit} against {c.sorted_median:.4g} "
                f"{c.unit} for sorted neighbours ({c.metric}, ratio {c.ratio:.2f}, below {OVERSUBSCRIPTION_RATIO}; "
                f"Mann-Whitney p = {c.p:.2g}){left_out}: pairs that cross switches share oversubscribed links"
            ),
            evidence=c.to_json(),
            remedy=(
                "Compare each switch's uplink capacity with the nodes behind it (k nodes at link speed L need "
                "k·L up); add or trunk uplinks, or place jobs so that their nodes share a switch. With a "
                "topology file (--topology), weak-group tells one bad uplink from a fabric-wide shortfall."
            ),
        ))
    return findings


# --- the all-pairs matrix: contention or a bad link --------------------------------


def slow_pair_limit(values: np.ndarray, sensitivity: Sensitivity) -> float:
    """The bandwidth below which a matrix pair is slow.

    The outlier rule's lower bound (median - t·σ, t the threshold for that
    many values at alpha, σ from the MAD; and at least min_effect below the
    median), raised to SLOW_LINK_FRACTION of the median when that is higher.
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan")
    scale = robust_scale(x)
    threshold = outlier_threshold(len(x), sensitivity.alpha)
    bound = -np.inf
    if len(x) >= MIN_OUTLIER_SAMPLE and np.isfinite(threshold):
        bound = min(scale.median - threshold * scale.sigma, (1.0 - sensitivity.min_effect) * scale.median)
    return float(max(bound, SLOW_LINK_FRACTION * scale.median))


def matrix_metric(dataset: Dataset) -> str | None:
    """The matrix's bandwidth metric judged for slow links: its largest message size."""
    sizes = _bandwidth_sizes(dataset, MATRIX_BENCHMARK)
    return f"bandwidth.{max(sizes)}" if sizes else None



@dataclass(frozen=True)
class LinkVerdict:
    """A pair slow in the matrix, and what its retest said."""

    label: str
    value: float  # in the matrix, its round's pairs all at once
    limit: float
    median: float
    retest: float | None  # the best of its retests
    concurrency: int | None  # pairs at once in its last retest (1: alone)

    @property
    def verdict(self) -> str:
        if self.retest is None or not np.isfinite(self.retest):
            return NOT_RETESTED
        return CONTENTION if self.retest >= self.limit else BAD_LINK

    def to_json(self) -> dict:
        return {"pair": self.label, "value": self.value, "limit": self.limit, "median": self.median,
                "retest": self.retest, "concurrency": self.concurrency, "verdict": self.verdict}


def link_verdicts(dataset: Dataset, sensitivity: Sensitivity) -> list[LinkVerdict]:
    """Every matrix pair below slow_pair_limit, with its retest; by label."""
    metric = matrix_metric(dataset)
    if metric is None:
        return []
    series = _series_of(dataset, MATRIX_BENCHMARK, metric)
    assert series is not None
    values = series.values
    limit = slow_pair_limit(values, sensitivity)
    if not np.isfinite(limit):
        return []
    median = float(np.median(values[np.isfinite(values)]))
    retest = _series_of(dataset, MATRIX_RETEST_BENCHMARK, metric)
    concurrency = _series_of(dataset, MATRIX_RETEST_BENCHMARK, CONCURRENCY_METRIC)
    retest_of = dict(zip(retest.labels.tolist(), retest.values.tolist())) if retest is not None else {}
    concurrency_of = (dict(zip(concurrency.labels.tolist(), concurrency.values.tolist()))
                      if concurrency is not None else {})
    verdicts = []
    for label, value in zip(series.labels.tolist(), values.tolist()):
        if np.isfinite(value) and value < limit:
            level = concurrency_of.get(label)
            verdicts.append(LinkVerdict(label, float(value), limit, median, retest_of.get(label),
                                        int(level) if level is not None else None))
    return verdicts


def _links_finding(kind: str, severity: Severity, subject: str, links: list[LinkVerdict],
                   known: set[str] | None, message: str, remedy: str, common: str | None = None) -> Finding:
    """A finding on matrix links, naming their nodes, or only the node they
    all go through when there is one (the odd one out)."""
    members = [split_pair(v.label, known) or (v.label,) for v in links]
    nodes = common if common is not None else fold({node for pair in members for node in pair})
    return Finding(kind=kind, severity=severity, subject=subject, nodes=nodes, message=message,
                   evidence={"links": [v.to_json() for v in links], "limit": links[0].limit,
                             "median": links[0].median, "slow_fraction": SLOW_LINK_FRACTION},
                   remedy=remedy)


def _common_node(links: list[LinkVerdict], known: set[str] | None) -> str | None:
    """The node in every one of two or more links, if there is one."""
    pairs = [split_pair(v.label, known) for v in links]
    if len(links) < 2 or any(p is None for p in pairs):
        return None
    common = set.intersection(*(set(p) for p in pairs if p is not None))
    return min(common) if len(common) == 1 else None


@rule("slow-link", kinds=("slow-link", "link-contention"))
def slow_link(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Matrix pairs slow under load, told apart by their retest: slow alone too
    (a bad link) or fine with fewer pairs at once (contention in the switch)."""
    verdicts = link_verdicts(dataset, sensitivity)
    if not verdicts:
        return []
    known = _known_nodes(dataset)
    subject = f"{MATRIX_BENCHMARK}:{matrix_metric(dataset)}"
    limit, median = verdicts[0].limit, verdicts[0].median
    unit = next(s.unit for s in dataset.series if s.benchmark == MATRIX_BENCHMARK and s.name == subject)
    by_verdict: dict[str, list[LinkVerdict]] = defaultdict(list)
    for verdict in verdicts:
        by_verdict[verdict.verdict].append(verdict)
    findings = []
    bad = by_verdict.get(BAD_LINK, [])
    if bad:
        shown = first_few([f"{v.label} {v.value:.4g} then {v.retest:.4g} alone" for v in bad], MESSAGE_ITEMS)
        common = _common_node(bad, known)
        where = (f"; all of them through {common}: suspect {common}'s card, cable or port" if common
                 else "")
        findings.append(_links_finding(
            "slow-link", Severity.WARNING, subject, bad, known,
            f"{len(bad)} link{'s are' if len(bad) > 1 else ' is'} slow alone too, below {limit:.4g} {unit} "
            f"(median {median:.4g}): {shown}{where}",
            "Check the cables and switch ports of these links (error counters, negotiated speed and duplex), "
            "swap the cable, then the port; rerun oddnode matrix.", common))
    untested = by_verdict.get(NOT_RETESTED, [])
    if untested:
        shown = first_few([f"{v.label} {v.value:.4g}" for v in untested], MESSAGE_ITEMS)
        findings.append(_links_finding(
            "slow-link", Severity.WARNING, subject, untested, known,
            f"{len(untested)} pair{'s are' if len(untested) > 1 else ' is'} slow in the matrix, below "
            f"{limit:.4g} {unit} (median {median:.4g}), and not retested alone: {shown}",
            "Rerun oddnode matrix, which retests slow pairs with fewer pairs at once, to tell contention in "
            "the switch from a bad link."))
    contention = by_verdict.get(CONTENTION, [])
    if contention:
        shown = first_few([f"{v.label} {v.value:.4g} then {v.retest:.4g}"
                           + (f" with {v.concurrency} at once" if v.concurrency else "")
                           for v in contention], MESSAGE_ITEMS)
        findings.append(_links_finding(
            "link-contention", Severity.INFO, subject, contention, known,
            f"{len(contention)} pair{'s were' if len(contention) > 1 else ' was'} slow only while other pairs ran, "
            f"below {limit:.4g} {unit} (median {median:.4g}) in the matrix and fine with fewer pairs at once: "
            f"{shown}; contention in the switch, not a bad link",
            "Compare the switch's backplane and uplink capacity with the load of N/2 pairs at once; if jobs "
            "need that load, spread them across switch modules or add capacity."))
    return findings
