"""Rules on sets of nodes: STAB's parallel runs on every set of K nodes in
sorted and shuffled order, and SCAB's scaling curves.

- ``weak-set-member``: the node common to the slow or failed sets across
  reshuffles, far above what chance puts there;
- ``set-contention``: shuffled sets far more variable than sorted ones
  (sets within one switch vary little, sets across switches contend for the
  links between them);
- ``scaling-loss``: the shuffled curve falls with the node count while the
  sorted one holds: oversubscribed uplinks, named from a topology.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from oddnode.findings.population import analyse
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.model import Dataset, Finding, LabelKind, Series, SetRuns, Severity
from oddnode.core.nodes import fold
from oddnode.core.order import natural_key
from oddnode.readings.sets import ScalingCurve, failed_set_runs, runs_by_ordering, scaling_curves, set_members
from oddnode.readings.sets_series import ORDERINGS, SCALE, SETS, SHUFFLED, SORTED, set_series
from oddnode.stats.robust import median, robust_scale

# How many sets, nodes or metrics a message spells out.
MESSAGE_ITEMS = 6
# How many slow runs and co-members the evidence lists.
EVIDENCE_ITEMS = 50

# --- weak-set-member ----------------------------------------------------------------

# A node is named only when more than this share of its runs are slow or
# failed: a weak card, DIMM or a competing process slows every set it is
# in, while chance puts a node in a few slow sets beside fast ones (as
# weak-pair-member's MIN_WEAK_SHARE).
MIN_WEAK_SET_SHARE = 0.5
# A run is slow, whatever the outlier rule says, when it is this many times
# worse than the better quartile of its ordering's runs: when a weak node
# is in a third or half of the runs (24 or 16 nodes in sets of 8), the slow
# runs form a mode as large as the healthy one and widen the MAD, so the
# outlier rule no longer sees them (as pairs.py's SLOW_LINK_FRACTION).  The
# better quartile stays among the healthy runs while under half are slow;
# 1.5 is far beyond a few per cent of noise, and a set waiting for one node
# at half speed takes about twice as long.
SLOW_RUN_FACTOR = 1.5


@dataclass(frozen=True)
class SetRun:
    """One repetition of one set: its value (NaN when it failed), whether it
    was slow or failed, and its ordering's median."""

    series: str
    label: str
    repetition: int | None
    value: float
    median: float
    failed: bool
    slow: bool

    @property
    def bad(self) -> bool:
        return self.failed or self.slow

    def to_json(self) -> dict:
        return {"series": self.series, "set": self.label, "repetition": self.repetition,
                "value": None if self.failed else self.value, "median": self.median, "failed": self.failed}


def slow_runs(runs: SetRuns, sensitivity: Sensitivity) -> np.ndarray:
    """Which runs of one set series are slow: outliers on the worse side (or
    in the smaller, worse mode) of the population of its runs, at least
    min_effect from the median; or SLOW_RUN_FACTOR times worse than its
    better quartile."""
    values = np.asarray(runs.values, dtype=np.float64)
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    # Each value is one run, not the best of several: repetitions of 1.
    population = Series(runs.benchmark, runs.metric, runs.unit, runs.direction, LabelKind.SET, runs.labels,
                        values, np.ones(len(values), dtype=np.int64))
    slow = np.zeros(len(values), dtype=bool)
    slow[analyse(population, sensitivity).bad_labels()] = True
    centre = median(values)
    slow &= np.abs(values - centre) >= sensitivity.min_effect * abs(centre)
    if runs.higher_is_better:
        slow |= values * SLOW_RUN_FACTOR < np.percentile(values, 75)
    else:
        slow |= values > SLOW_RUN_FACTOR * np.percentile(values, 25)
    return slow


def _runs_of(family: str, benchmark: str, metric: str | None, orderings: dict[str, SetRuns],
             failed: list, sensitivity: Sensitivity) -> list[SetRun]:
    """Every run of one benchmark metric in both orderings, slow ones marked
    within their own ordering, and its failed runs (one per set and repetition)."""
    out: list[SetRun] = []
    for ordering in ORDERINGS:
        name = set_series(family, benchmark, ordering)
        failed_keys = {(f.label, f.repetition) for f in failed if f.benchmark == name}
        runs = orderings.get(ordering)
        centre = float("nan")
        if runs is not None and len(runs):
            centre = median(runs.values)
            slow = slow_runs(runs, sensitivity)
            for label, repetition, value, is_slow in zip(runs.labels.tolist(), runs.repetitions.tolist(),
                                                         runs.values.tolist(), slow.tolist()):
                key = (label, repetition if repetition >= 0 else None)
                is_failed = key in failed_keys
                failed_keys.discard(key)
                out.append(SetRun(name, label, key[1], value, centre, is_failed, is_slow))
        for label, repetition in sorted(failed_keys, key=lambda k: (k[0], k[1] if k[1] is not None else -1)):
            out.append(SetRun(name, label, repetition, float("nan"), centre, True, False))
    return out


@dataclass
class WeakSetMember:
    """A node in far more slow or failed set runs than chance puts there."""

    node: str
    runs: int  # its runs among those judged when it was named
    bad_runs: list[SetRun]
    total_runs: int  # M: every run judged then
    total_bad: int  # B: the slow or failed ones
    p: float  # tail of its count under the null (see weak_set_members), times the nodes judged (Bonferroni)
    co_members: dict[str, int] = field(default_factory=dict)  # node -> its bad runs shared
    expected: float = float("nan")  # the bad runs chance puts it in: sum over its rounds of its runs' bad share


@dataclass(frozen=True)
class _Incidence:
    """Runs and their members as flat arrays: entry e puts node[e] in run[e];
    each run belongs to one round (a series' repetition: sets that ran at once)."""

    run: np.ndarray
    node: np.ndarray
    names: list[str]
    round_of: np.ndarray  # per run: its round's index
    rounds: int


