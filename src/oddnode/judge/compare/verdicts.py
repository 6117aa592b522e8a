"""Judging two sides of a comparison: per series and subject (a node, a
pair, a set; in a group comparison, a group), the change of the median,
its significance, Holm-corrected over every test of the comparison, and a
verdict.  Pure functions of the samples; the store is read elsewhere.

The change is (after - before) / |before| of the medians: positive when the
values grew, which is an improvement for a higher-is-better series and a
regression for a lower-is-better one.  A verdict other than ``unchanged``
needs both a Holm-corrected p ≤ alpha and a change larger than
``min_effect``: a 0.3% change is no regression even where the statistics
can tell it apart.
"""

from __future__ import annotations

import enum
import math
import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oddnode.stats import significance as sig
from oddnode.store.samples import SeriesSamples
from oddnode.core.model import DEFAULT_METRIC, Direction, LabelKind
from oddnode.core.nodes import is_node_name
from oddnode.core.order import natural_sorted

# Family-wise false-alarm probability of a whole comparison: Holm's
# correction spreads it over every test, so it holds for the exit status.
DEFAULT_ALPHA = 0.05
# As the finding rules' (findings.Sensitivity): smaller changes are no
# regression even when significant.
DEFAULT_MIN_EFFECT = 0.01
DEFAULT_SEED = 0

_KIND_WORD = {LabelKind.NODE: "node", LabelKind.PAIR: "pair", LabelKind.SET: "set"}


class Verdict(str, enum.Enum):
    """What a change amounts to."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    TOO_FEW = "too-few"  # too few repetitions (or nodes) for a test to reach alpha

    @property
    def rank(self) -> int:
        """Regressions first, then improvements."""
        return _RANK[self]


_RANK = {Verdict.REGRESSED: 0, Verdict.IMPROVED: 1, Verdict.UNCHANGED: 2, Verdict.TOO_FEW: 3}


class Consistency(str, enum.Enum):
    """How the spread of the repetitions changed."""

    MORE = "more consistent"
    LESS = "less consistent"
    ALIKE = "alike"
    UNKNOWN = "not tested"


@dataclass(frozen=True)
class Settings:
    """How readily a comparison calls a change."""

    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    seed: int = DEFAULT_SEED  # of the Monte Carlo permutations: the same inputs give the same p

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be a probability between 0 and 1, got {self.alpha!r}")
        if not self.min_effect >= 0:
            raise ValueError(f"min_effect must be a fraction ≥ 0, got {self.min_effect!r}")


@dataclass
class Judgement:
    """One test: a subject of a series (or the series as a whole, or a
    group) before against after."""

    subject: str
    before: float  # median (of the subjects' medians, for a series as a whole)
    after: float
    change: float | None  # (after - before) / |before|; None where undefined (before 0, after not)
    higher_is_better: bool
    n_before: int  # repetitions (subjects, for a series as a whole; units, for a group)
    n_after: int
    p: float | None = None
    method: str = ""
    smallest_p: float = 1.0  # the least p the test can give at these sizes
    # What the test needs, run only when the test can reach alpha: the
    # (before, after) values for Mann–Whitney, or a callable giving the result.
    pending: Any = field(default=None, repr=False)
    direction: int = 0  # sign of the test's statistic: after above (+1) or below (-1) before
    p_holm: float | None = None
    verdict: Verdict = Verdict.UNCHANGED
    reason: str = ""
    spread_before: float = math.nan  # IQR / median
    spread_after: float = math.nan
    failed_before: int = 0
    failed_after: int = 0
    # Every value after beyond every value before (or the reverse): as far
    # apart as the repetitions allow, even where they are too few to judge.
    separated: bool = False

    @property
    def testable(self) -> bool:
        """Whether a test stands behind this judgement (not a failure on one side)."""
        return self.pending is not None or self.p is not None

    @property
    def better(self) -> bool | None:
        """Whether the change is an improvement; None for no change."""
        if self.change is None:
            grew = self.after > self.before
        elif self.change == 0:
            return None
        else:
            grew = self.change > 0
        return grew == self.higher_is_better

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject, "before": _num(self.before), "after": _num(self.after),
            "change": _num(self.change), "n_before": self.n_before, "n_after": self.n_after,
            "p": _num(self.p), "p_holm": _num(self.p_holm), "test": self.method or None,
            "verdict": self.verdict.value, "reason": self.reason or None,
            "spread_before": _num(self.spread_before), "spread_after": _num(self.spread_after),
            "failed_before": self.failed_before, "failed_after": self.failed_after, "separated": self.separated,
        }


@dataclass
class SpreadJudgement:
    """The spread of the repetitions, before against after: the median
    over subjects of IQR / median, and Fligner–Killeen's p."""

    before: float
    after: float
    p: float | None = None
    method: str = ""
    p_holm: float | None = None
    verdict: Consistency = Consistency.UNKNOWN

    def to_json(self) -> dict[str, Any]:
        return {"before": _num(self.before), "after": _num(self.after), "p": _num(self.p),
                "p_holm": _num(self.p_holm), "test": self.method or None, "verdict": self.verdict.value}


