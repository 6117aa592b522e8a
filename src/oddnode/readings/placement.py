"""The placement model: an application's communication time predicted, per
placement of its nodes, from microbenchmarks of the calls it spends that
time in.

From a profile, the (call, message-size bucket) cells that hold most of the
time in MPI become *points*: one of our set kernel's benchmarks at one
message size (``alltoall`` at 32 KiB).  Each point is measured on every
candidate placement of the job's node count, and the application's time in
those calls predicted per placement as

    T(placement) = sum over cells of  n_cell × t(point of the cell, placement)

where ``n_cell`` is the cell's calls per rank (its count over the ranks,
divided by the ranks) and ``t`` the kernel's time per call (the median
batch, the slowest rank's time).  A rank of the application waits in a
collective for the slowest rank, as the kernel's time does.

Which calls a kernel stands for (CALL_KERNELS): the collectives by their own
benchmark (Reduce, Scan and Reduce_scatter by Allreduce, an upper bound: one
more broadcast of the result), every call that sends a message by the
Sendrecv chain at its size (an exchange with a neighbour: the time a halo
costs, which the application pays in its Waits), Barrier by Barrier.
Receives, Waits, Tests and Probes carry no size of their own: their time is
the other side of the sends and is not predicted twice.  The share of the
time in MPI the points stand for is reported with the prediction; MPI_Init
and MPI_Finalize, outside the run's span (model.OUTSIDE_RUN), are neither
predicted nor counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from oddnode.readings.sets_series import ALLREDUCE_ELEMENT_BYTES, MAX_SIZE, PACKED, SHUFFLED, STRIPED
from oddnode.core.model import Dataset, SetRuns
from oddnode.core.nodes import fold
from oddnode.readings import partition
from oddnode.readings.partition import GIVEN, spanned_groups
from oddnode.readings.sets import set_members
from oddnode.readings.profile import Bucket, CallStats, Profile, bucket_label, bucket_range, histogram

_SENDS = ("MPI_Send", "MPI_Isend", "MPI_Ssend", "MPI_Issend", "MPI_Bsend", "MPI_Ibsend", "MPI_Rsend", "MPI_Irsend",
          "MPI_Sendrecv", "MPI_Sendrecv_replace")
CALL_KERNELS: dict[str, str] = {
    **dict.fromkeys(("MPI_Alltoall", "MPI_Ialltoall", "MPI_Alltoallv", "MPI_Ialltoallv", "MPI_Alltoallw"),
                    "alltoall"),
    **dict.fromkeys(("MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce", "MPI_Ireduce", "MPI_Reduce_scatter",
                     "MPI_Reduce_scatter_block", "MPI_Scan", "MPI_Exscan"), "allreduce"),
    **dict.fromkeys(("MPI_Bcast", "MPI_Ibcast"), "bcast"),
    **dict.fromkeys(("MPI_Barrier", "MPI_Ibarrier"), "barrier"),
    **dict.fromkeys(_SENDS, "sendrecv"),
}
# Calls whose time is the far side of calls that are predicted (a receive
# completes a send; a wait completes a nonblocking call): not predicted again.
COMPLETIONS = frozenset({"MPI_Recv", "MPI_Irecv", "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome",
                         "MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome", "MPI_Probe", "MPI_Iprobe"})

# Points are taken, most time first, until they hold this share of the
# modelled calls' time ...
DEFAULT_COVERAGE = 0.9
# ... or there are this many (each is one more benchmark size per placement).
DEFAULT_MAX_POINTS = 8


@dataclass(frozen=True)
class Point:
    """One benchmark of the set kernel at one message size."""

    kernel: str
    size: int  # bytes (0 for a barrier)

    @property
    def label(self) -> str:
        return self.kernel if self.kernel == "barrier" else f"{self.kernel} {_bytes(self.size)}"


@dataclass(frozen=True)
class Cell:
    """A (call, size bucket) of the profile, summed over ranks, and the point
    that stands for it (None: not predicted, with why)."""

    call: str
    bucket: Bucket
    stats: CallStats
    calls_per_rank: float
    point: Point | None
    why_not: str | None = None

    @property
    def bucket_label(self) -> str:
        return bucket_label(self.bucket)


@dataclass
class Selection:
    """What the model measures for a profile: the cells it predicts, those it
    does not, and the numbers a person needs to trust it."""

    ranks: int
    hosts: list[str]  # distinct, in rank order; empty when the profile names none
    mpi_time_per_rank: float  # s, mean over ranks
    chosen: list[Cell] = field(default_factory=list)
    left: list[Cell] = field(default_factory=list)

    @property
    def points(self) -> list[Point]:
        """Distinct points of the chosen cells, in kernel then size order."""
        return sorted({cell.point for cell in self.chosen if cell.point is not None},
                      key=lambda p: (p.kernel, p.size))

    @property
    def coverage(self) -> float:
        """Share of the time in MPI the chosen cells hold (0..1)."""
        total = sum(cell.stats.time for cell in self.chosen + self.left)
        return sum(cell.stats.time for cell in self.chosen) / total if total > 0 else 0.0

    def profiled_time(self) -> float:
        """The chosen cells' time per rank in the profile (s)."""
        return sum(cell.stats.time for cell in self.chosen) / self.ranks