def _incidence(runs: list[SetRun]) -> _Incidence:
    names = sorted({node for r in runs for node in set_members(r.label)}, key=natural_key)
    code = {name: index for index, name in enumerate(names)}
    round_code: dict[tuple[str, int | None], int] = {}
    run_index, node_index, round_of = [], [], []
    for index, r in enumerate(runs):
        round_of.append(round_code.setdefault((r.series, r.repetition), len(round_code)))
        for node in set_members(r.label):
            run_index.append(index)
            node_index.append(code[node])
    return _Incidence(np.array(run_index, dtype=np.intp), np.array(node_index, dtype=np.intp), names,
                      np.array(round_of, dtype=np.intp), len(round_code))


def _bad_run_sets(incidence: _Incidence, entries: np.ndarray, nodes: np.ndarray) -> dict[int, frozenset[int]]:
    """For the given nodes, the set of bad runs (among the entries) each is in."""
    wanted = np.isin(incidence.node[entries], nodes)
    found: dict[int, set[int]] = {int(n): set() for n in nodes}
    for run, node in zip(incidence.run[entries][wanted].tolist(), incidence.node[entries][wanted].tolist()):
        found[node].add(run)
    return {node: frozenset(runs) for node, runs in found.items()}


def round_tails(runs_per_round: np.ndarray, bad_per_round: np.ndarray, node_runs: np.ndarray,
                node_bad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(K_i >= k_i) for every node i, and E[K_i], when each round's bad runs
    fall on its runs at random, independently from round to round.

    Round r held s_r runs, b_r of them bad; node i was in c_ir of them
    (``node_runs``, nodes × rounds), so its bad count there is hypergeometric
    (s_r, b_r, c_ir): a Bernoulli of b_r / s_r when it was in one, as in
    every round of ``oddnode sets``, where a repetition's sets are disjoint.
    K_i is the sum over its rounds, and its distribution their convolution.
    Pooling all runs into one hypergeometric instead would let a node be in
    several runs of one round: its tail is then too thin (at 12 nodes in
    sets of 4, a node in the slow set of each of 6 repetitions gets 1/18564
    rather than 1/729).
    """
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    nodes, rounds = node_runs.shape
    most = int(node_runs.sum(axis=1).max(initial=0))
    pmf = np.zeros((nodes, most + 1))
    pmf[:, 0] = 1.0
    share = np.divide(bad_per_round, runs_per_round, out=np.zeros(rounds), where=runs_per_round > 0)
    for r in range(rounds):
        q = share[r]
        if q == 0.0:
            continue
        ones = node_runs[:, r] == 1
        if ones.any():
            shifted = np.zeros_like(pmf[ones])
            shifted[:, 1:] = pmf[ones, :-1]
            pmf[ones] = pmf[ones] * (1.0 - q) + shifted * q
        for i in np.flatnonzero(node_runs[:, r] > 1).tolist():
            c = int(node_runs[i, r])
            step = stats.hypergeom.pmf(np.arange(c + 1), int(runs_per_round[r]), int(bad_per_round[r]), c)
            pmf[i] = np.convolve(pmf[i], step)[: most + 1]
    # The tail summed from the top: no cancellation, so tiny p values stay exact.
    tails = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]
    k = np.clip(node_bad, 0, most)
    tail = np.minimum(1.0, tails[np.arange(nodes), k])
    return tail, node_runs @ share


@dataclass(frozen=True)
class _RoundCounts:
    """Per node and per round, the runs judged and the bad ones among them."""

    runs: np.ndarray  # per node: its runs (n_i)
    bad: np.ndarray  # per node: its bad runs (k_i)
    node_runs: np.ndarray  # nodes × rounds: its runs in each round (c_ir)
    runs_per_round: np.ndarray  # s_r
    bad_per_round: np.ndarray  # b_r

    @property
    def present(self) -> np.ndarray:
        return self.runs > 0

    @classmethod
    def of(cls, incidence: _Incidence, active: np.ndarray, bad: np.ndarray) -> _RoundCounts:
        """The counts over the active runs."""
        live = active[incidence.run]
        node_count = len(incidence.names)
        node_runs = np.zeros((node_count, incidence.rounds), dtype=np.int64)
        np.add.at(node_runs, (incidence.node[live], incidence.round_of[incidence.run[live]]), 1)
        return cls(np.bincount(incidence.node[live], minlength=node_count),
                   np.bincount(incidence.node[live & bad[incidence.run]], minlength=node_count),
                   node_runs,
                   np.bincount(incidence.round_of[active], minlength=incidence.rounds),
                   np.bincount(incidence.round_of[active & bad], minlength=incidence.rounds))


def weak_set_members(runs: list[SetRun], alpha: float) -> list[WeakSetMember]:
    """The nodes in far more slow or failed runs than chance, explained away in turn.

    Node i is in n_i of the M runs judged, k_i of them among the B bad ones.
    Its p_i is the chance of k_i or more bad runs when each round's (each
    repetition of each ordering: sets that ran at once) bad runs fall on
    its runs at random (round_tails).  The most significant node with
    p_i × (nodes judged) < alpha and k_i > MIN_WEAK_SET_SHARE · n_i is
    named, its runs are set aside and the rest judged again: a partner that
    shared several sets with it loses the evidence it borrowed, while a
    second weak node keeps its own.

    Nodes that are in exactly the same bad runs cannot be told apart (the
    members of one sorted set, together in every repetition): none of them
    is named from that evidence, and their runs are set aside as explained.
    """
    incidence = _incidence(runs)
    bad = np.array([r.bad for r in runs], dtype=bool)
    active = np.ones(len(runs), dtype=bool)
    named: list[WeakSetMember] = []
    while True:
        live = active[incidence.run]
        total, total_bad = int(active.sum()), int((active & bad).sum())
        if total_bad == 0:
            break
        counts = _RoundCounts.of(incidence, active, bad)
        n, k, present = counts.runs, counts.bad, counts.present
        p, expected = round_tails(counts.runs_per_round, counts.bad_per_round, counts.node_runs, k)
        adjusted = np.minimum(1.0, p * int(present.sum()))
        candidate = present & (adjusted < alpha) & (k > MIN_WEAK_SET_SHARE * n)
        if not candidate.any():
            break
        best = min(np.flatnonzero(candidate), key=lambda i: (adjusted[i], -k[i], natural_key(incidence.names[i])))
        entries = np.flatnonzero(live & bad[incidence.run])
        same_k = np.flatnonzero(present & (k == k[best]))
        bad_sets = _bad_run_sets(incidence, entries, same_k)
        tied = [int(i) for i in same_k if i != best and bad_sets[int(i)] == bad_sets[int(best)]]
        in_best = np.zeros(len(runs), dtype=bool)
        in_best[incidence.run[incidence.node == best]] = True
        if not tied:
            shared = Counter(incidence.names[node] for node in incidence.node[entries][
                np.isin(incidence.run[entries], list(bad_sets[int(best)]))] if node != best)
            named.append(WeakSetMember(
                incidence.names[best], int(n[best]), [runs[i] for i in sorted(bad_sets[int(best)])], total,
                total_bad, float(adjusted[best]), dict(shared.most_common(EVIDENCE_ITEMS)),
                float(expected[best])))
        active &= ~in_best
    return named


@dataclass(frozen=True)
class UndecidedMember:
    """A node in most of its runs' slow or failed sets, where even all of
    them could not reach alpha: too few repetitions to decide."""

    node: str
    runs: int  # n_i
    bad_runs: int  # k_i
    least_p: float  # the least p its runs allow (in every bad run it could be in), times the nodes judged
    repetitions: int  # the repetitions judged (distinct repetition numbers)
    repetitions_to_decide: int  # repetitions whose least p is below alpha, at the same share of bad runs


def undecided_members(runs: list[SetRun], alpha: float, named: set[str]) -> list[UndecidedMember]:
    """The nodes, not named, with at least 2 bad runs, more than
    MIN_WEAK_SET_SHARE of theirs, whose least p is not below alpha; taken
    in turn as weak_set_members takes them (the node with the largest
    share of bad runs first, its runs then set aside), so that set-mates
    do not borrow its evidence.

    A node's least p is its tail at the most bad runs it could be in (in
    each round, its runs there or the round's bad runs, whichever is
    fewer), times the nodes judged.  In a round of s_r runs, b_r of them
    bad, a node in one run is in a bad one with chance q_r = b_r / s_r: the
    least p is N · Π q_r, so each further round multiplies it by about
    their geometric mean g, and N · g^R < alpha takes R = log(alpha / N) /
    log(g) rounds: as many repetitions as that over the rounds a
    repetition gives it (its orderings).  Where every run of its rounds
    was bad no node stands out, and none is taken."""
    incidence = _incidence(runs)
    bad = np.array([r.bad for r in runs], dtype=bool)
    repetitions_of: dict[int, set] = defaultdict(set)
    for run, node in zip(incidence.run.tolist(), incidence.node.tolist()):
        repetitions_of[node].add(runs[run].repetition)
    active = np.ones(len(runs), dtype=bool)
    out: list[UndecidedMember] = []
    while True:
        counts = _RoundCounts.of(incidence, active, bad)
        judged = int(counts.present.sum())
        share = np.divide(counts.bad_per_round, counts.runs_per_round, out=np.zeros(incidence.rounds),
                          where=counts.runs_per_round > 0)
        most = np.minimum(counts.node_runs, counts.bad_per_round).sum(axis=1)
        least, _ = round_tails(counts.runs_per_round, counts.bad_per_round, counts.node_runs, most)
        least = np.minimum(1.0, least * judged)
        k, n = counts.bad, counts.runs
        suspect = [i for i, node in enumerate(incidence.names)
                   if node not in named and k[i] >= 2 and k[i] > MIN_WEAK_SET_SHARE * n[i] and least[i] >= alpha
                   and np.any((share > 0) & (share < 1) & (counts.node_runs[i] > 0))]
        if not suspect:
            return out
        i = min(suspect, key=lambda j: (-k[j] / n[j], -k[j], natural_key(incidence.names[j])))
        chances = share[(counts.node_runs[i] > 0) & (share > 0)]
        rounds_needed = math.log(alpha / judged) / float(np.mean(np.log(chances)))
        per_repetition = len(chances) / len(repetitions_of[i])
        out.append(UndecidedMember(incidence.names[i], int(n[i]), int(k[i]), float(least[i]),
                                   len(repetitions_of[i]), math.ceil(rounds_needed / per_repetition)))
        active[incidence.run[incidence.node == i]] = False


def _units(dataset: Dataset) -> dict[tuple[str, str], dict[str | None, dict[str, SetRuns]]]:
    """(family, benchmark) -> metric -> ordering -> runs, for the sets family;
    a benchmark with failed runs only is judged on them under metric None."""
    units: dict[tuple[str, str], dict[str | None, dict[str, SetRuns]]] = defaultdict(dict)
    for (family, benchmark, metric), orderings in runs_by_ordering(dataset, SETS).items():
        units[(family, benchmark)][metric] = orderings
    for (family, benchmark) in failed_set_runs(dataset):
        if family == SETS and (family, benchmark) not in units:
            units[(family, benchmark)][None] = {}
    return units


UNDECIDED_KIND = "weak-set-member-undecided"


@rule("weak-set-member", kinds=("weak-set-member", UNDECIDED_KIND))
def weak_set_member(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """The node common to slow or failed sets across reshuffles: a weak node.

    Both orderings of one benchmark metric are judged together: a run is
    marked slow within its own ordering (shuffled sets may be slower as a
    whole, from contention, without any weak node), then the runs are
    pooled, because the shuffled runs separate a weak node from the
    set-mates a sorted set always gives it, while its sorted runs add to its
    count.  Each metric is one test at alpha; a node found in several is one
    finding.  Scale runs are not judged: their node count, not a member,
    sets their value.  Nothing is named without slow or failed runs, and a
    run is judged slow only in an ordering of at least 5 runs (the outlier
    rule's minimum) or by SLOW_RUN_FACTOR.

    With s sets a repetition, chance puts a node in the one slow set of a
    repetition once in s, so a weak node needs about log(N / alpha) / log(s)
    runs (both orderings together) to be named among N nodes: at the
    default alpha, 12 nodes in sets of 4 need 6 repetitions of each
    ordering, 24 nodes in sets of 4 need 4, in sets of 8 need 6, 100 nodes
    3 or 4.  Two weak nodes make two slow sets a repetition, and need more.
    A node in most of its runs' slow sets where the runs are too few for
    any node to reach alpha gets an info finding that says so, with the
    repetitions that would decide (UNDECIDED_KIND).
    """
    failed = failed_set_runs(dataset)
    findings = []
    for (family, benchmark), metrics in sorted(_units(dataset).items()):
        found: dict[str, dict[str | None, WeakSetMember]] = defaultdict(dict)
        judged_runs = {}
        for metric, orderings in metrics.items():
            runs = judged_runs[metric] = _runs_of(family, benchmark, metric, orderings,
                                                  failed.get((family, benchmark), []), sensitivity)
            for member in weak_set_members(runs, sensitivity.alpha):
                found[member.node][metric] = member
        for node in sorted(found, key=natural_key):
            findings.append(_weak_set_finding(family, benchmark, node, found[node], metrics))
        undecided: dict[str, tuple[str | None, UndecidedMember]] = {}
        for metric, runs in judged_runs.items():
            for member in undecided_members(runs, sensitivity.alpha, set(found)):
                if member.node not in undecided or member.least_p < undecided[member.node][1].least_p:
                    undecided[member.node] = (metric, member)
        if undecided:
            findings.append(_undecided_finding(family, benchmark, undecided, sensitivity.alpha))
    return findings


def _undecided_finding(family: str, benchmark: str, undecided: dict[str, tuple[str | None, UndecidedMember]],
                       alpha: float) -> Finding:
    nodes = sorted(undecided, key=natural_key)
    members = [undecided[node][1] for node in nodes]
    least = min(m.least_p for m in members)
    needed = max(m.repetitions_to_decide for m in members)
    repetitions = max(m.repetitions for m in members)
    shown = first_few([f"{m.node} in {m.bad_runs} of its {m.runs} runs" for m in members], MESSAGE_ITEMS)
    return Finding(
        kind=UNDECIDED_KIND,
        severity=Severity.INFO,
        subject=f"{family}.{benchmark}",
        nodes=fold(nodes),
        message=(f"{repetitions} repetitions cannot tell a weak set member from chance: {shown} slow or failed "
                 f"sets, but the least p these runs allow (in every slow set it could be in) is {least:.2g} "
                 f"over all nodes, above alpha {alpha:g}; {needed} repetitions or more can decide"),
        evidence={"alpha": alpha, "least_p": least, "repetitions": repetitions, "repetitions_to_decide": needed,
                  "nodes": {m.node: {"metric": undecided[m.node][0], "runs": m.runs, "slow_or_failed": m.bad_runs,
                                     "least_p": m.least_p, "repetitions_to_decide": m.repetitions_to_decide}
                            for m in members}},
        remedy=f"Run the sets again with more repetitions and judge again: oddnode sets -r {needed} (or more; "
               f"the check: -r {needed}).",
    )


def _weak_set_finding(family: str, benchmark: str, node: str, by_metric: dict[str | None, WeakSetMember],
                      metrics: dict) -> Finding:
    # The metric with the strongest evidence speaks for the others.
    metric, member = min(by_metric.items(), key=lambda item: (item[1].p, natural_key(item[0] or "")))
    orderings = sorted({r.series.rpartition(".")[2] for r in member.bad_runs}, key=ORDERINGS.index)
    subject = f"{family}.{benchmark}.{'+'.join(orderings)}" + (f":{metric}" if metric else "")
    failed = sum(r.failed for r in member.bad_runs)
    slow = len(member.bad_runs) - failed
    what = " and ".join(part for part in (f"{slow} slow" if slow else "", f"{failed} failed" if failed else "")
                        if part)
    partner_most = max(member.co_members.values(), default=0)
    shown = first_few([f"{r.label} {'failed' if r.failed else f'{r.value:.4g}'}" for r in member.bad_runs],
                      MESSAGE_ITEMS)
    # The median of the ordering whose runs are shown first (an ordering with
    # failed runs only has none).
    medians = [r.median for r in member.bad_runs if np.isfinite(r.median)]
    median_text = f"; median {medians[0]:.4g}" if medians else ""
    return Finding(
        kind="weak-set-member",
        severity=Severity.WARNING,
        subject=subject,
        nodes=node,
        message=(
            f"{node} is in {what} of its {member.runs} set runs ({shown}{median_text}), where chance would "
            f"put it in {member.expected:.1f} (p = {member.p:.2g} over all nodes); "
            f"no other node is in more than {partner_most} of them: {node} is the weak member"
        ),
        evidence={
            "runs": member.runs,
            "slow_runs": slow,
            "failed_runs": failed,
            "p": member.p,
            "expected": member.expected,
            "total_runs": member.total_runs,
            "total_slow_or_failed": member.total_bad,
            "metric": metric,
            "metrics": {m: {"runs": w.runs, "slow_or_failed": len(w.bad_runs), "p": w.p}
                        for m, w in sorted(by_metric.items(), key=lambda item: natural_key(item[0] or ""))},
            "slow_sets": [r.to_json() for r in member.bad_runs[:EVIDENCE_ITEMS]],
            "co_members": member.co_members,
        },
        remedy=(
            f"Check {node}: look for processes the other nodes do not run, run its single-node benchmarks "
            "(memory, DGEMM) and its pairs, check its interconnect card, cable and switch port; then rerun "
            f"its sets with {node} and without it."
        ),
    )


# --- one metric per benchmark -------------------------------------------------------


def _size(metric: str, prefix: str) -> int | None:
    size = metric.removeprefix(prefix + ".")
    return int(size) if metric.startswith(prefix + ".") and size.isdigit() else None


def judged_metric(metrics: list[str]) -> str | None:
    """The one metric a set rule judges per benchmark, so that one cause is
    one finding, not one per message size: the bandwidth at the largest
    size (where the links, not latency, set the pace), else ``bandwidth``,
    ``rate`` (higher is better) or ``time``, else the time at the largest
    size, else the first metric in natural order."""
    for prefix in ("bandwidth",):
        sized = [(s, m) for m in metrics if (s := _size(m, prefix)) is not None]
        if sized:
            return max(sized)[1]
    for name in ("bandwidth", "rate", "time"):
        if name in metrics:
            return name
    sized = [(s, m) for m in metrics if (s := _size(m, "time")) is not None]
    if sized:
        return max(sized)[1]
    return min(metrics, key=natural_key) if metrics else None


def _run_nodes(*runs: SetRuns | None) -> str:
    return fold({node for r in runs if r is not None for label in set(r.labels.tolist())
                 for node in set_members(label)})


# --- set-contention -----------------------------------------------------------------

# Shuffled runs must be more variable than sorted ones in Levene's test
# (Brown-Forsythe: deviations from each ordering's median, robust to a few
# slow runs), one-sided, at p < 0.01.  One test per benchmark, on the metric
# judged_metric picks, so no correction for multiplicity; the effect sizes
# below keep healthy noise away from it, and 0.01 (rather than alpha) lets
# 12 to 15 runs per ordering, a few repetitions of a few sets, reach it:
# at 15 runs, 1% of noise against shuffled runs spread over ±20% gives p of
# 2e-5, two modes 60% apart 2e-3.
CONTENTION_ALPHA = 0.01
# ... and the shuffled runs' robust spread (1.4826·MAD over the median, %)
# at least twice the sorted runs' and at least 5%: a fabric with full
# bisection gives both orderings the same spread, and a spread of a few per
# cent is the noise of any MPI benchmark, not contention worth a warning.
CONTENTION_RATIO = 2.0
CONTENTION_FLOOR_PCT = 5.0
# Fewer runs per ordering say nothing about its spread.
MIN_CONTENTION_RUNS = 5


def robust_spread_pct(values: np.ndarray) -> float:
    """1.4826·MAD over |median|, in per cent: a coefficient of variation that
    a few slow runs cannot drag."""
    scale = robust_scale(values)
    return float(scale.sigma / abs(scale.median) * 100.0) if scale.median else float("nan")


def _variability_pct(values: np.ndarray) -> float:
    low, high = float(np.min(values)), float(np.max(values))
    return (high - low) / abs(low) * 100.0 if low else float("nan")


@dataclass(frozen=True)
class OrderingSpread:
    """Sorted against shuffled runs of one benchmark metric: their spreads and
    Levene's one-sided p that the shuffled runs vary more."""

    metric: str
    unit: str
    sorted_runs: int
    shuffled_runs: int
    sorted_spread_pct: float
    shuffled_spread_pct: float
    sorted_variability_pct: float  # STAB's (high - low) / low
    shuffled_variability_pct: float
    sorted_median: float
    shuffled_median: float
    p: float

    @property
    def contention(self) -> bool:
        return (self.p < CONTENTION_ALPHA and self.shuffled_spread_pct >= CONTENTION_FLOOR_PCT
                and self.shuffled_spread_pct >= CONTENTION_RATIO * self.sorted_spread_pct)

    def to_json(self) -> dict:
        return {"metric": self.metric, "unit": self.unit, "sorted_runs": self.sorted_runs,
                "shuffled_runs": self.shuffled_runs, "sorted_spread_pct": self.sorted_spread_pct,
                "shuffled_spread_pct": self.shuffled_spread_pct,
                "sorted_variability_pct": self.sorted_variability_pct,
                "shuffled_variability_pct": self.shuffled_variability_pct,
                "sorted_median": self.sorted_median, "shuffled_median": self.shuffled_median, "p": self.p}


def ordering_spread(sorted_runs: SetRuns, shuffled_runs: SetRuns) -> OrderingSpread | None:
    """The spreads of both orderings and Levene's p; None with fewer than
    MIN_CONTENTION_RUNS runs in either."""
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    a, b = np.asarray(sorted_runs.values, float), np.asarray(shuffled_runs.values, float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < MIN_CONTENTION_RUNS or len(b) < MIN_CONTENTION_RUNS:
        return None
    # Variability is relative (a %variability, a spread over the median):
    # positive values are compared on their logarithms, so that shuffled runs
    # at half the sorted bandwidth with twice their relative spread count as
    # more variable, and slower times, larger in the same proportion, do not.
    x, y = (np.log(a), np.log(b)) if a.min() > 0 and b.min() > 0 else (a, b)
    # Levene's statistic with two groups is the square of a t statistic on the
    # absolute deviations: halve its p when the shuffled deviations are the
    # larger, else the one-sided p is at least a half.
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        p = 1.0
    else:
        two_sided = float(stats.levene(x, y, center="median").pvalue)
        wider = np.mean(np.abs(y - median(y))) > np.mean(np.abs(x - median(x)))
        p = two_sided / 2 if wider else 1.0 - two_sided / 2
    return OrderingSpread(
        sorted_runs.metric, sorted_runs.unit, len(a), len(b), robust_spread_pct(a), robust_spread_pct(b),
        _variability_pct(a), _variability_pct(b), median(a), median(b), p)


def _groups_spanned(runs: SetRuns, topology: dict[str, str]) -> float:
    """The median number of topology groups a run's set spans."""
    spans = [len({topology[n] for n in set_members(label) if n in topology}) for label in runs.labels.tolist()]
    return float(np.median(spans)) if spans else float("nan")


@rule("set-contention")
def set_contention(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Shuffled sets far more variable than sorted ones: contention for the links between switches."""
    per_benchmark: dict[str, dict[str, tuple[SetRuns, SetRuns]]] = defaultdict(dict)
    for (_, benchmark, metric), orderings in runs_by_ordering(dataset, SETS).items():
        if SORTED in orderings and SHUFFLED in orderings:
            per_benchmark[benchmark][metric] = (orderings[SORTED], orderings[SHUFFLED])
    findings = []
    for benchmark, metrics in sorted(per_benchmark.items()):
        metric = judged_metric(list(metrics))
        spreads = {m: s for m, pair in metrics.items() if (s := ordering_spread(*pair)) is not None}
        judged = spreads.get(metric) if metric is not None else None
        if judged is None or not judged.contention:
            continue
        sorted_runs, shuffled_runs = metrics[metric]
        findings.append(_contention_finding(benchmark, judged, spreads, sorted_runs, shuffled_runs,
                                            dataset.topology))
    return findings


def _contention_finding(benchmark: str, s: OrderingSpread, spreads: dict[str, OrderingSpread],
                        sorted_runs: SetRuns, shuffled_runs: SetRuns, topology: dict[str, str]) -> Finding:
    evidence = {**s.to_json(), "alpha": CONTENTION_ALPHA, "ratio_threshold": CONTENTION_RATIO,
                "floor_pct": CONTENTION_FLOOR_PCT,
                "metrics": {m: spreads[m].to_json() for m in sorted(spreads, key=natural_key)}}
    spanned = ""
    if topology:
        groups = {SORTED: _groups_spanned(sorted_runs, topology), SHUFFLED: _groups_spanned(shuffled_runs, topology)}
        evidence["groups_spanned"] = groups
        spanned = f"; sorted sets span a median {groups[SORTED]:g} groups, shuffled ones {groups[SHUFFLED]:g}"
    return Finding(
        kind="set-contention",
        severity=Severity.WARNING,
        subject=f"{set_series(SETS, benchmark, SHUFFLED)}:{s.metric}",
        nodes=_run_nodes(shuffled_runs),
        message=(
            f"shuffled sets vary by {s.shuffled_spread_pct:.3g}% (robust spread; %variability "
            f"{s.shuffled_variability_pct:.3g}, median {s.shuffled_median:.4g} {s.unit}) against "
            f"{s.sorted_spread_pct:.3g}% for sorted sets (%variability {s.sorted_variability_pct:.3g}, median "
            f"{s.sorted_median:.4g}) ({s.metric}; Levene p = {s.p:.2g}){spanned}: sets of neighbours vary "
            "little while sets spread over the cluster contend for the links between switches"
        ),
        evidence=evidence,
        remedy=(
            "Compare each switch's uplink capacity with the nodes behind it and look for oversubscribed or "
            "degraded uplinks (error counters, trunk members down); run oddnode scale to see the shuffled "
            "curve fall with the node count, and place jobs so that their nodes share a switch meanwhile."
        ),
    )


# --- scaling-loss -------------------------------------------------------------------

# The shuffled curve has lost scaling when, at the largest node count both
# orderings measured, its median is below half the sorted one's (the links
# between switches carry at least two flows' traffic each: 2:1 or worse,
# as oversubscription's ratio for pairs) ...
LOSS_RATIO = 0.5
# ... when it lost at least that much from its smallest common count to its
# largest: fall(o) = median at the largest count over median at the
# smallest (inverted for time), fall(shuffled) <= LOSS_RATIO.  A slow
# application falls in both orderings alike (its ratio stays near 1) and is
# not named; shuffled sets that are slower by the same factor at every count
# have not lost scaling.  The ratio at the smallest count is not asked for:
# with one poor uplink, about half of the shuffled pairs cross it, so the
# median there is the uplink's or a link's rate by the luck of the draw.
# Lastly at least LOSS_REPEATS shuffled repetitions at the largest count,
# and more than half of them, are below LOSS_RATIO of the sorted median
# there: the loss repeats, it is not one bad run.
LOSS_REPEATS = 2
# With a topology the group whose uplink explains the loss is named (see
# slow_uplinks); among groups the slow runs cannot tell apart, one whose
# best crossing run reached less than this fraction of each other's.
UPLINK_FRACTION = 0.5
# A poor uplink slows the runs that cross it; a run that crosses it not
# may be slow all the same now and then (a node's busy moment, another
# job's burst).  Up to this share of the slow runs may miss the group
# named: one in four, so that one such run among four or more does not
# hide the poor uplink, while it takes three runs that agree to outvote one.
UNEXPLAINED_SHARE = 0.25


def _goodness(value: float, higher_is_better: bool) -> float:
    """A value turned so that higher is better (1/time), for ratios."""
    return value if higher_is_better else (1.0 / value if value else float("nan"))


@dataclass(frozen=True)
class ScalingComparison:
    """Sorted against shuffled curve of one scale benchmark metric, between
    their smallest and largest common node counts."""

    sorted: ScalingCurve
    shuffled: ScalingCurve
    smallest: int
    largest: int

    def ratio(self, count: int) -> float:
        """Shuffled over sorted median at a count, higher is better."""
        up = self.sorted.higher_is_better
        a, b = self.sorted.at(count), self.shuffled.at(count)
        return _goodness(b.median, up) / _goodness(a.median, up) if a and b else float("nan")

    def fall(self, curve: ScalingCurve) -> float:
        """Median at the largest count over median at the smallest, higher is better."""
        up = curve.higher_is_better
        first, last = curve.at(self.smallest), curve.at(self.largest)
        return _goodness(last.median, up) / _goodness(first.median, up)

    @property
    def slow_repeats(self) -> int:
        """Shuffled repetitions at the largest count below LOSS_RATIO of the sorted median there."""
        up = self.sorted.higher_is_better
        limit = LOSS_RATIO * _goodness(self.sorted.at(self.largest).median, up)
        return sum(1 for v in self.shuffled.at(self.largest).values if _goodness(v, up) < limit)

    @property
    def repeats(self) -> bool:
        """At least LOSS_REPEATS shuffled repetitions at the largest count, and more than half, show the loss."""
        slow, runs = self.slow_repeats, self.shuffled.at(self.largest).n
        return slow >= LOSS_REPEATS and 2 * slow > runs

    @property
    def loss(self) -> bool:
        return self.ratio(self.largest) < LOSS_RATIO and self.fall(self.shuffled) <= LOSS_RATIO and self.repeats

    def to_json(self) -> dict:
        common = [c for c in self.sorted.counts if self.shuffled.at(c)]
        return {"metric": self.sorted.metric, "unit": self.sorted.unit, "smallest": self.smallest,
                "largest": self.largest, "sorted_fall": self.fall(self.sorted),
                "shuffled_fall": self.fall(self.shuffled), "ratio_threshold": LOSS_RATIO,
                "slow_repeats": self.slow_repeats, "repeats_at_largest": self.shuffled.at(self.largest).n,
                "ratio": {c: self.ratio(c) for c in common},
                SORTED: {c: self.sorted.at(c).median for c in self.sorted.counts},
                SHUFFLED: {c: self.shuffled.at(c).median for c in self.shuffled.counts}}


def scaling_comparisons(dataset: Dataset) -> dict[str, list[ScalingComparison]]:
    """Scale benchmark -> its sorted against shuffled curves, a metric each,
    judged metric first; curves with fewer than 2 common node counts, or a
    median that is not positive, are left out."""
    pairs: dict[tuple[str, str], dict[str, ScalingCurve]] = defaultdict(dict)
    for curve in scaling_curves(dataset):
        pairs[(curve.benchmark, curve.metric)][curve.ordering] = curve
    out: dict[str, list[ScalingComparison]] = defaultdict(list)
    for (benchmark, _), curves in pairs.items():
        if SORTED not in curves or SHUFFLED not in curves:
            continue
        common = [c for c in curves[SORTED].counts if curves[SHUFFLED].at(c)]
        medians = [p.median for curve in curves.values() for p in curve.points if p.nodes in common]
        if len(common) < 2 or min(medians) <= 0:
            continue
        out[benchmark].append(ScalingComparison(curves[SORTED], curves[SHUFFLED], min(common), max(common)))
    for benchmark, comparisons in out.items():
        first = judged_metric([c.sorted.metric for c in comparisons])
        comparisons.sort(key=lambda c: (c.sorted.metric != first, natural_key(c.sorted.metric)))
    return dict(sorted(out.items()))


def crossed_groups(label: str, topology: dict[str, str]) -> frozenset[str]:
    """The groups whose uplink a set's traffic crosses: those holding some of
    its members but not all (a member outside the topology is outside every
    group)."""
    members = set_members(label)
    counts = Counter(topology[n] for n in members if n in topology)
    return frozenset(group for group, m in counts.items() if m < len(members))


def uplink_estimates(runs: SetRuns, topology: dict[str, str]) -> dict[str, float]:
    """Each group's best crossing run: the best value (highest bandwidth,
    lowest time) of the runs whose sets cross its uplink.

    A chain that crosses an uplink sends at least one of its flows through
    it, each way, and every flow of the chain moves at least at its measured
    rate: the uplink carried that much (a lower bound on what it can
    carry, whatever the ranks' order, which the label does not keep).  For
    the group whose uplink limits the chain, the pairs that cross it reach
    its rate.  Groups no run crossed are left out."""
    up = runs.higher_is_better
    best: dict[str, float] = {}
    for label, value in zip(runs.labels.tolist(), runs.values.tolist()):
        if not np.isfinite(value):
            continue
        for group in crossed_groups(label, topology):
            if group not in best or _goodness(value, up) > _goodness(best[group], up):
                best[group] = value
    return dict(sorted(best.items(), key=lambda item: natural_key(item[0])))


@dataclass(frozen=True)
class UplinkReading:
    """Which group's uplink explains the slow shuffled runs of a scale benchmark."""

    slow_runs: list[str]  # labels of the shuffled runs below LOSS_RATIO of the sorted median at their count
    judged_runs: int  # shuffled runs at counts the sorted curve measured
    candidates: list[str]  # groups every slow run crosses
    slow: list[str]  # the groups named
    estimates: dict[str, float]  # group -> its best crossing run (uplink_estimates)

    def to_json(self) -> dict:
        return {"slow_runs": len(self.slow_runs), "judged_runs": self.judged_runs,
                "candidates": self.candidates, "estimates": self.estimates}


def slow_uplinks(sorted_runs: SetRuns, shuffled_runs: SetRuns, topology: dict[str, str]) -> UplinkReading:
    """The group whose uplink the slow shuffled runs have in common.

    A shuffled run is slow when it is below LOSS_RATIO of the sorted median
    at its node count.  A poor uplink slows the runs that cross it, and only
    those: the candidates are the groups that the most slow runs cross (at
    least LOSS_REPEATS slow runs, and all but UNEXPLAINED_SHARE of them: a
    run slowed by a busy moment need not cross the poor uplink).  One
    candidate is named.  Several are
    told apart by what their crossing runs reached: a group is named when
    its best crossing run (uplink_estimates) is below UPLINK_FRACTION of
    each other candidate's, whose uplinks thereby carried twice as much.
    Otherwise none is named: the runs crossed those uplinks together, or
    every uplink is short (a fabric oversubscribed as a whole).  Nor is a
    group named when some other group's best crossing run is below
    UPLINK_FRACTION of its own: that uplink carried less."""
    up = sorted_runs.higher_is_better
    by_count: dict[int, list[float]] = defaultdict(list)
    for label, value in zip(sorted_runs.labels.tolist(), sorted_runs.values.tolist()):
        by_count[len(set_members(label))].append(value)
    reference = {count: _goodness(median(np.array(v)), up) for count, v in by_count.items()}
    judged, slow_labels, slow_crossed = 0, [], []
    for label, value in zip(shuffled_runs.labels.tolist(), shuffled_runs.values.tolist()):
        count = len(set_members(label))
        if count not in reference or not np.isfinite(value):
            continue
        judged += 1
        if _goodness(value, up) < LOSS_RATIO * reference[count]:
            slow_labels.append(label)
            slow_crossed.append(crossed_groups(label, topology))
    estimates = uplink_estimates(shuffled_runs, topology)
    groups = sorted(set(topology.values()), key=natural_key)
    # The candidates: the groups crossed by the most slow runs, at least
    # LOSS_REPEATS of them, and by all but UNEXPLAINED_SHARE of them.
    missed = {g: sum(g not in crossed for crossed in slow_crossed) for g in groups}
    eligible = {g: m for g, m in missed.items()
                if len(slow_crossed) - m >= LOSS_REPEATS and m <= UNEXPLAINED_SHARE * len(slow_crossed)}
    fewest = min(eligible.values(), default=None)
    candidates = [g for g, m in eligible.items() if m == fewest]

    def carried_less(g: str, h: str) -> bool:
        """Whether g's best crossing run is under UPLINK_FRACTION of h's."""
        return (g in estimates and h in estimates
                and _goodness(estimates[g], up) < UPLINK_FRACTION * _goodness(estimates[h], up))

    # Each other candidate's uplink carried twice what the named one's did
    # (one candidate needs no such run) ...
    slow = [g for g in candidates if all(carried_less(g, h) for h in candidates if h != g)]
    # ... and no group's uplink carried under half of it: that one would be
    # the poorer, and the slow runs' crossing the named group chance (one
    # run slowed by a busy moment where the poor uplink is not).
    slow = [g for g in slow if not any(carried_less(h, g) for h in estimates if h != g)]
    return UplinkReading(slow_labels, judged, candidates, slow, estimates)


def _scale_runs(dataset: Dataset, benchmark: str, metric: str) -> tuple[SetRuns | None, SetRuns | None]:
    """The sorted and the shuffled scale runs of one benchmark metric."""
    orderings = runs_by_ordering(dataset, SCALE).get((SCALE, benchmark, metric), {})
    return orderings.get(SORTED), orderings.get(SHUFFLED)


@rule("scaling-loss")
def scaling_loss(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """The shuffled scaling curve falls with the node count while the sorted one holds: oversubscribed uplinks."""
    findings = []
    for benchmark, comparisons in scaling_comparisons(dataset).items():
        judged = comparisons[0]
        if not judged.loss:
            continue
        reading = None
        if dataset.topology:
            sorted_runs, shuffled_runs = _scale_runs(dataset, benchmark, judged.sorted.metric)
            if sorted_runs is not None and shuffled_runs is not None:
                reading = slow_uplinks(sorted_runs, shuffled_runs, dataset.topology)
        findings.append(_loss_finding(dataset, benchmark, judged, comparisons, reading))
    return findings


def _loss_finding(dataset: Dataset, benchmark: str, c: ScalingComparison, comparisons: list[ScalingComparison],
                  reading: UplinkReading | None) -> Finding:
    unit, small, large = c.sorted.unit, c.smallest, c.largest
    up = c.sorted.higher_is_better
    estimates = reading.estimates if reading is not None else {}
    slow = reading.slow if reading is not None else []
    members = {g: sorted((n for n, group in dataset.topology.items() if group == g), key=natural_key)
               for g in set(estimates) | set(slow)}
    # What one link carries: the sorted chain of the fewest nodes, neighbours
    # on one switch.  Against it, a named group's nodes over its best crossing
    # run: how oversubscribed its uplink showed itself (for bandwidths).
    link = c.sorted.at(small).median
    ratios = {g: len(members[g]) * link / estimates[g] for g in slow
              if up and g in estimates and estimates[g] > 0 and np.isfinite(link)}
    where = ""
    if slow:
        # A group of one node has no uplink of its own to blame: its node's link carried it.
        carrier = {g: "its one node's link" if len(members[g]) == 1 else "its uplink" for g in slow}
        parts = []
        for g in slow:
            text = f"{g} ({fold(members[g])}: {carrier[g]} carried at best {estimates[g]:.4g} {unit}"
            if g in ratios:
                text += f", about {ratios[g]:.2g}:1 for {len(members[g])} nodes at {link:.4g}"
            parts.append(text + ")")
        others = [v for g, v in estimates.items() if g not in slow]
        against = (f" against {min(others, key=lambda v: _goodness(v, up)):.4g} or better for the other groups"
                   if others else "")
        where = (f"; every slow shuffled run crosses {', '.join(parts)}{against}")
    runs = [r for (_, b, _), o in runs_by_ordering(dataset, SCALE).items() if b == benchmark for r in o.values()]
    nodes = fold(n for g in slow for n in members[g]) if slow else _run_nodes(*runs)
    evidence = {**c.to_json(), "benchmark": benchmark,
                "metrics": {x.sorted.metric: x.to_json() for x in comparisons}}
    if reading is not None:
        evidence["uplinks"] = {g: {"best_crossing_run": v, "nodes": fold(members[g]), "size": len(members[g])}
                               for g, v in estimates.items()}
        evidence["uplink_candidates"] = reading.candidates
        evidence["slow_uplinks"] = slow
        evidence["slow_shuffled_runs"] = len(reading.slow_runs)
        evidence["judged_shuffled_runs"] = reading.judged_runs
        evidence["uplink_fraction"] = UPLINK_FRACTION
        if ratios:
            evidence["link"] = link
            evidence["oversubscription"] = ratios
    s0, s1 = c.sorted.at(small).median, c.sorted.at(large).median
    h0, h1 = c.shuffled.at(small).median, c.shuffled.at(large).median
    return Finding(
        kind="scaling-loss",
        severity=Severity.WARNING,
        subject=f"{set_series(SCALE, benchmark, SHUFFLED)}:{c.sorted.metric}",
        nodes=nodes,
        message=(
            f"shuffled sets go from {h0:.4g} {unit} at {small} nodes to {h1:.4g} at {large}, sorted ones from "
            f"{s0:.4g} to {s1:.4g} ({c.sorted.metric}; shuffled/sorted {c.ratio(small):.2f} at {small} nodes, "
            f"{c.ratio(large):.2f} at {large}, below {LOSS_RATIO}){where}: the links between switches do not "
            "carry the traffic that crosses them"
        ),
        evidence=evidence,
        remedy=(
            ("Check the uplinks of " + ", ".join(slow) + " (cables, trunk members, error counters, negotiated "
             "speed) and widen or repair them; " if slow else
             "Compare each switch's uplink capacity with the nodes behind it and widen or repair the "
             "oversubscribed uplinks; ")
            + "meanwhile spread jobs so that their nodes share a switch. Ask vendors and acceptance tests for "
            "sorted and shuffled benchmarks, since sorted ones alone hide this."
        ),
    )