@dataclass
class SeriesComparison:
    """One series compared: as a whole, and subject by subject."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    label_kind: LabelKind
    against: str  # the other side's name: the after run, or a group
    overall: Judgement
    subjects: list[Judgement] = field(default_factory=list)  # empty: the overall is its one subject
    spread: SpreadJudgement | None = None
    pooled: bool = False  # labels drawn anew every repetition: compared as one population
    only_before: list[str] = field(default_factory=list)
    only_after: list[str] = field(default_factory=list)
    baseline_run: int | None = None
    other_run: int | None = None
    # Every valid value compared on each side (all subjects', or each
    # unit's median in a group comparison), for plots; not in the JSON.
    before_values: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    after_values: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    @property
    def name(self) -> str:
        return self.benchmark if self.metric == DEFAULT_METRIC else f"{self.benchmark}:{self.metric}"

    @property
    def subject_kind(self) -> LabelKind:
        """What the subjects are, in words: a set series whose every label
        is one node (a rank's results under its node) has nodes."""
        if self.label_kind is LabelKind.SET and self.subjects and all(
                _one_node(j.subject) for j in self.subjects):
            return LabelKind.NODE
        return self.label_kind

    @property
    def judgements(self) -> list[Judgement]:
        return [self.overall, *self.subjects]

    @property
    def worst(self) -> Verdict:
        return min((j.verdict for j in self.judgements), key=lambda v: v.rank)

    def count(self, verdict: Verdict) -> int:
        return sum(1 for j in self.subjects if j.verdict is verdict)

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark, "metric": self.metric, "name": self.name, "unit": self.unit,
            "direction": self.direction.value, "label_kind": self.label_kind.value, "against": self.against,
            "baseline_run": self.baseline_run, "other_run": self.other_run, "pooled": self.pooled,
            "overall": self.overall.to_json(),
            "spread": self.spread.to_json() if self.spread else None,
            "subjects": [j.to_json() for j in self.subjects],
            "only_before": self.only_before, "only_after": self.only_after,
        }


def _num(value: float | None) -> float | None:
    """A JSON number, or null for missing, NaN and infinite values."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# -- building the tests ---------------------------------------------------------------------------


def relative_change(before: float, after: float) -> float | None:
    """(after - before) / |before|; 0 when both are 0, None when only before is."""
    if before == 0:
        return 0.0 if after == 0 else None
    return (after - before) / abs(before)


def _subject(label: str, before: np.ndarray, after: np.ndarray, higher: bool) -> Judgement:
    """One subject's judgement, its Mann–Whitney test pending."""
    b, a = float(np.median(before)), float(np.median(after))
    return Judgement(label, b, a, relative_change(b, a), higher, len(before), len(after),
                     smallest_p=sig.smallest_p(len(before), len(after)), pending=(before, after),
                     spread_before=sig.relative_iqr(before), spread_after=sig.relative_iqr(after),
                     separated=bool(after.min() > before.max() or after.max() < before.min()))


