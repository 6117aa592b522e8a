"""Rules that trace poor results to a weak node or a weak group (switch,
chassis) from who the poor results have in common: the reading of STAB's
ping-pong patterns (sort, cut, fold, shuffle)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
from scipy import stats

from oddnode.findings.population import analyse
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.model import Dataset, Finding, LabelKind, Series, Severity
from oddnode.nodes import fold, split_pair

# A node is weak when its poor pairs have at least this many different partners.
MIN_WEAK_PARTNERS = 2
# A group is weak when at least this many poor labels touch it ...
MIN_GROUP_LOW = 2
# ... and they are at least this share of all the poor labels of the series.
MIN_GROUP_DOMINANCE = 0.5
# An uplink is suspected when at least this share of the group's poor pairs
# cross to another group, and at most this share of its within-group pairs are poor.
UPLINK_CROSS_SHARE = 0.9
UPLINK_WITHIN_TOLERANCE = 0.1
# How many partners or series a message spells out.
MESSAGE_ITEMS = 6


def pair_series(dataset: Dataset) -> list[Series]:
    return [s for s in dataset.series if s.label_kind is LabelKind.PAIR]


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


def _tally(series: Series, bad: np.ndarray, member_groups: np.ndarray, names: list[str]) -> _SeriesTally:
    # Labels touching each group, a pair inside one group counted once.
    touching_counts = np.zeros(len(names), dtype=np.int64)
    for column in range(member_groups.shape[1]):
        known_column = member_groups[:, column]
        touching_counts += np.bincount(known_column[known_column >= 0], minlength=len(names))
    if member_groups.shape[1] == 2:
        same = member_groups[:, 0] == member_groups[:, 1]
        inside = member_groups[same & (member_groups[:, 0] >= 0), 0]
        touching_counts -= np.bincount(inside, minlength=len(names))
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
    return _SeriesTally(
        series.name, len(series), set(bad.tolist()), touching, dict(low), crossing, within, series.labels.tolist()
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
    p_adjusted = min(1.0, p * group_count)
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
    each next one tested again on the poor labels not yet explained.
    """
    topology = dataset.topology
    if not topology:
        return []
    poor = []
    for series in dataset.series:
        if series.label_kind in (LabelKind.NODE, LabelKind.PAIR):
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

    while candidates:
        # The candidate touching the most poor labels not yet explained.
        group = min(candidates, key=lambda g: (-unexplained(g), g))
        candidates.discard(group)
        results = [_group_test(t, group, e, group_count, alpha) for t, e in zip(tallies, explained)]
        if not any(results):
            continue
        members = sorted(node for node, g in topology.items() if g == group)
        weak = flagged[group] = WeakGroup(group, members, {}, {})
        for tally, done, result in zip(tallies, explained, results):
            if result is None:
                continue
            low = result.low
            done.update(low)
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
    flagged_codes = {codes[group]: weak for group, weak in flagged.items()}
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
    if weak.uplink:
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


def low_pairs(dataset: Dataset, sensitivity: Sensitivity) -> dict[str, list[LowPair]]:
    """Every poor pair of every pair series, listed under both of its nodes."""
    by_node: dict[str, list[LowPair]] = defaultdict(list)
    known: set[str] | None = None
    computed_known = False
    for series in pair_series(dataset):
        bad = analyse(series, sensitivity).bad_labels()
        if len(bad) == 0:
            continue
        if not computed_known:
            known, computed_known = _known_nodes(dataset), True
        median = float(np.median(series.values[np.isfinite(series.values)]))
        for index in bad.tolist():
            label = str(series.labels[index])
            pair = split_pair(label, known)
            if pair is None or pair[0] == pair[1]:
                continue
            value = float(series.values[index])
            a, b = pair
            by_node[a].append(LowPair(series.name, label, a, b, value, median))
            by_node[b].append(LowPair(series.name, label, b, a, value, median))
    return by_node


@rule("weak-pair-member")
def weak_pair_member(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """The node common to poor pairs with different partners: a weak card, cable or port."""
    by_node = low_pairs(dataset, sensitivity)
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
        if len(partners) < MIN_WEAK_PARTNERS or node in explained:
            continue
        partner_most = max(count[p] for p in partners)
        if count[node] <= partner_most:
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
