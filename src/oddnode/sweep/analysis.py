"""The reading of a stored sweep: per series and message size (or per
metric of a node benchmark), the metric under every setting, the best
setting, and whether it beats the default significantly.

A setting's value at a size is the median of every valid value its runs
gave there (every repetition of every node, pair or set).  The best
setting is the one whose median is best in the series' direction.  Each
setting is tested against the default at each size with the stratified
Mann–Whitney test of ``compare`` (van Elteren's): every node, pair or set
is a stratum whose repetitions are ranked among its own, so that a slow
pair does not hide a setting's effect on all of them, and several pairs of
three repetitions each reach significance where one alone cannot.  The p
values are Holm-corrected over every test of a series (its sizes times
its settings other than the default), after Tarone's rule has set aside
the tests whose sample sizes could never reach alpha; a best setting is
significant when its corrected p is at most alpha, its test says it lies
the better way, and its median differs from the default's by at least
``min_effect``.  So each series of a sweep whose settings all measure the
same thing names a best setting falsely in at most alpha of sweeps.

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

from oddnode.compare import significance as sig
from oddnode.compare.judge import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT
from oddnode.model import Direction, LabelKind
from oddnode.order import natural_sorted
from oddnode.store import Store
from oddnode.sweep.grid import Grid

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
    statistic: float  # > 0: the setting's values above the default's
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


def _strata(by_label_default: dict[str, list[float]], by_label_other: dict[str, list[float]]
            ) -> list[tuple[np.ndarray, np.ndarray]]:
    """(default, other) values of every label measured under both; when no
    label was (shuffled sets), all values pooled as one stratum."""
    common = natural_sorted(set(by_label_default) & set(by_label_other))
    if common:
        return [(np.asarray(by_label_default[label]), np.asarray(by_label_other[label])) for label in common]
    pooled_default = [v for values in by_label_default.values() for v in values]
    pooled_other = [v for values in by_label_other.values() for v in values]
    return [(np.asarray(pooled_default), np.asarray(pooled_other))] if pooled_default and pooled_other else []


def _series_rows(grid: Grid, results: Sequence[SweepResult], direction: Direction, alpha: float,
                 min_effect: float, seed: int) -> list[SizeRow]:
    """The size rows of one series family, every test of it Holm-corrected together."""
    settings, default = grid.size, grid.default
    # metric -> setting -> label -> values
    values: dict[str, dict[int, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in results:
        if r.valid and r.value is not None and math.isfinite(r.value):
            values[r.metric][r.setting][r.label].append(r.value)
    metrics = sorted({r.metric for r in results}, key=lambda m: (split_metric(m)[1] or -1, m))
    rows, pending = [], []
    for metric in metrics:
        per_setting = values.get(metric, {})
        pooled = [[v for vs in per_setting.get(s, {}).values() for v in vs] for s in range(settings)]
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
                strata = _strata(per_setting[default], per_setting[s])
                if strata:
                    pending.append((row, s, strata))
        rows.append(row)
    smallest = [sig.smallest_stratified_p([(len(b), len(a)) for b, a in strata]) for _, _, strata in pending]
    kept = sig.testable(smallest, alpha)
    draws = sig.draws_for(int(np.count_nonzero(kept)), alpha)
    for (row, s, strata), least in zip(pending, smallest):
        result = sig.stratified_test(strata, draws=draws, seed=seed)
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


def analyze_sweep(data: SweepData, alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT,
                  seed: int = 0) -> SweepAnalysis:
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
        rows = _series_rows(data.grid, results, first.direction, alpha, min_effect, seed)
        series.append(SeriesSweep(benchmark, family, first.unit, first.direction, first.label_kind, rows))
    return SweepAnalysis(data, alpha, min_effect, series, dict(failed))