def _subjects(items: Sequence[tuple[str, np.ndarray, np.ndarray]], higher: bool) -> tuple[list[Judgement],
                                                                                         list[np.ndarray],
                                                                                         list[np.ndarray]]:
    """Many subjects' judgements, their medians and spreads computed for all
    subjects of the same numbers of repetitions at once; and every subject's
    relative deviations on each side (for the spread test)."""
    by_size: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, (_, b, a) in enumerate(items):
        by_size[(len(b), len(a))].append(index)
    judgements: list[Judgement | None] = [None] * len(items)
    deviations_b: list[np.ndarray] = []
    deviations_a: list[np.ndarray] = []
    for (n, m), indices in by_size.items():
        before = np.vstack([items[i][1] for i in indices])
        after = np.vstack([items[i][2] for i in indices])
        median_b, median_a = np.median(before, axis=1), np.median(after, axis=1)
        spread_b, spread_a = sig.relative_iqrs(before), sig.relative_iqrs(after)
        smallest = sig.smallest_p(n, m)
        separated = (after.min(axis=1) > before.max(axis=1)) | (after.max(axis=1) < before.min(axis=1))
        for row, i in enumerate(indices):
            label, b, a = items[i]
            mb, ma = float(median_b[row]), float(median_a[row])
            judgements[i] = Judgement(label, mb, ma, relative_change(mb, ma), higher, n, m, smallest_p=smallest,
                                      pending=(b, a), spread_before=float(spread_b[row]),
                                      spread_after=float(spread_a[row]), separated=bool(separated[row]))
        if n >= 2:
            deviations_b.append(sig.relative_deviation_rows(before).ravel())
        if m >= 2:
            deviations_a.append(sig.relative_deviation_rows(after).ravel())
    return [j for j in judgements if j is not None], deviations_b, deviations_a


def _failed_only(label: str, before: SeriesSamples, after: SeriesSamples) -> Judgement | None:
    """A subject whose every run failed on one side and not on the other:
    regressed (failed after) or improved (failed before), with no test."""
    b, a = before.values.get(label), after.values.get(label)
    if b is not None and a is None and after.failed.get(label):
        median = float(np.median(b))
        return Judgement(label, median, math.nan, None, before.higher_is_better, len(b), 0,
                         verdict=Verdict.REGRESSED, reason="every run failed after",
                         failed_before=before.failed.get(label, 0), failed_after=after.failed[label])
    if a is not None and b is None and before.failed.get(label):
        median = float(np.median(a))
        return Judgement(label, math.nan, median, None, before.higher_is_better, 0, len(a),
                         verdict=Verdict.IMPROVED, reason="every run failed before",
                         failed_before=before.failed[label], failed_after=after.failed.get(label, 0))
    return None


def _one_node(label: str) -> bool:
    """A label that names one node, not a node set or a pair."""
    return is_node_name(label) and not any(c in label for c in "[],")


def _label_word_kind(kind: LabelKind, labels) -> LabelKind:
    if kind is LabelKind.SET and labels and all(_one_node(label) for label in labels):
        return LabelKind.NODE
    return kind


def _pooled_name(kind: LabelKind, count: int) -> str:
    return f"all {count} {_KIND_WORD[kind]}{'s' if count != 1 else ''}"


def _series_seed(settings: Settings, *names: str) -> int:
    """A seed of its own for each series' permutations, the same every time."""
    return settings.seed + zlib.crc32("\0".join(names).encode())


