"""Before against after: two runs of the store compared series by series
and subject by subject (``compare_runs``), or groups of nodes within one
run (``compare_groups``: old nodes against new ones), each change with its
Holm-corrected significance and a verdict: improved, regressed, unchanged,
or too few repetitions to tell.

``samples`` reads the store, ``significance`` holds the tests, ``judge``
the verdicts; this module ties them together and holds the result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import numpy as np

from oddnode.stats import significance
from oddnode.judge.compare.verdicts import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    Consistency,
    Correction,
    Judgement,
    SeriesComparison,
    Settings,
    Verdict,
    compare_series,
    compare_units,
    decide,
)
from oddnode.store.samples import (
    RunInfo,
    Selection,
    SelectionError,
    SeriesSamples,
    fact_keys,
    facts_at,
    load_samples,
    run_table,
    select_runs,
    topology_at,
)
from oddnode.core.nodes import NodeNameError, fold, label_members
from oddnode.core.order import natural_key, natural_sorted
from oddnode.store import SCHEMA_VERSION, Store

if TYPE_CHECKING:
    from oddnode.report import documents

__all__ = [
    "DEFAULT_ALPHA", "DEFAULT_MIN_EFFECT", "Comparison", "Consistency", "Groups", "Judgement", "RunInfo",
    "Selection", "SelectionError", "SeriesComparison", "Settings", "Verdict", "compare_groups", "compare_runs",
    "choose_groups", "compare_samples", "group_by_fact", "group_by_topology", "groups_from_sets", "run_table", "select_runs",
]

FORMAT_VERSION = 1  # of the comparison's JSON
# A fact with more distinct values than this among the nodes is no grouping
# (a serial number, a MAC address): say so rather than compare 400 groups.
MAX_GROUPS = 16
# Subject names listed in the JSON under only_before / only_after are all
# kept; the terminal folds them.


@dataclass
class Groups:
    """Nodes in named groups, one of them the baseline the others are compared with."""

    source: str  # where they came from: "fact bios_date", "topology", "--group"
    members: dict[str, list[str]]  # group -> its nodes, groups in order
    baseline: str

    def group_of(self) -> dict[str, str]:
        return {node: group for group, nodes in self.members.items() for node in nodes}

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "baseline": self.baseline,
                "members": {group: fold(nodes) for group, nodes in self.members.items()}}


@dataclass
class Comparison:
    """A whole comparison: every series judged, regressions first."""

    mode: str  # "runs": two runs; "groups": groups of nodes within one run
    baseline: str  # how the baseline side is named in output
    other: str
    settings: Settings
    series: list[SeriesComparison]
    correction: Correction
    only_in_baseline: list[str] = field(default_factory=list)  # series measured on one side only
    only_in_other: list[str] = field(default_factory=list)
    same_run: list[str] = field(default_factory=list)  # series both sides read from one run: not compared
    baseline_selection: Selection | None = None
    other_selection: Selection | None = None
    groups: Groups | None = None
    within: Selection | None = None  # the runs a group comparison read (None: each series' newest)
    ungrouped: list[str] = field(default_factory=list)  # nodes with results but no group

    @property
    def judgements(self) -> list[Judgement]:
        return [j for s in self.series for j in s.judgements]

    @property
    def regressed(self) -> bool:
        return any(j.verdict is Verdict.REGRESSED for j in self.judgements)

    @property
    def exit_status(self) -> int:
        """1 when anything regressed (a maintenance window's gate), else 0."""
        return 1 if self.regressed else 0

    def summary(self) -> dict[str, Any]:
        """Verdict counts: of the series as wholes, and of their subjects."""
        whole = {v.value: sum(1 for s in self.series if s.overall.verdict is v) for v in Verdict}
        subjects = {v.value: sum(s.count(v) for s in self.series) for v in Verdict}
        return {"series": whole, "subjects": subjects, "tests": self.correction.tests,
                "too_few_to_test": self.correction.untestable}

    def to_json(self) -> documents.Compare:
        document: dict[str, Any] = {
            "format": "oddnode-compare", "version": FORMAT_VERSION, "store_schema": SCHEMA_VERSION,
            "mode": self.mode, "alpha": self.settings.alpha, "min_effect": self.settings.min_effect,
            "baseline": self.baseline_selection.to_json() if self.baseline_selection else {"name": self.baseline},
            "other": self.other_selection.to_json() if self.other_selection else {"name": self.other},
        }
        if self.baseline_selection:
            document["baseline"]["name"] = self.baseline
        if self.other_selection:
            document["other"]["name"] = self.other
        if self.groups is not None:
            document["groups"] = self.groups.to_json() | {"ungrouped": fold(self.ungrouped)}
            document["within"] = self.within.to_json() if self.within else None
        document |= {
            "summary": self.summary(),
            "series": [s.to_json() for s in self.series],
            "only_in_baseline": self.only_in_baseline, "only_in_other": self.only_in_other,
            "same_run": self.same_run,
            "regressed": self.regressed, "exit_status": self.exit_status,
        }
        return document


# -- choosing series --------------------------------------------------------------------------------


def _matches(series: SeriesSamples, patterns: Sequence[str]) -> bool:
    """A series a --benchmark pattern picks: a shell pattern on its name
    (benchmark:metric) or on its benchmark."""
    return not patterns or any(fnmatchcase(series.name, p) or fnmatchcase(series.benchmark, p) for p in patterns)


def _chosen(samples: Mapping[tuple[str, str], SeriesSamples], patterns: Sequence[str],
            side: str) -> dict[tuple[str, str], SeriesSamples]:
    chosen = {key: s for key, s in samples.items() if _matches(s, patterns)}
    if patterns and samples and not chosen:
        names = ", ".join(sorted({s.benchmark for s in samples.values()}))
        raise SelectionError(f"no series of {side} matches {', '.join(patterns)} (benchmarks: {names})")
    return chosen


def _ordered(series: list[SeriesComparison]) -> list[SeriesComparison]:
    """Regressions first, then improvements, the largest change first within each."""
    def key(s: SeriesComparison):
        change = s.overall.change
        size = -abs(change) if change is not None and math.isfinite(change) else -math.inf
        return (s.worst.rank, s.overall.verdict.rank, size, natural_key(s.name), natural_key(s.against))

    return sorted(series, key=key)


# -- two runs -----------------------------------------------------------------------------------------


def compare_samples(before: Mapping[tuple[str, str], SeriesSamples], after: Mapping[tuple[str, str], SeriesSamples],
                    settings: Settings = Settings(), baseline: str = "before", other: str = "after") -> Comparison:
    """Every series present on both sides compared; pure (no store)."""
    common = [key for key in before if key in after and before[key].run_id != after[key].run_id]
    # Overlapping selections can read a series from one run on both sides:
    # that is no comparison.
    same = sorted(before[key].name for key in before if key in after and before[key].run_id == after[key].run_id)
    # Tests in the whole comparison (subjects and series): the Monte Carlo
    # draws are set so that a p can reach Holm's smallest threshold.
    tests = sum(len((set(before[k].values) | set(before[k].failed)) & set(after[k].values)) + 1 for k in common)
    draws = significance.draws_for(tests, settings.alpha)
    series = [compare_series(before[key], after[key], other, settings, draws) for key in common]
    correction = decide(series, settings)
    return Comparison(
        "runs", baseline, other, settings, _ordered(series), correction,
        only_in_baseline=sorted(before[k].name for k in before if k not in after),
        only_in_other=sorted(after[k].name for k in after if k not in before), same_run=same)


def compare_runs(store: Store, baseline: str, other: str, settings: Settings = Settings(),
                 patterns: Sequence[str] = ()) -> Comparison:
    """Two selections of runs (see ``samples.select_runs``), the first the baseline."""
    first, second = select_runs(store, baseline), select_runs(store, other)
    if first.ids == second.ids:
        raise SelectionError(f"{baseline!r} and {other!r} name the same runs ({first.describe()}): "
                             "nothing to compare")
    before = _chosen(load_samples(store, first.ids), patterns, first.describe())
    after = _chosen(load_samples(store, second.ids), patterns, second.describe())
    if not any(key in after and before[key].run_id != after[key].run_id for key in before):
        raise SelectionError(
            f"{first.describe()} and {second.describe()} have no series in common "
            f"({', '.join(sorted(s.name for s in before.values())[:6]) or 'none'} against "
            f"{', '.join(sorted(s.name for s in after.values())[:6]) or 'none'})")
    comparison = compare_samples(before, after, settings, _side_name(first), _side_name(second))
    comparison.baseline_selection, comparison.other_selection = first, second
    return comparison


def _side_name(selection: Selection) -> str:
    """A short name for a side in tables: run 12, check 7, runs 12-13."""
    runs = selection.runs
    if len(runs) == 1:
        return f"run {runs[0].id}"
    checks = {r.check_id for r in runs}
    if len(checks) == 1 and None not in checks:
        return f"check {next(iter(checks))}"
    from oddnode.store.samples import _fold_ids

    return f"runs {_fold_ids(selection.ids)}"


# -- groups within one run ----------------------------------------------------------------------------


def _make_groups(node_group: Mapping[str, str], source: str, baseline: str | None,
                 order: Sequence[str] | None = None) -> Groups:
    members: dict[str, list[str]] = {}
    for node in natural_sorted(node_group):
        members.setdefault(node_group[node], []).append(node)
    if order is not None:
        members = {group: members[group] for group in order if group in members}
    else:
        members = {group: members[group] for group in natural_sorted(members)}
    # A value of its own for every node (a serial number) groups nothing either.
    if len(members) > MAX_GROUPS or (len(members) > 2 and len(members) == len(node_group)):
        raise SelectionError(f"{source} has {len(members)} distinct values among {len(node_group)} nodes: "
                             f"too many to compare as groups (at most {MAX_GROUPS})")
    if len(members) < 2:
        only = f" (all {len(node_group)} nodes: {next(iter(members))!r})" if members else ""
        raise SelectionError(f"{source} puts the nodes in fewer than two groups{only}: nothing to compare")
    if baseline is None:
        # The largest group is the norm the others are held against; with
        # groups given one by one, the first given.
        baseline = next(iter(members)) if order is not None else max(members, key=lambda g: len(members[g]))
    elif baseline not in members:
        raise SelectionError(f"no group named {baseline!r} in {source} (groups: {', '.join(members)})")
    return Groups(source, members, baseline)


def group_by_fact(store: Store, key: str, run_id: int | None, baseline: str | None = None) -> Groups:
    """Nodes grouped by one inventory fact's value, as inventoried at the run."""
    values = facts_at(store, key, run_id)
    if not values:
        keys = fact_keys(store)
        shown = ", ".join(keys[:20]) + (f", … ({len(keys)} keys)" if len(keys) > 20 else "")
        raise SelectionError(f"no node has a fact named {key!r} (facts: {shown or 'none: run oddnode inventory'})")
    return _make_groups(values, f"fact {key}", baseline)


def group_by_topology(node_group: Mapping[str, str] | None, store: Store, run_id: int | None,
                      baseline: str | None = None, source: str = "topology") -> Groups:
    """Nodes grouped by a topology (a file's, or the store's at the run)."""
    groups = dict(node_group) if node_group is not None else topology_at(store, run_id)
    if not groups:
        raise SelectionError("the store records no topology: give --topology FILE or record one "
                             "(oddnode check --topology FILE)")
    return _make_groups(groups, source, baseline)


def groups_from_sets(definitions: Sequence[tuple[str, Sequence[str]]], baseline: str | None = None) -> Groups:
    """Groups given one by one (name, nodes), in that order; a node in two is refused."""
    node_group: dict[str, str] = {}
    for name, nodes in definitions:
        for node in nodes:
            if node in node_group and node_group[node] != name:
                raise SelectionError(f"node {node} is in two groups: {node_group[node]} and {name}")
            node_group[node] = name
    return _make_groups(node_group, "--group", baseline, order=[name for name, _ in definitions])


def choose_groups(store: Store, selector: str | None = None, *, fact: str | None = None,
                  topology: str | None = None, definitions: Sequence[tuple[str, Sequence[str]]] = (),
                  baseline: str | None = None) -> Groups:
    """The groups one of these names, as they were at the selector's runs:
    ``definitions`` (name, nodes) given one by one, a ``topology`` file, or
    a ``fact`` (``topology``: the stored topology's groups)."""
    given = [name for name, value in (("definitions", definitions), ("topology", topology), ("fact", fact))
             if value]
    if len(given) != 1:
        raise SelectionError(f"give one way to group the nodes, not {len(given)}")
    at = max(select_runs(store, selector).ids) if selector is not None else None
    if definitions:
        return groups_from_sets(definitions, baseline)
    if topology is not None:
        from oddnode.core.topology import read_topology

        return group_by_topology(read_topology(topology), store, at, baseline, source=f"topology {topology}")
    if fact == "topology":
        return group_by_topology(None, store, at, baseline)
    return group_by_fact(store, fact, at, baseline)


def _units(series: SeriesSamples, group_of: Mapping[str, str]) -> tuple[dict[str, list[float]], set[str]]:
    """Each group's units (labels whose nodes are all in it), one value
    each: the median of the label's repetitions.  Also the nodes that have
    no group."""
    units: dict[str, list[float]] = {}
    ungrouped: set[str] = set()
    for label, values in series.values.items():
        try:
            members = label_members(label, series.label_kind)
        except NodeNameError:
            continue
        groups = {group_of.get(node) for node in members}
        ungrouped.update(node for node in members if node not in group_of)
        if len(groups) == 1 and None not in groups:
            units.setdefault(next(iter(groups)), []).append(float(np.median(values)))
    return units, ungrouped


def compare_groups(store: Store, groups: Groups, selector: str | None = None, settings: Settings = Settings(),
                   patterns: Sequence[str] = ()) -> Comparison:
    """Each group against the baseline group within one selection of runs
    (None: the newest run of every series): per series, Mann–Whitney
    between the groups' units (nodes, or pairs and sets whose nodes are all
    in one group), each unit one value, the median of its repetitions."""
    selection = select_runs(store, selector) if selector is not None else None
    samples = _chosen(load_samples(store, selection.ids if selection else None), patterns,
                      selection.describe() if selection else "the store")
    if not samples:
        raise SelectionError("the store holds no results to compare")
    return compare_grouped_samples(samples, groups, settings, selection)


def compare_grouped_samples(samples: Mapping[tuple[str, str], SeriesSamples], groups: Groups,
                            settings: Settings = Settings(), selection: Selection | None = None) -> Comparison:
    """``compare_groups`` on samples already read; pure."""
    group_of = groups.group_of()
    series: list[SeriesComparison] = []
    ungrouped: set[str] = set()
    for s in samples.values():
        units, missing = _units(s, group_of)
        ungrouped |= missing
        base = units.get(groups.baseline)
        if not base:
            continue
        for group in groups.members:
            if group == groups.baseline or not units.get(group):
                continue
            before, after = np.asarray(base), np.asarray(units[group])
            judgement, spread = compare_units(before, after, group, s.higher_is_better)
            series.append(SeriesComparison(s.benchmark, s.metric, s.unit, s.direction, s.label_kind, group,
                                           overall=judgement, spread=spread, baseline_run=s.run_id,
                                           other_run=s.run_id, before_values=before, after_values=after))
    if not series:
        raise SelectionError(f"no series has results on nodes of both {groups.baseline!r} and another group of "
                             f"{groups.source} ({', '.join(groups.members)})")
    correction = decide(series, settings)
    others = [g for g in groups.members if g != groups.baseline]
    return Comparison("groups", groups.baseline, ", ".join(others), settings, _ordered(series), correction,
                      groups=groups, within=selection, ungrouped=natural_sorted(ungrouped))
