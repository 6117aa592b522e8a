"""Scripted set results, as ``oddnode sets`` and ``oddnode scale`` store them.

A ``Fabric`` says what a set's run gives: every set runs IMB's Sendrecv
chain (each rank sends to the next and receives from the previous, in rank
order, periodically), so its bandwidth is the least of its members' links
and of each uplink's share among the flows that cross it, divided by the
slowdown of its slowest member (a competing process or a weak card makes
every set it is in wait for it), with noise.  A member that fails makes the
whole run fail.  The sets come from the real partition
(``oddnode.readings.partition``), the rows go through the real store, and the
dataset comes back from ``Store.load_dataset``; ``direct_dataset`` builds
the same set runs without a store, for sweeps over many seeds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from oddnode.core.model import Dataset, Direction, Failure, LabelKind, SetRuns
from oddnode.core.nodes import expand, fold
from oddnode.readings.partition import scale_counts, scale_plans, set_plans
from oddnode.readings.sets_series import LIST_ORDERINGS, SCALE, SETS, SORTED, set_series
from oddnode.store import ResultBatch, Store


SIZE = 1 << 20  # bytes per message: bandwidth.1048576 and time.1048576
LINK = 1000.0  # MB/s a node's link carries, each way
BENCHMARK = "sendrecv"


@dataclass
class Fabric:
    nodes: list[str]
    topology: dict[str, str] = field(default_factory=dict)  # node -> group
    uplink: dict[str, float] = field(default_factory=dict)  # group -> MB/s; default non-blocking (size × LINK)
    slow: dict[str, float] = field(default_factory=dict)  # node -> how many times longer its sets take
    failing: set[str] = field(default_factory=set)  # nodes whose every set fails
    noise: float = 0.02  # lognormal sigma of a run
    jitter: float = 0.0  # chance that a run is slowed at random (OS noise, another job's burst)
    jitter_factor: float = 3.0
    contention: float = 0.0  # shuffled sets spanning groups lose up to this share at random (a busy core)
    per_node_cost: float = 0.0  # an application that slows with its node count, whatever the order

    def uplink_rate(self, group: str) -> float:
        size = sum(1 for g in self.topology.values() if g == group)
        return self.uplink.get(group, size * LINK)

    def bandwidth(self, members: Sequence[str], rng: np.random.Generator, shuffled: bool) -> float | None:
        """Sendrecv's bandwidth (2 × bytes / time, MB/s) of one run, None when it fails."""
        if self.failing & set(members):
            return None
        rate = LINK
        k = len(members)
        groups = [self.topology.get(m) for m in members]
        for group in {g for g in groups if g is not None}:
            # Flows leaving the group each way: hops i -> i+1 from inside to outside.
            out = sum(1 for i in range(k) if groups[i] == group and groups[(i + 1) % k] != group)
            if out:
                rate = min(rate, self.uplink_rate(group) / out)
        rate /= max(self.slow.get(m, 1.0) for m in members)
        rate /= 1.0 + self.per_node_cost * (k - 2)
        if shuffled and self.contention and len(set(groups)) > 1:
            rate *= 1.0 - self.contention * rng.random()
        if self.jitter and rng.random() < self.jitter:
            rate /= self.jitter_factor
        return 2.0 * rate * math.exp(self.noise * rng.standard_normal())


@dataclass(frozen=True)
class Row:
    series: str
    label: str
    members: tuple[str, ...]  # in rank order
    repetition: int
    ordering: str
    bandwidth: float | None  # None: the run failed


def set_rows(fabric: Fabric, size: int, repetitions: int, seed: int = 0,
             orderings: Sequence[str] = LIST_ORDERINGS, benchmark: str = BENCHMARK) -> list[Row]:
    """Every set run of ``oddnode sets`` (every set of ``size`` nodes at once;
    packed and striped from the fabric's topology)."""
    rng = np.random.default_rng(seed)
    rows = []
    for ordering in orderings:
        for plan in set_plans(fabric.nodes, size, ordering, repetitions, seed, fabric.topology):
            for members in plan.sets:
                rows.append(Row(set_series(SETS, benchmark, ordering), fold(members), members, plan.repetition,
                                ordering, fabric.bandwidth(members, rng, ordering != SORTED)))
    return rows


def scale_rows(fabric: Fabric, repetitions: int, seed: int = 0, counts: Sequence[int] | None = None,
               benchmark: str = BENCHMARK) -> list[Row]:
    """Every run of ``oddnode scale`` (one set per node count, alone)."""
    rng = np.random.default_rng(seed + 1)
    counts = scale_counts(len(fabric.nodes), counts)
    rows = []
    for ordering in LIST_ORDERINGS:
        for repetition, _, members in scale_plans(fabric.nodes, counts, ordering, repetitions, seed):
            rows.append(Row(set_series(SCALE, benchmark, ordering), fold(members), members, repetition, ordering,
                            fabric.bandwidth(members, rng, ordering != SORTED)))
    return rows