def compare_series(before: SeriesSamples, after: SeriesSamples, against: str, settings: Settings,
                   draws: int = sig.MIN_DRAWS) -> SeriesComparison:
    """One series measured on both sides, before against after.  The tests
    are left pending: ``decide`` runs those that can reach alpha, corrects
    them together and gives the verdicts."""
    higher = before.higher_is_better
    labels_b = set(before.values) | set(before.failed)
    labels_a = set(after.values) | set(after.failed)
    pooled = before.reshuffled or after.reshuffled
    comparison = SeriesComparison(
        before.benchmark, before.metric, before.unit or after.unit, before.direction, before.label_kind, against,
        overall=Judgement("", math.nan, math.nan, None, higher, 0, 0), pooled=pooled,
        baseline_run=before.run_id, other_run=after.run_id)
    if pooled:
        b = np.concatenate(list(before.values.values())) if before.values else np.empty(0)
        a = np.concatenate(list(after.values.values())) if after.values else np.empty(0)
        labels = labels_b | labels_a
        name = _pooled_name(_label_word_kind(before.label_kind, labels), len(labels))
        if len(b) and len(a):
            comparison.overall = _subject(name, b, a, higher)
        else:
            comparison.overall = Judgement(name, math.nan, math.nan, None, higher, len(b), len(a),
                                           reason="no valid result on one side")
        comparison.overall.failed_before = sum(before.failed.values())
        comparison.overall.failed_after = sum(after.failed.values())
        comparison.spread = _spread([sig.relative_iqr(b)], [sig.relative_iqr(a)],
                                    [sig.relative_deviations(b)] if len(b) >= 2 else [],
                                    [sig.relative_deviations(a)] if len(a) >= 2 else [])
        comparison.before_values, comparison.after_values = b, a
        return comparison

    comparison.only_before = natural_sorted(labels_b - labels_a)
    comparison.only_after = natural_sorted(labels_a - labels_b)
    failed: list[Judgement] = []
    items: list[tuple[str, np.ndarray, np.ndarray]] = []
    for label in labels_b & labels_a:
        b, a = before.values.get(label), after.values.get(label)
        if b is None or a is None:
            judgement = _failed_only(label, before, after)
            if judgement is not None:
                failed.append(judgement)
            continue
        items.append((label, b, a))
    measured, deviations_b, deviations_a = _subjects(items, higher)
    for judgement in measured:
        judgement.failed_before = before.failed.get(judgement.subject, 0)
        judgement.failed_after = after.failed.get(judgement.subject, 0)
    by_label = {j.subject: j for j in measured + failed}
    subjects = [by_label[label] for label in natural_sorted(by_label)]
    pairs = [(b, a) for _, b, a in items]
    if pairs:
        comparison.before_values = np.concatenate([b for b, _ in pairs])
        comparison.after_values = np.concatenate([a for _, a in pairs])
    comparison.spread = _spread([j.spread_before for j in measured], [j.spread_after for j in measured],
                                deviations_b, deviations_a)
    if len(pairs) == 1 and len(subjects) == 1:
        comparison.overall = subjects[0]
        return comparison
    comparison.subjects = subjects
    comparison.overall = _as_a_whole(measured, pairs, higher, before, settings, draws)
    return comparison


def _as_a_whole(measured: list[Judgement], pairs: list[tuple[np.ndarray, np.ndarray]], higher: bool,
                before: SeriesSamples, settings: Settings, draws: int) -> Judgement:
    """The series as a whole: the subjects' medians' median on each side,
    the median of their changes, and the stratified test over all of them
    (pending)."""
    name = _pooled_name(_label_word_kind(before.label_kind, [j.subject for j in measured]), len(measured))
    if not pairs:
        return Judgement(name, math.nan, math.nan, None, higher, 0, 0,
                         reason="no subject with valid results on both sides")
    changes = [j.change for j in measured if j.change is not None]
    seed = _series_seed(settings, before.benchmark, before.metric)
    return Judgement(
        name, float(np.median([j.before for j in measured])), float(np.median([j.after for j in measured])),
        float(np.median(changes)) if changes else None, higher, len(pairs), len(pairs),
        smallest_p=sig.smallest_stratified_p([(len(b), len(a)) for b, a in pairs]),
        pending=lambda: sig.stratified_test(pairs, draws=draws, seed=seed),
        spread_before=_median_finite([j.spread_before for j in measured]),
        spread_after=_median_finite([j.spread_after for j in measured]),
        failed_before=sum(j.failed_before for j in measured), failed_after=sum(j.failed_after for j in measured))