def representative_size(kernel: str, bucket: Bucket, stats: CallStats) -> int | None:
    """The message size a bucket's calls are measured at: their mean size
    where the bytes say it (clamped into the bucket), else the bucket's
    lower bound; allreduce's rounded down to whole doubles (at least one);
    None when the size was not recorded (a barrier needs none)."""
    if kernel == "barrier":
        return 0
    span = bucket_range(bucket)
    if span is None:
        return None
    low, high = span
    size = round(stats.bytes / stats.count) if stats.count and stats.bytes else low
    size = min(max(size, low), high - 1, MAX_SIZE)
    if kernel == "allreduce" and size > 0:
        size = max(size - size % ALLREDUCE_ELEMENT_BYTES, ALLREDUCE_ELEMENT_BYTES)
    return size


def _cell(call: str, bucket: Bucket, stats: CallStats, ranks: int) -> Cell:
    per_rank = stats.count / ranks
    kernel = CALL_KERNELS.get(call)
    if kernel is None:
        why = "completes calls predicted elsewhere" if call in COMPLETIONS else "no benchmark stands for it"
        return Cell(call, bucket, stats, per_rank, None, why)
    size = representative_size(kernel, bucket, stats)
    if size is None:
        return Cell(call, bucket, stats, per_rank, None, "its message size was not recorded")
    return Cell(call, bucket, stats, per_rank, Point(kernel, size))


def select(profile: Profile, coverage: float = DEFAULT_COVERAGE, max_points: int = DEFAULT_MAX_POINTS) -> Selection:
    """The cells the model predicts: of the predictable ones, most time first,
    until they hold ``coverage`` of the predictable time or their points
    number ``max_points``."""
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage is a share of the time in MPI, above 0 and at most 1, not {coverage!r}")
    if max_points < 1:
        raise ValueError(f"the model needs at least one point, not {max_points!r}")
    ranks = len(profile.ranks)
    if ranks < 2:
        raise ValueError(f"{profile.source}: the profile holds {ranks} rank(s); a placement needs two or more")
    hosts = list(dict.fromkeys(rank.host for rank in profile.ranks if rank.host))
    selection = Selection(ranks, hosts if len(hosts) and all(r.host for r in profile.ranks) else [],
                          sum(rank.time_in_mpi for rank in profile.ranks) / ranks)
    cells = sorted((_cell(call, bucket, stats, ranks) for (call, bucket), stats in histogram(profile).items()),
                   key=lambda c: (-c.stats.time, c.call, -2 if c.bucket is None else c.bucket))
    predictable = sum(cell.stats.time for cell in cells if cell.point is not None)
    if predictable <= 0:
        raise ValueError(f"{profile.source}: no time in calls a benchmark stands for (of "
                         f"{', '.join(sorted({c.call for c in cells})) or 'no calls'})")
    held, points = 0.0, set()
    for cell in cells:
        wanted = (cell.point is not None and held < coverage * predictable
                  and (cell.point in points or len(points) < max_points))
        if wanted:
            selection.chosen.append(cell)
            points.add(cell.point)
            held += cell.stats.time
        else:
            selection.left.append(cell)
    return selection


# --- prediction ----------------------------------------------------------------------


