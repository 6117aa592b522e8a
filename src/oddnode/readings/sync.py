"""Pure readings of sync runs: per node, how often the others waited for it
and how long; per node count, the time per iteration and the efficiency,
with the least-squares line time = a + b·ranks and its extrapolation to a
larger concurrency, as NERSC's seaborg notes extrapolated a linear model of
frequent short interruptions to 1,250 tasks.

Functions of a Dataset only; the findings, the report and the command line
read them.  Nothing here imports a runner.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from oddnode.core.model import Dataset, SetRuns
from oddnode.core.order import natural_key
from oddnode.readings.sets import runs_by_ordering, set_members
from oddnode.readings.sets_series import ORDERINGS, SCALE
from oddnode.stats.tails import binomial_sf
from oddnode.readings.sync_series import (
    COMPUTE,
    EFFICIENCY,
    EXTRA_WAIT,
    ITERATIONS,
    LAST,
    RANK_METRICS,
    RANKS,
    TIME,
    WAIT,
    split_rank_series,
    sync_benchmark,
)


# --- per node -----------------------------------------------------------------------


@dataclass(frozen=True)
class RankRun:
    """One rank of one set run: its node, the run's iterations, ranks and
    time per iteration, how often it arrived last and what it cost the others."""

    node: str
    repetition: int  # the set run's number within the sync run
    iterations: int
    ranks: int
    last: int
    time_us: float  # the set run's time per iteration
    extra_wait_us: float  # per iteration of the run
    compute_us: float  # its median compute per iteration
    wait_us: float  # its median wait per iteration
    efficiency_pct: float


@dataclass(frozen=True)
class NodeSync:
    """One node over every set run it was in."""

    node: str
    set_runs: int
    iterations: int
    last: int
    expected: float  # iterations it would be last by chance: the sum of iterations / ranks
    extra_wait_us: float  # per iteration it took part in, what it made the others wait
    excess_wait_us: float  # that beyond its set-mates' median, run by run (excess_wait)
    steady_excess_us: float  # what it caused in at least half of its set runs (steady_excess)
    time_us: float  # its set runs' time per iteration, over its iterations
    compute_us: float  # the median of its runs' median compute per iteration: the quantum it ran
    efficiency_pct: float  # its compute over compute and wait, over its iterations
    dispersion: float  # how much more the last counts vary than binomial ones (last_dispersion)
    p: float  # one-sided tail of being last this often by chance (last_tail)

    @property
    def share_pct(self) -> float:
        return 100.0 * self.last / self.iterations if self.iterations else math.nan

    @property
    def chance_pct(self) -> float:
        return 100.0 * self.expected / self.iterations if self.iterations else math.nan

    @property
    def ratio(self) -> float:
        """How many times as often as chance it was last."""
        return self.last / self.expected if self.expected > 0 else math.nan

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "set_runs": self.set_runs, "iterations": self.iterations, "last": self.last,
                "expected_last": self.expected, "last_pct": self.share_pct, "chance_pct": self.chance_pct,
                "ratio": self.ratio, "extra_wait_us": self.extra_wait_us, "excess_wait_us": self.excess_wait_us,
                "steady_excess_us": self.steady_excess_us,
                "time_us": self.time_us, "compute_us": self.compute_us, "efficiency_pct": self.efficiency_pct,
                "dispersion": self.dispersion, "p": self.p}


def last_tail(last: int, iterations: int, expected: float, dispersion: float = 1.0) -> float:
    """P(X >= last) for X binomial over ``iterations`` with the mean chance
    expected / iterations, its counts divided by ``dispersion``.

    A node's iterations come from sets of different sizes K, each with its
    own chance 1/K of being last, so its count is a sum of binomials (a
    Poisson binomial).  A binomial with the same mean is more dispersed
    (Hoeffding 1956), so its upper tail bounds the true one beyond the
    mean: the test is exact for sets of one size and conservative
    otherwise.  Iterations are not independent where something stalls a
    rank for several of them (a CPU quota's period, a burst of work): with
    last counts ``dispersion`` times as variable as binomial ones, the
    iterations count as 1/dispersion of independent ones each (the
    quasi-binomial's effective sample size)."""
    if iterations <= 0 or last <= expected:
        return 1.0
    scale = max(1.0, dispersion)
    effective = max(1, round(iterations / scale))
    return float(binomial_sf(round(last / scale) - 1, effective, min(1.0, expected / iterations)))


# The median of z² for z standard normal (the chi-squared distribution with
# one degree of freedom): a dispersion of 1 gives median z² of this.
CHI2_1_MEDIAN = 0.454936


def _standardised(lasts: np.ndarray, iterations: int) -> np.ndarray:
    """z² of each rank's last count around an even share of the iterations
    among the ranks given (binomial variance)."""
    share = 1.0 / len(lasts)
    variance = iterations * share * (1.0 - share)
    return (lasts - iterations * share) ** 2 / variance if variance > 0 else np.empty(0)


def last_dispersion(runs: Sequence[Sequence[RankRun]], node: str | None = None) -> float:
    """How much more the ranks' last counts vary around chance than
    binomial counts would (at least 1): the median of their z² over
    CHI2_1_MEDIAN (robust, as a few laggards barely move a median).

    ``node`` is left out: in the runs it was in, the others share the
    iterations it was not last in, evenly by chance, so that a laggard
    neither inflates the dispersion it is judged against (the others' counts
    fall as its count rises) nor enters it.  ``runs``: every set run's ranks."""
    squares = []
    for ranks in runs:
        others = [r for r in ranks if r.node != node]
        if len(others) < 2:
            continue
        remaining = others[0].iterations - sum(r.last for r in ranks if r.node == node)
        squares.append(_standardised(np.array([r.last for r in others], dtype=float), remaining))
    values = np.concatenate(squares) if squares else np.empty(0)
    return max(1.0, float(np.median(values)) / CHI2_1_MEDIAN) if len(values) else 1.0


def run_excesses(runs: Sequence[Sequence[RankRun]], node: str) -> list[tuple[float, int]]:
    """(excess, iterations) of every set run ``node`` was in: its extra wait
    per iteration less the median rank's of the same set run (like is
    compared with like, since a set's size and members set every rank's
    waits)."""
    found = []
    for ranks in runs:
        own = [r for r in ranks if r.node == node]
        if own:
            typical = float(np.median([r.extra_wait_us for r in ranks]))
            found.append((own[0].extra_wait_us - typical, own[0].iterations))
    return found


def excess_wait(runs: Sequence[Sequence[RankRun]], node: str) -> float:
    """What ``node`` made the others wait per iteration beyond what its
    set-mates did, run by run, over its iterations."""
    excesses = run_excesses(runs, node)
    weight = sum(iterations for _, iterations in excesses)
    return sum(excess * iterations for excess, iterations in excesses) / weight if weight else math.nan


def steady_excess(runs: Sequence[Sequence[RankRun]], node: str) -> float:
    """The excess wait ``node`` caused in at least half of its set runs (the
    lower median of its runs' excesses).  A node the others wait for at
    every synchronisation does so in every run; one run in which a node was
    held back (a stall of its host, a CPU quota's period that fell late for
    that run) weighs on its mean but not here."""
    excesses = sorted(excess for excess, _ in run_excesses(runs, node))
    return excesses[(len(excesses) - 1) // 2] if excesses else math.nan


def node_sync(node: str, runs: Sequence[Sequence[RankRun]]) -> NodeSync:
    """A node's account over every set run (``runs``: each run's ranks) it was in."""
    own = [r for ranks in runs for r in ranks if r.node == node]
    iterations = sum(r.iterations for r in own)
    last = sum(r.last for r in own)
    expected = sum(r.iterations / r.ranks for r in own)
    weight = iterations or 1
    dispersion = last_dispersion(runs, node)
    return NodeSync(
        node=node, set_runs=len(own), iterations=iterations, last=last, expected=expected,
        extra_wait_us=sum(r.extra_wait_us * r.iterations for r in own) / weight,
        excess_wait_us=excess_wait(runs, node), steady_excess_us=steady_excess(runs, node),
        time_us=sum(r.time_us * r.iterations for r in own) / weight,
        compute_us=float(np.median([r.compute_us for r in own])) if own else math.nan,
        efficiency_pct=sum(r.efficiency_pct * r.iterations for r in own) / weight,
        dispersion=dispersion, p=last_tail(last, iterations, expected, dispersion))


@dataclass(frozen=True)
class SyncNodes:
    """Every node of one sync run's operation and ordering."""

    operation: str
    ordering: str
    series: str  # the per-rank series: sync.<operation>.<ordering>
    nodes: tuple[NodeSync, ...]  # in natural order
    dispersion: float  # of every rank's last counts, none left out

    def to_json(self) -> dict[str, Any]:
        return {"operation": self.operation, "ordering": self.ordering, "series": self.series,
                "dispersion": self.dispersion, "nodes": [n.to_json() for n in self.nodes]}


def _aligned(metrics: dict[str, SetRuns]) -> dict[tuple[str, int], dict[str, float]]:
    """(node, set run) -> metric -> value, for the rows that have every metric."""
    rows: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for metric, runs in metrics.items():
        for label, repetition, value in zip(runs.labels.tolist(), runs.repetitions.tolist(), runs.values.tolist()):
            rows[(label, repetition)][metric] = value
    return {key: values for key, values in rows.items() if all(m in values for m in RANK_METRICS)}


def rank_runs(dataset: Dataset) -> dict[tuple[str, str], list[RankRun]]:
    """(operation, ordering) -> every rank of every valid set run, read from
    the per-rank series; a row missing a metric, or with fewer than two
    ranks or no iterations, is left out."""
    grouped: dict[tuple[str, str], dict[str, SetRuns]] = defaultdict(dict)
    for runs in dataset.set_runs:
        parts = split_rank_series(runs.benchmark)
        if parts is not None and runs.metric in RANK_METRICS:
            grouped[parts][runs.metric] = runs
    found: dict[tuple[str, str], list[RankRun]] = {}
    for key, metrics in grouped.items():
        found[key] = [
            RankRun(node, repetition, int(v[ITERATIONS]), int(v[RANKS]), int(v[LAST]), v[TIME], v[EXTRA_WAIT],
                    v[COMPUTE], v[WAIT], v[EFFICIENCY])
            for (node, repetition), v in _aligned(metrics).items()
            if v[RANKS] >= 2 and v[ITERATIONS] >= 1 and 0 <= v[LAST] <= v[ITERATIONS]]
    return found


def set_runs_of(ranks: Sequence[RankRun]) -> list[list[RankRun]]:
    """The ranks grouped by set run (complete runs only: every rank there)."""
    by_run: dict[int, list[RankRun]] = defaultdict(list)
    for rank in ranks:
        by_run[rank.repetition].append(rank)
    return [members for _, members in sorted(by_run.items()) if len(members) == members[0].ranks]


def _ordering_key(ordering: str) -> tuple[int, str]:
    return (ORDERINGS.index(ordering) if ordering in ORDERINGS else len(ORDERINGS), ordering)


def sync_nodes(dataset: Dataset) -> list[SyncNodes]:
    """Per operation and ordering, every node's account over its set runs."""
    readings = []
    for (operation, ordering), ranks in sorted(rank_runs(dataset).items(),
                                               key=lambda item: (item[0][0], _ordering_key(item[0][1]))):
        runs = set_runs_of(ranks)
        names = sorted({r.node for members in runs for r in members}, key=natural_key)
        nodes = tuple(node_sync(node, runs) for node in names)
        readings.append(SyncNodes(operation, ordering, f"sync.{operation}.{ordering}", nodes,
                                  last_dispersion(runs)))
    return readings


# --- against the concurrency ------------------------------------------------------------


@dataclass(frozen=True)
class ScalingPoint:
    """The set runs of one node count: medians over them, and the line's value."""

    ranks: int
    runs: int
    time_us: float
    fitted_us: float
    efficiency_pct: float
    wait_us: float
    extra_wait_us: float

    @property
    def error(self) -> float:
        """(fitted - observed) / observed."""
        return (self.fitted_us - self.time_us) / self.time_us if self.time_us else math.nan

    def to_json(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "runs": self.runs, "time_us": self.time_us, "fitted_us": self.fitted_us,
                "error": self.error, "efficiency_pct": self.efficiency_pct, "wait_us": self.wait_us,
                "extra_wait_us": self.extra_wait_us}


@dataclass(frozen=True)
class TimeFit:
    """time = a + b·ranks, least squares over every set run."""

    a_us: float
    b_us: float  # per rank
    runs: int

    def at(self, ranks: float) -> float:
        return self.a_us + self.b_us * ranks


def fit_time(ranks: Sequence[float], times_us: Sequence[float]) -> TimeFit:
    """The least-squares line time = a + b·ranks through every (ranks, time)
    point, as seaborg's notes fitted it; ValueError unless the points are
    finite, positive and span two node counts."""
    x = np.asarray(ranks, dtype=float)
    y = np.asarray(times_us, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"ranks and times must be two lists of the same length, got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or (x < 1).any() or (y <= 0).any():
        raise ValueError("ranks must be counts of at least 1 and times positive, finite microseconds")
    if np.unique(x).size < 2:
        raise ValueError(f"a line needs two node counts or more, got {sorted(set(x.tolist()))}")
    design = np.column_stack([np.ones_like(x), x])
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    return TimeFit(float(a), float(b), len(x))


@dataclass(frozen=True)
class Extrapolation:
    """The line's time per iteration at a concurrency beyond the measured one."""

    ranks: int
    time_us: float
    compute_us: float  # the quantum as measured: the median compute per iteration
    efficiency_pct: float  # compute / time
    slowdown: float  # time over the observed time at the smallest node count

    def to_json(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "time_us": self.time_us, "compute_us": self.compute_us,
                "efficiency_pct": self.efficiency_pct, "slowdown": self.slowdown}


@dataclass(frozen=True)
class SyncScaling:
    """One operation and ordering against the node count."""

    operation: str
    ordering: str
    points: tuple[ScalingPoint, ...]  # by node count
    fit: TimeFit | None  # None with a single node count
    compute_us: float

    def extrapolate(self, ranks: int) -> Extrapolation | None:
        """The line at ``ranks`` (None without a line)."""
        if self.fit is None:
            return None
        time_us = self.fit.at(ranks)
        efficiency = 100.0 * self.compute_us / time_us if time_us > 0 else math.nan
        first = self.points[0].time_us
        return Extrapolation(ranks, time_us, self.compute_us, efficiency, time_us / first if first else math.nan)

    def to_json(self, extrapolate: int | None = None) -> dict[str, Any]:
        document: dict[str, Any] = {
            "operation": self.operation, "ordering": self.ordering, "compute_us": self.compute_us,
            "points": [p.to_json() for p in self.points],
            "fit": None if self.fit is None else {"a_us": self.fit.a_us, "b_us_per_rank": self.fit.b_us,
                                                  "runs": self.fit.runs}}
        reached = self.extrapolate(extrapolate) if extrapolate else None
        if reached is not None:
            document["extrapolation"] = reached.to_json()
        return document


def _by_count(runs: SetRuns | None) -> dict[int, list[float]]:
    by_count: dict[int, list[float]] = defaultdict(list)
    if runs is None:
        return by_count
    for label, value in zip(runs.labels.tolist(), runs.values.tolist()):
        count = len(set_members(label))
        if count and np.isfinite(value):
            by_count[count].append(value)
    return by_count


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else math.nan


def sync_scaling(dataset: Dataset) -> list[SyncScaling]:
    """Per operation and ordering of the sync runs in the store: the set runs'
    time per iteration, efficiency, wait and extra wait per node count, and
    the line through every run's time (where two counts or more ran)."""
    found = []
    by_series: dict[tuple[str, str], dict[str, SetRuns]] = defaultdict(dict)
    for (_, benchmark, metric), orderings in runs_by_ordering(dataset, SCALE).items():
        operation = benchmark.removeprefix("sync.")
        if benchmark != sync_benchmark(operation):
            continue
        for ordering, runs in orderings.items():
            by_series[(operation, ordering)][metric] = runs
    for (operation, ordering), metrics in sorted(by_series.items(),
                                                 key=lambda item: (item[0][0], _ordering_key(item[0][1]))):
        times = _by_count(metrics.get(TIME))
        if not times:
            continue
        pairs = [(count, value) for count, values in times.items() for value in values if value > 0]
        fit = None
        if len({count for count, _ in pairs}) >= 2:
            fit = fit_time([c for c, _ in pairs], [v for _, v in pairs])
        efficiency, wait, extra = (_by_count(metrics.get(m)) for m in (EFFICIENCY, WAIT, EXTRA_WAIT))
        points = tuple(
            ScalingPoint(count, len(times[count]), _median(times[count]),
                         fit.at(count) if fit is not None else math.nan, _median(efficiency.get(count, [])),
                         _median(wait.get(count, [])), _median(extra.get(count, [])))
            for count in sorted(times))
        compute = _median([v for values in _by_count(metrics.get(COMPUTE)).values() for v in values])
        found.append(SyncScaling(operation, ordering, points, fit, compute))
    return found