def _median_finite(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def _spread(iqr_before: Sequence[float], iqr_after: Sequence[float], deviations_before: Sequence[np.ndarray],
            deviations_after: Sequence[np.ndarray]) -> SpreadJudgement:
    """The subjects' median IQR/median on each side, and Fligner–Killeen on
    their pooled relative deviations."""
    spread = SpreadJudgement(_median_finite(iqr_before), _median_finite(iqr_after))
    result = sig.spread_test(np.concatenate(deviations_before) if deviations_before else np.empty(0),
                             np.concatenate(deviations_after) if deviations_after else np.empty(0))
    if result is not None:
        spread.p, spread.method = result.p, result.method
    return spread


def compare_units(before: np.ndarray, after: np.ndarray, subject: str, higher: bool) -> tuple[Judgement,
                                                                                               SpreadJudgement]:
    """Two groups of units (nodes, pairs, sets), one value each (its
    median): Mann–Whitney between the groups (pending) and the spread of each."""
    judgement = _subject(subject, before, after, higher)
    spread = _spread([judgement.spread_before], [judgement.spread_after],
                     [sig.relative_deviations(before)] if len(before) >= 2 else [],
                     [sig.relative_deviations(after)] if len(after) >= 2 else [])
    return judgement, spread


# -- correcting and judging --------------------------------------------------------------------------


@dataclass(frozen=True)
class Correction:
    """How many tests were corrected together, and how many could not reach
    alpha at their sizes and were left out of the family (never run)."""

    tests: int
    untestable: int


def _run_tests(family: Sequence[Judgement]) -> None:
    """Run the pending tests: Mann–Whitney for all subjects of the same
    sizes at once, the stratified tests one by one."""
    by_size: dict[tuple[int, int], list[Judgement]] = defaultdict(list)
    for judgement in family:
        if callable(judgement.pending):
            result = judgement.pending()
            judgement.p, judgement.method = result.p, result.method
            judgement.direction = int(np.sign(result.statistic))
        else:
            b, a = judgement.pending
            by_size[(len(b), len(a))].append(judgement)
    for judgements in by_size.values():
        results = sig.mann_whitney_rows(np.vstack([j.pending[0] for j in judgements]),
                                        np.vstack([j.pending[1] for j in judgements]))
        for judgement, result in zip(judgements, results):
            judgement.p, judgement.method = result.p, result.method


def decide(series: Sequence[SeriesComparison], settings: Settings) -> Correction:
    """Choose the tests that can reach alpha (``significance.testable``, from
    their sizes alone), run them, correct them together by Holm's method,
    and give every judgement its verdict; the spread tests are corrected
    among themselves.  Mutates the judgements; returns the family's size."""
    candidates = [j for s in series for j in s.judgements if j.testable]
    kept = sig.testable([j.smallest_p for j in candidates], settings.alpha)
    family = [j for j, keep in zip(candidates, kept) if keep]
    _run_tests(family)
    for judgement, adjusted in zip(family, sig.holm([j.p for j in family])):
        judgement.p_holm = float(adjusted)
    for s in series:
        for judgement in s.judgements:
            if judgement.testable:
                _verdict(judgement, settings, len(candidates), whole=judgement is s.overall and bool(s.subjects))
            judgement.pending = None
    spreads = [s.spread for s in series if s.spread is not None and s.spread.p is not None]
    for spread, adjusted in zip(spreads, sig.holm([s.p for s in spreads])):
        spread.p_holm = float(adjusted)
        if adjusted > settings.alpha or not (math.isfinite(spread.before) and math.isfinite(spread.after)):
            spread.verdict = Consistency.ALIKE
        else:
            spread.verdict = Consistency.MORE if spread.after < spread.before else Consistency.LESS
    return Correction(len(family), len(candidates) - len(family))


def _verdict(j: Judgement, settings: Settings, tests: int, whole: bool) -> None:
    if j.p_holm is None:
        j.verdict = Verdict.TOO_FEW
        unit = "subjects" if whole else "values"
        j.reason = (f"too few {unit} ({j.n_before} before, {j.n_after} after): the smallest p possible, "
                    f"{j.smallest_p:.2g}, cannot reach alpha {settings.alpha:g} shared among {tests} tests")
        needed = None if whole else sig.values_to_reach(settings.alpha / max(tests, 1))
        if needed is not None:
            j.reason += f"; {needed} a side could (runs of -r {needed} or more)"
        return
    big = j.change is None or abs(j.change) > settings.min_effect
    if j.p_holm > settings.alpha or not big or j.better is None:
        j.verdict = Verdict.UNCHANGED
        if j.p_holm <= settings.alpha and not big:
            j.reason = f"significant, but the change is within min-effect {settings.min_effect:.1%}"
        return
    if whole and j.direction and j.change is not None and np.sign(j.change) != j.direction:
        # The ranks moved one way and the median change the other: the
        # subjects disagree; their own verdicts say which moved how.
        j.verdict = Verdict.UNCHANGED
        j.reason = "the subjects moved both ways"
        return
    j.verdict = Verdict.IMPROVED if j.better else Verdict.REGRESSED
