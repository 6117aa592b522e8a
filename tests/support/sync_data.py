"""Simulated sync runs, as ``oddnode sync`` stores them, for the readings and
the sync-laggard rule on clusters of any size with a known truth.

Every set run comes from the real partition (``scale_plans``).  In every
iteration each rank computes a quantum with small random jitter and, on
a laggard, either a detour of ``detour_us`` with probability
``detour_probability`` (a daemon's interruptions) or a slowdown by
``slowdown`` (a competing process), or such detours in one set run only
(``stalls``: its host held it back for that run); a healthy cluster may carry a
``persistent_us`` bias per rank and set run (a rank whose CPU quota's period
falls late for a whole run, as on the testbed), which makes the last
counts vary more than binomial ones.  The rank that arrives last at an
iteration's collective is its laggard, its extra wait the gap to the
next-to-last.  The rows are built as the runner builds them
(``sync.runner.rank_rows``' metrics, the scale family's set metrics) and
come back as the Dataset's set runs, with or without a store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from oddnode.core.model import Dataset, Direction, LabelKind, SetRuns
from oddnode.core.nodes import fold
from oddnode.readings.partition import scale_counts, scale_plans
from oddnode.readings.sets_series import SCALE, SHUFFLED, set_series
from oddnode.readings.sync_series import (
    COMPUTE,
    EFFICIENCY,
    EXTRA_WAIT,
    ITERATIONS,
    LAST,
    RANKS,
    TIME,
    WAIT,
    rank_series,
    sync_benchmark,
)
from oddnode.store import ResultBatch, Store


QUANTUM = 1000.0  # us
COLLECTIVE = 20.0  # us the collective itself takes
_UNITS = {LAST: ("count", Direction.LOWER), ITERATIONS: ("count", Direction.HIGHER),
          RANKS: ("count", Direction.HIGHER), TIME: ("us", Direction.LOWER), EXTRA_WAIT: ("us", Direction.LOWER),
          COMPUTE: ("us", Direction.LOWER), WAIT: ("us", Direction.LOWER), EFFICIENCY: ("%", Direction.HIGHER)}


@dataclass
class SyncCluster:
    nodes: list[str]
    iterations: int = 500
    repetitions: int = 3
    counts: Sequence[int] | None = None
    jitter_us: float = 10.0  # exponential jitter of every quantum
    laggards: dict[str, tuple[float, float]] = field(default_factory=dict)  # node -> (probability, detour us)
    slowdown: dict[str, float] = field(default_factory=dict)  # node -> factor of its quantum
    # node -> (the set run, numbered from 1, probability, detour us): detours in that run only
    stalls: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    persistent_us: float = 0.0  # sd of a rank's bias over a whole set run
    operation: str = "allreduce"
    ordering: str = SHUFFLED

    def run(self, members: Sequence[str], rng: np.random.Generator, number: int = 0) -> dict[str, object]:
        """Set run ``number``: per rank its metrics, and the set's."""
        k, n = len(members), self.iterations
        compute = QUANTUM + rng.exponential(self.jitter_us, size=(n, k))
        for j, node in enumerate(members):
            compute[:, j] *= self.slowdown.get(node, 1.0)
            if node in self.laggards:
                probability, detour = self.laggards[node]
                compute[:, j] += detour * (rng.random(n) < probability)
            stalled, probability, detour = self.stalls.get(node, (0, 0.0, 0.0))
            if stalled == number:
                compute[:, j] += detour * (rng.random(n) < probability)
        arrival = compute + rng.normal(0.0, self.persistent_us, size=k) if self.persistent_us else compute
        arrival = np.maximum(arrival, 1.0)
        order = np.argsort(arrival, axis=1)
        last = order[:, -1]
        latest = np.take_along_axis(arrival, order[:, -1:], axis=1)[:, 0]
        second = np.take_along_axis(arrival, order[:, -2:-1], axis=1)[:, 0]
        wait = latest[:, None] - arrival + COLLECTIVE
        time = float(np.mean(latest + COLLECTIVE))
        ranks = {}
        for j, node in enumerate(members):
            mine = last == j
            ranks[node] = {LAST: float(mine.sum()), ITERATIONS: float(n), RANKS: float(k), TIME: time,
                           EXTRA_WAIT: float((latest - second)[mine].sum() / n),
                           COMPUTE: float(np.median(compute[:, j])), WAIT: float(np.median(wait[:, j])),
                           EFFICIENCY: 100.0 * compute[:, j].sum() / (compute[:, j].sum() + wait[:, j].sum())}
        total_compute, total_wait = compute.sum(), wait.sum()
        sets = {TIME: time, EFFICIENCY: 100.0 * total_compute / (total_compute + total_wait),
                COMPUTE: total_compute / (n * k), WAIT: total_wait / (n * k),
                EXTRA_WAIT: float((latest - second).sum() / n)}
        return {"ranks": ranks, "set": sets}

    def rows(self, seed: int = 0) -> list[tuple[str, str, int, dict[str, float], LabelKind]]:
        """(series, label, repetition, metric values, label kind) of every row."""
        rng = np.random.default_rng(seed)
        counts = scale_counts(len(self.nodes), self.counts)
        rows = []
        for number, (repetition, _, members) in enumerate(
                scale_plans(self.nodes, counts, self.ordering, self.repetitions, seed), start=1):
            result = self.run(members, rng, number)
            rows.append((set_series(SCALE, sync_benchmark(self.operation), self.ordering), fold(members),
                         repetition, result["set"], LabelKind.SET))
            for node, values in result["ranks"].items():
                rows.append((rank_series(self.operation, self.ordering), node, number, values, LabelKind.SET))
        return rows

    def dataset(self, seed: int = 0) -> Dataset:
        """The set runs as the store gives them back, built directly."""
        grouped: dict[tuple[str, str], list[tuple[str, int, float]]] = {}
        for series, label, repetition, values, _ in self.rows(seed):
            for metric, value in values.items():
                grouped.setdefault((series, metric), []).append((label, repetition, value))
        set_runs = []
        for (series, metric), entries in sorted(grouped.items()):
            entries.sort()
            unit, direction = _UNITS[metric]
            set_runs.append(SetRuns(series, metric, unit, direction, np.array([e[0] for e in entries], dtype=object),
                                    np.array([e[1] for e in entries], dtype=np.int64),
                                    np.array([e[2] for e in entries], dtype=np.float64)))
        return Dataset(set_runs=set_runs, declared_nodes=list(self.nodes))

    def store(self, store: Store, seed: int = 0) -> int:
        """The rows written to a real store in one run; its id."""
        with store.transaction():
            run_id = store.new_run("oddnode sync (simulated)", nodes=self.nodes)
            batch = ResultBatch()
            for series, label, repetition, values, kind in self.rows(seed):
                for metric, value in values.items():
                    unit, direction = _UNITS[metric]
                    batch.add(series, label, value, metric=metric, unit=unit, direction=direction, label_kind=kind,
                              repetition=repetition)
            store.add_results(run_id, batch)
        return run_id
