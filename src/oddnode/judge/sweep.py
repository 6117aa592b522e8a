"""The reading of a stored sweep: per series and message size (or per
metric of a node benchmark), the metric under every setting, the best
setting, and whether it beats the default significantly.

A setting's value at a size is the median of every valid value its runs
gave there (every repetition of every node, pair or set).  The best
setting is the one whose median is best in the series' direction.  Each
setting is tested against the default at each size over *turns* (one run
of one setting in one round), not over values: the nodes, pairs or sets a
turn measured ran at the same time and share its disturbances (a daemon
waking on every node, a busy fabric, a shared host), so they are not
independent repetitions, and a test that counted them as such would call
one unlucky turn an effect.  A turn's score is the mean, over the labels
(node, pair or set) measured under both settings, of its values' ranks
among that label's values (van Elteren's idea: a slow pair cannot hide a
setting's effect on all of them); the scores of the default's turns and
the setting's are compared with Mann–Whitney.  The p values are
Holm-corrected over every test of a series (its sizes times its settings
other than the default), after Tarone's rule has set aside the tests
whose turn counts could never reach alpha; a best setting is significant
when its corrected p is at most alpha, its test says it lies the better
way, and its median differs from the default's by at least
``min_effect``.  So each series of a sweep whose settings all measure the
same thing names a best setting falsely in at most alpha of sweeps, even
when every turn's disturbance falls on all of its nodes at once.

Pure functions of the stored rows; ``read_sweep`` reads them.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from oddnode.stats import significance as sig
from oddnode.judge.compare.verdicts import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT
from oddnode.core.model import Direction, LabelKind
from oddnode.core.order import natural_sorted
from oddnode.store import Store, StoreError
from oddnode.readings.sweep_grid import Grid

_SIZED = re.compile(r"(.+)\.(\d+)\Z")


@dataclass(frozen=True)
class SweepResult:
    """One stored value of a sweep: the setting and round it ran in."""

    setting: int
    round: int
    benchmark: str
    metric: str
    unit: str
    direction: Direction
    label: str
    label_kind: LabelKind
    value: float | None
    valid: bool


@dataclass
class SweepData:
    """A stored sweep: its grid, rounds, seed and results."""

    sweep_id: int
    grid: Grid
    repetitions: int
    seed: int
    results: list[SweepResult]
    started: datetime | None = None
    command: str = ""


def read_sweep(store: Store, sweep_id: int | None = None) -> SweepData:
    """A sweep from the store (default: the newest); StoreError when there is none."""
    sweep_id, _, grid, repetitions, seed, rows = store.load_sweep(sweep_id)
    results = [SweepResult(int(setting), int(round_), benchmark, metric, unit, Direction(direction), label,
                           LabelKind(kind), None if value is None else float(value), bool(valid))
               for setting, round_, _, benchmark, metric, unit, direction, label, kind, value, valid in rows]
    meta = [row for row in store.sweeps() if row[0] == sweep_id]
    started, command = (meta[0][1], meta[0][2]) if meta else (None, "")
    return SweepData(sweep_id, Grid.from_json(grid), repetitions, seed, results, started, command)


def judge_stored_sweeps(store: Store, alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT
                        ) -> tuple[list[SweepAnalysis], list[str]]:
    """Every stored sweep judged as ``oddnode sweep --stored`` judges one
    (those store.as_of leaves), oldest first; and, for a sweep the store
    cannot give back whole, why it was left out."""
    judged, unread = [], []
    for sweep_id, *_ in store.sweeps():
        try:
            judged.append(analyze_sweep(read_sweep(store, sweep_id), alpha, min_effect))
        except (StoreError, ValueError) as err:
            unread.append(f"sweep {sweep_id} left out: {err}")
    return judged, unread


def split_metric(metric: str) -> tuple[str, int | None]:
    """A metric's family and message size: ``latency.1024`` -> (latency,
    1024); a metric without a size is its own family (``triad`` -> (triad, None))."""
    sized = _SIZED.match(metric)
    return (sized.group(1), int(sized.group(2))) if sized else (metric, None)


@dataclass
class SettingTest:
    """One setting against the default at one size."""

    p: float
    method: str
    statistic: float  # > 0: the setting's values above the default's (mean turn score difference)
    smallest_p: float
    p_holm: float | None = None  # None: left out by Tarone's rule (too few repetitions to reach alpha)


@dataclass
class SizeRow:
    """One message size (or metric) of a series: every setting's median and
    count, the best setting, its change from the default and significance."""

    metric: str
    size: int | None
    medians: list[float | None]
    counts: list[int]
    best: int | None = None
    change: float | None = None  # (best - default) / |default|
    tests: dict[int, SettingTest] = field(default_factory=dict)
    significant: bool = False
    reason: str = ""

    @property
    def best_test(self) -> SettingTest | None:
        return None if self.best is None else self.tests.get(self.best)

    def to_json(self, labels: Sequence[str]) -> dict[str, Any]:
        test = self.best_test
        return {
            "metric": self.metric, "size": self.size,
            "settings": [{"setting": labels[i], "median": m, "n": n}
                         for i, (m, n) in enumerate(zip(self.medians, self.counts))],
            "best": None if self.best is None else labels[self.best],
            "change": self.change,
            "p": None if test is None else test.p,
            "p_holm": None if test is None else test.p_holm,
            "method": None if test is None else test.method,
            "significant": self.significant, "reason": self.reason or None,
            "tests": {labels[i]: {"p": t.p, "p_holm": t.p_holm, "statistic": t.statistic, "method": t.method}
                      for i, t in sorted(self.tests.items())},
        }


@dataclass
class SeriesSweep:
    """A series' family of metrics (``pingpong.sort`` ``latency``) over the sweep."""

    benchmark: str
    family: str
    unit: str
    direction: Direction
    label_kind: LabelKind
    rows: list[SizeRow]

    @property
    def name(self) -> str:
        return f"{self.benchmark} {self.family}"

    def to_json(self, labels: Sequence[str]) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "family": self.family, "unit": self.unit,
                "direction": self.direction.value, "label_kind": self.label_kind.value,
                "rows": [row.to_json(labels) for row in self.rows]}