def _metrics(bandwidth: float | None) -> list[tuple[str, str, Direction, float | None]]:
    """The two rows of a run: bandwidth.SIZE (MB/s) and time.SIZE (us: 2 × bytes / (MB/s))."""
    time = 2.0 * SIZE / bandwidth if bandwidth is not None else None
    return [(f"bandwidth.{SIZE}", "MB/s", Direction.HIGHER, bandwidth),
            (f"time.{SIZE}", "us", Direction.LOWER, time)]


def store_rows(store: Store, rows: list[Row], nodes: Sequence[str], command: str = "oddnode sets",
               failing: set[str] = frozenset()) -> None:
    """One run per series, as the runner writes them: valid rows with their
    members in rank order, a failed run invalid under every metric with the
    reasons of its ``failing`` members."""
    by_series: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_series[row.series].append(row)
    for series, series_rows in by_series.items():
        batch = ResultBatch()
        for row in series_rows:
            common = {"members": list(row.members), "nodes": len(row.members), "ordering": row.ordering}
            failed = row.bandwidth is None
            if failed:
                common |= {"error": "mpirun exited with status 1",
                           "member_reasons": {m: "unreachable: ssh: connect to host: No route to host"
                                              for m in row.members if m in failing}}
            for metric, unit, direction, value in _metrics(row.bandwidth):
                batch.add(series, row.label, value, metric=metric, unit=unit, direction=direction,
                          label_kind=LabelKind.SET, repetition=row.repetition, valid=not failed,
                          parameters=common, raw_ref=f"raw:{series}:{row.label}:{row.repetition}")
        with store.transaction():
            run_id = store.new_run(command, nodes=list(nodes))
            store.add_results(run_id, batch)


def _store_topology(store: Store, fabric: Fabric) -> None:
    if fabric.topology:
        with store.transaction():
            store.set_topology(store.new_run("oddnode topology"), fabric.topology)


def write_sets(store: Store, fabric: Fabric, size: int, repetitions: int, seed: int = 0, **options) -> list[Row]:
    """``oddnode sets`` on the fabric, both orderings unless told, and its topology."""
    rows = set_rows(fabric, size, repetitions, seed, **options)
    store_rows(store, rows, fabric.nodes, failing=fabric.failing)
    _store_topology(store, fabric)
    return rows


def write_scale(store: Store, fabric: Fabric, repetitions: int, seed: int = 0, **options) -> list[Row]:
    """``oddnode scale`` on the fabric, sorted and shuffled, and its topology."""
    rows = scale_rows(fabric, repetitions, seed, **options)
    store_rows(store, rows, fabric.nodes, "oddnode scale", failing=fabric.failing)
    _store_topology(store, fabric)
    return rows


def write_node_series(store: Store, benchmark: str, values: dict[str, float], unit: str = "MB/s",
                      direction: Direction = Direction.HIGHER) -> None:
    """One single-node benchmark, one value per node (a repetition each)."""
    batch = ResultBatch()
    for node, value in values.items():
        batch.add(benchmark, node, value, unit=unit, direction=direction, repetition=1)
    with store.transaction():
        store.add_results(store.new_run(f"oddnode {benchmark}", nodes=list(values)), batch)


def direct_dataset(rows: list[Row], topology: dict[str, str] | None = None) -> Dataset:
    """The set runs and failed runs ``Store.load_dataset`` gives for these
    rows (``test_the_direct_dataset_is_what_the_store_loads`` holds it to
    that), without a store: labels in byte order, then repetitions."""
    grouped: dict[tuple[str, str], list[tuple[str, int, float]]] = defaultdict(list)
    units: dict[str, tuple[str, Direction]] = {}
    failures = []
    for row in rows:
        for metric, unit, direction, value in _metrics(row.bandwidth):
            units[metric] = (unit, direction)
            if value is None:
                failures.append(Failure(row.series, row.label, LabelKind.SET, row.repetition,
                                        tuple(expand(row.label))))
            else:
                grouped[(row.series, metric)].append((row.label, row.repetition, value))
    set_runs = []
    for (series, metric), entries in sorted(grouped.items()):
        entries.sort(key=lambda e: (e[0].encode(), e[1]))
        unit, direction = units[metric]
        set_runs.append(SetRuns(series, metric, unit, direction, np.array([e[0] for e in entries], dtype=object),
                                np.array([e[1] for e in entries], dtype=np.int64),
                                np.array([e[2] for e in entries], dtype=np.float64)))
    failures.sort(key=lambda f: (f.benchmark, f.label.encode(), f.repetition))
    return Dataset(failures=failures, topology=dict(topology or {}), set_runs=set_runs)