def predict(selection: Selection, times: Mapping[Point, float]) -> float:
    """Predicted time per rank in the chosen calls (s), from each point's
    time per call (s); KeyError names a point not measured."""
    total = 0.0
    for cell in selection.chosen:
        if cell.point not in times:
            raise KeyError(f"no measured time for {cell.point.label}")
        total += cell.calls_per_rank * times[cell.point]
    return total


def predictions_by_repetition(selection: Selection, measured: Mapping[str, Mapping[int, Mapping[Point, float]]]
                              ) -> dict[str, dict[int, float]]:
    """Placement -> repetition -> prediction, for every repetition in which
    every point was measured on that placement."""
    predictions: dict[str, dict[int, float]] = {}
    wanted = set(selection.points)
    for placement, repetitions in measured.items():
        predictions[placement] = {r: predict(selection, times) for r, times in sorted(repetitions.items())
                                  if wanted <= set(times)}
    return predictions


@dataclass(frozen=True)
class PlacementVerdict:
    """The placements ranked by their median prediction."""

    medians: dict[str, float]  # placement -> median predicted s per rank
    best: str
    worst: str

    @property
    def factor(self) -> float:
        """How many times longer the worst placement communicates than the best."""
        best = self.medians[self.best]
        return self.medians[self.worst] / best if best > 0 else float("inf")

    def factor_against(self, placement: str) -> float | None:
        """How many times longer ``placement`` communicates than the best."""
        if placement not in self.medians or self.medians[self.best] <= 0:
            return None
        return self.medians[placement] / self.medians[self.best]


def rank_placements(predictions: Mapping[str, Mapping[int, float]]) -> PlacementVerdict | None:
    """The best and worst placement by median prediction; None without two
    predicted placements."""
    medians = {p: median(values.values()) for p, values in predictions.items() if values}
    if len(medians) < 2:
        return None
    order = sorted(medians, key=lambda p: (medians[p], p))
    return PlacementVerdict(medians, order[0], order[-1])


def selection_json(selection: Selection) -> dict[str, Any]:
    """The cells and points as JSON-ready data."""
    def cell(c: Cell) -> dict[str, Any]:
        return {"call": c.call, "bucket": c.bucket, "bucket_label": c.bucket_label, "count": c.stats.count,
                "calls_per_rank": c.calls_per_rank, "time": c.stats.time, "bytes": c.stats.bytes,
                "kernel": c.point.kernel if c.point else None, "size": c.point.size if c.point else None,
                "why_not": c.why_not}
    return {"ranks": selection.ranks, "hosts": selection.hosts, "mpi_time_per_rank": selection.mpi_time_per_rank,
            "coverage": selection.coverage, "profiled_time_per_rank": selection.profiled_time(),
            "points": [{"kernel": p.kernel, "size": p.size} for p in selection.points],
            "chosen": [cell(c) for c in selection.chosen], "left": [cell(c) for c in selection.left]}