@dataclass
class SweepAnalysis:
    """A sweep judged: per series and size the best setting and its significance."""

    data: SweepData
    alpha: float
    min_effect: float
    series: list[SeriesSweep]
    failed: dict[int, int]  # setting -> invalid or empty results

    @property
    def labels(self) -> list[str]:
        return self.data.grid.labels()

    @property
    def default(self) -> int:
        return self.data.grid.default

    def rounds(self) -> dict[int, int]:
        """Setting -> the rounds that stored results for it."""
        found: dict[int, set[int]] = defaultdict(set)
        for r in self.data.results:
            found[r.setting].add(r.round)
        return {s: len(found.get(s, ())) for s in range(self.data.grid.size)}

    def significant_rows(self) -> list[tuple[SeriesSweep, SizeRow]]:
        return [(s, row) for s in self.series for row in s.rows if row.significant]

    def to_json(self) -> dict[str, Any]:
        grid = self.data.grid
        labels = self.labels
        return {
            "sweep_id": self.data.sweep_id, "step": grid.step, "repetitions": self.data.repetitions,
            "seed": self.data.seed, "alpha": self.alpha, "min_effect": self.min_effect,
            "started": None if self.data.started is None else self.data.started.isoformat(),
            "parameters": [p.to_json() for p in grid.parameters],
            "settings": [{"setting": labels[s.index], "index": s.index, "default": s.index == grid.default,
                          **grid.describe(s), "failed": self.failed.get(s.index, 0)} for s in grid.settings],
            "series": [s.to_json(labels) for s in self.series],
        }


def _better(direction: Direction, a: float, b: float) -> bool:
    return a > b if direction is Direction.HIGHER else a < b


# round -> label -> the values one turn (a setting in that round) gave a label
Turns = dict[int, dict[str, list[float]]]


def turn_scores(default: Turns, other: Turns) -> tuple[np.ndarray, np.ndarray]:
    """Every turn's score, the default's and the other setting's: the mean,
    over the labels measured under both, of its values' centred ranks among
    that label's values of both settings (rank - (N+1)/2) / N, between -1/2
    and 1/2; when no label was measured under both (shuffled sets draw new
    ones every turn), all values rank together as one label.  A turn that
    measured none of the labels has no score."""
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    labels = [{label for by_label in side.values() for label in by_label} for side in (default, other)]
    common: list[str | None] = list(natural_sorted(labels[0] & labels[1])) or [None]
    turns = [(side, round_) for side, by_round in enumerate((default, other)) for round_ in sorted(by_round)]
    score_sums, strata_seen = np.zeros(len(turns)), np.zeros(len(turns))
    for label in common:
        owners: list[int] = []
        values: list[float] = []
        for i, (side, round_) in enumerate(turns):
            by_label = (default, other)[side][round_]
            found = by_label.get(label, []) if label is not None else [v for vs in by_label.values() for v in vs]
            owners += [i] * len(found)
            values += found
        if len(values) < 2:
            continue
        centred = (stats.rankdata(values) - (len(values) + 1) / 2.0) / len(values)
        rank_sums = np.bincount(owners, weights=centred, minlength=len(turns))
        counts = np.bincount(owners, minlength=len(turns))
        measured = counts > 0
        score_sums[measured] += rank_sums[measured] / counts[measured]
        strata_seen[measured] += 1
    scored = strata_seen > 0
    scores = np.divide(score_sums, strata_seen, out=np.zeros(len(turns)), where=scored)
    sides = np.array([side for side, _ in turns], dtype=int)
    return scores[scored & (sides == 0)], scores[scored & (sides == 1)]


def turn_test(default_scores: np.ndarray, other_scores: np.ndarray) -> sig.TestResult:
    """Mann–Whitney of the other setting's turn scores against the
    default's; the statistic is the difference of their means (> 0: the
    setting's values rank above the default's)."""
    result = sig.mann_whitney(default_scores, other_scores)
    shift = float(np.mean(other_scores) - np.mean(default_scores)) if len(default_scores) and len(other_scores) else 0.0
    return sig.TestResult(result.p, f"{result.method} over turns", shift)


def _series_rows(grid: Grid, results: Sequence[SweepResult], direction: Direction, alpha: float,
                 min_effect: float) -> list[SizeRow]:
    """The size rows of one series family, every test of it Holm-corrected together."""
    settings, default = grid.size, grid.default
    # metric -> setting -> round -> label -> values
    values: dict[str, dict[int, Turns]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list))))
    for r in results:
        if r.valid and r.value is not None and math.isfinite(r.value):
            values[r.metric][r.setting][r.round][r.label].append(r.value)
    metrics = sorted({r.metric for r in results}, key=lambda m: (split_metric(m)[1] or -1, m))
    rows, pending = [], []
    for metric in metrics:
        per_setting = values.get(metric, {})
        pooled = [[v for by_label in per_setting.get(s, {}).values() for vs in by_label.values() for v in vs]
                  for s in range(settings)]
        medians = [float(np.median(p)) if p else None for p in pooled]
        row = SizeRow(metric, split_metric(metric)[1], medians, [len(p) for p in pooled])
        measured = [s for s in range(settings) if medians[s] is not None]
        if measured:
            best = measured[0]
            for s in measured[1:]:
                if _better(direction, medians[s], medians[best]) or (medians[s] == medians[best] and s == default):
                    best = s
            row.best = best
            base = medians[default]
            if base is not None and base != 0:
                row.change = (medians[best] - base) / abs(base)
            elif base is not None and medians[best] == base:
                row.change = 0.0
        if medians[default] is not None:
            for s in measured:
                if s == default:
                    continue
                scores = turn_scores(per_setting[default], per_setting[s])
                if len(scores[0]) and len(scores[1]):
                    pending.append((row, s, scores))
        rows.append(row)
    smallest = [sig.smallest_p(len(default_scores), len(other_scores))
                for _, _, (default_scores, other_scores) in pending]
    kept = sig.testable(smallest, alpha)
    for (row, s, scores), least in zip(pending, smallest):
        result = turn_test(*scores)
        row.tests[s] = SettingTest(result.p, result.method, result.statistic, least)
    if np.any(kept):
        adjusted = sig.holm([pending[i][0].tests[pending[i][1]].p for i in np.flatnonzero(kept)])
        for i, p_holm in zip(np.flatnonzero(kept), adjusted):
            row, s, _ = pending[i]
            row.tests[s].p_holm = float(p_holm)
    for row in rows:
        _judge(row, default, direction, alpha, min_effect)
    return rows


def _judge(row: SizeRow, default: int, direction: Direction, alpha: float, min_effect: float) -> None:
    """Whether a row's best setting beats the default significantly, and why not."""
    if row.best is None:
        row.reason = "no valid results"
        return
    if row.best == default:
        row.reason = "the default is best"
        return
    test = row.best_test
    if test is None:
        row.reason = "the default has no valid results here" if row.medians[default] is None else "not tested"
        return
    if test.p_holm is None:
        row.reason = "too few repetitions to reach alpha"
        return
    lies_better = test.statistic > 0 if direction is Direction.HIGHER else test.statistic < 0
    if test.p_holm > alpha:
        row.reason = "not significant"
    elif not lies_better:
        row.reason = "its ranks do not favour it"
    elif row.change is not None and abs(row.change) < min_effect:
        row.reason = f"a change below {min_effect:.0%}"
    else:
        row.significant = True


def analyze_sweep(data: SweepData, alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT
                  ) -> SweepAnalysis:
    """Judge a stored sweep: every series family's sizes, best settings and
    their significance against the default (see the module's docstring)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be a probability between 0 and 1, got {alpha!r}")
    if not min_effect >= 0:
        raise ValueError(f"min_effect must be a fraction >= 0, got {min_effect!r}")
    families: dict[tuple[str, str], list[SweepResult]] = defaultdict(list)
    failed: dict[int, int] = defaultdict(int)
    for r in data.results:
        families[(r.benchmark, split_metric(r.metric)[0])].append(r)
        if not r.valid or r.value is None:
            failed[r.setting] += 1
    series = []
    for (benchmark, family), results in sorted(families.items()):
        first = results[0]
        rows = _series_rows(data.grid, results, first.direction, alpha, min_effect)
        series.append(SeriesSweep(benchmark, family, first.unit, first.direction, first.label_kind, rows))
    return SweepAnalysis(data, alpha, min_effect, series, dict(failed))