def _bytes(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{n} B"


# --- the candidate placements and what a model run measured on them -------------

MODEL = "model"  # the family of the series a model run stores
PREDICTION = "prediction"
CANDIDATES = (GIVEN, PACKED, STRIPED, SHUFFLED)
BY_TOPOLOGY = (PACKED, STRIPED)


def prediction_metric(profile_id: int | None) -> str:
    """The metric a profile's predictions are stored under."""
    return f"profile.{profile_id}" if profile_id is not None else "profile"


@dataclass(frozen=True)
class Candidate:
    """One placement of the job: its nodes in rank order, the groups they
    span, and the other names that chose the same nodes."""

    name: str
    members: tuple[str, ...]
    groups: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return fold(list(self.members))

    def merged(self, name: str) -> Candidate:
        """This candidate with the placement ``name``, which chose the same
        nodes: a placement by topology keeps its name (the rule compares
        packed with striped); where the job ran, or a shuffle, that picked
        the same nodes becomes its alias."""
        if name in BY_TOPOLOGY and self.name not in BY_TOPOLOGY:
            return Candidate(name, self.members, self.groups, (self.name, *self.aliases))
        return Candidate(self.name, self.members, self.groups, (*self.aliases, name))


def candidates(nodes: Sequence[str], count: int, groups: Mapping[str, str] | None, hosts: Sequence[str] = (),
               seed: int = 0, wanted: Sequence[str] = CANDIDATES) -> tuple[list[Candidate], list[str]]:
    """The distinct placements of ``count`` of ``nodes`` among ``wanted``,
    and notes on those left out or merged."""
    if count < 2:
        raise ValueError(f"a placement needs two or more nodes, not {count}")
    if count > len(nodes):
        raise ValueError(f"the job ran on {count} nodes; only {len(nodes)} given ({fold(list(nodes))})")
    notes: list[str] = []
    chosen: list[Candidate] = []
    for name in wanted:
        if name == GIVEN:
            if len(hosts) != count or not set(hosts) <= set(nodes):
                notes.append(f"given: the profile's hosts ({fold(list(hosts)) if hosts else 'not recorded'}) are "
                             "not all among the nodes given; not measured")
                continue
            members = tuple(hosts)
        elif name in (PACKED, STRIPED) and not groups:
            notes.append(f"{name}: needs a topology (--topology FILE); not measured")
            continue
        else:
            members = partition.placement(nodes, groups, name, count, seed)
        same = next((i for i, c in enumerate(chosen) if c.members == members), None)
        if same is not None:
            earlier, chosen[same] = chosen[same], chosen[same].merged(name)
            alias = earlier.name if chosen[same].name == name else name
            notes.append(f"{alias}: the same nodes as {chosen[same].name} ({fold(list(members))}); measured once")
            continue
        chosen.append(Candidate(name, members, spanned_groups(members, groups) if groups else ()))
    if not chosen:
        raise ValueError("no placement to measure: " + "; ".join(notes))
    return chosen, notes


@dataclass
class ModelRun:
    """What a model run measured: placement -> repetition -> point -> s per call,
    the predictions from them, and the set runs that failed."""

    run_id: int
    candidates: list[Candidate]
    measured: dict[str, dict[int, dict[Point, float]]] = field(default_factory=dict)
    predictions: dict[str, dict[int, float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# --- the predictions a model run stored ---------------------------------------------

# The set series a model run stores its predictions under, one per
# placement (model.prediction.packed), the metric naming the profile.
PREDICTION_PREFIX = f"{MODEL}.{PREDICTION}."


def stored_predictions(dataset: Dataset) -> dict[str, dict[str, SetRuns]]:
    """Metric (profile.<id>) -> placement -> its stored predictions."""
    found: dict[str, dict[str, SetRuns]] = {}
    for runs in dataset.set_runs:
        if runs.benchmark.startswith(PREDICTION_PREFIX):
            found.setdefault(runs.metric, {})[runs.benchmark[len(PREDICTION_PREFIX):]] = runs
    return found


@dataclass(frozen=True)
class StoredModel:
    """One profile's predictions as the store holds them: per placement its
    nodes (the set of its runs) and its prediction per repetition."""

    metric: str
    candidates: tuple[Candidate, ...]
    predictions: dict[str, dict[int, float]]  # placement -> repetition -> predicted s per rank

    @property
    def profile_id(self) -> int | None:
        number = self.metric.removeprefix("profile.")
        return int(number) if number.isdigit() else None


def stored_models(dataset: Dataset) -> list[StoredModel]:
    """Every profile's stored predictions, in the order of their metrics;
    each placement's nodes are those of its first set label, its groups
    from the dataset's topology.  A run stores a placement under every
    name that chose its nodes (given and striped); those are one candidate
    again, named as ``candidates`` names it."""
    def order(name: str) -> tuple[int, str]:
        return CANDIDATES.index(name) if name in CANDIDATES else len(CANDIDATES), name

    models = []
    for metric, placements in sorted(stored_predictions(dataset).items()):
        chosen: list[Candidate] = []
        predictions: dict[str, dict[int, float]] = {}
        for name in sorted(placements, key=order):
            runs = placements[name]
            if not len(runs):
                continue
            members = set_members(str(runs.labels[0]))
            values = {int(r): float(v) for r, v in zip(runs.repetitions.tolist(), runs.values.tolist())}
            same = next((i for i, c in enumerate(chosen) if c.members == members and predictions[c.name] == values),
                        None)
            if same is None:
                groups = spanned_groups(members, dataset.topology) if dataset.topology else ()
                chosen.append(Candidate(name, members, groups))
                predictions[name] = values
                continue
            earlier, chosen[same] = chosen[same], chosen[same].merged(name)
            predictions[chosen[same].name] = predictions.pop(earlier.name)
        if chosen:
            models.append(StoredModel(metric, tuple(sorted(chosen, key=lambda c: order(c.name))), predictions))
    return models
