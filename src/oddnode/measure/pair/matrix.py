"""The all-pairs matrix: every ordered pair pings, in rounds of disjoint pairs
(no node in two pairs at once), so that each link is measured under the
load of N/2 pairs; the report draws its bandwidth and latency heatmaps.

A pair below the slow limit (``oddnode.findings.pairs.slow_pair_limit``:
the outlier rule's bound, or half the median when that is higher) is
retested with fewer pairs at once: its suspects in rounds of at most N/4
pairs, then N/8, ... down to one pair alone.  A pair back above the limit is
slowed by contention in the switch; one still below it alone is a bad link.
The ``slow-link`` rule reads the verdict back from the store.

Series (one run):

* ``pingpong.matrix`` (pairs, client first): as ``oddnode pairs`` stores
  them (``latency.<bytes>``, ``bandwidth.<bytes>``, ``fit.*``), the round in
  the parameters;
* ``pingpong.matrix-retest``: the same for the retested pairs, repetition =
  retest level, and ``concurrency``: how many pairs ran at once in a pair's
  last retest (its best, the least, is 1 for a pair retested alone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from oddnode.measure.pair.pairs import (
    PREPARE_TIMEOUT,
    PairRecorder,
    PingPongOptions,
    ping_client_argv,
    ping_recorder,
    run_pair_rounds,
)
from oddnode.readings.interconnect_series import BAD_LINK, CONCURRENCY_METRIC, CONTENTION, NOT_RETESTED
from oddnode.readings.interconnect_series import MATRIX as MATRIX_BENCHMARK
from oddnode.readings.interconnect_series import MATRIX_RETEST as MATRIX_RETEST_BENCHMARK
from oddnode.readings.patterns import PairPlan, is_disjoint, ordered_rounds, pair_label
from oddnode.measure.pair.pingpong import pingpong_serve_argv
from oddnode.core.model import Direction, LabelKind
from oddnode.measure.runner import new_target_run, prepare
from oddnode.measure.steps import Step, StepContext, StepOutcome, option
from oddnode.store import ResultBatch, Store
from oddnode.reach.base import NodeResult, Target
from oddnode.core.units import canonical_unit

if TYPE_CHECKING:
    from oddnode.findings.registry import Sensitivity

# Latency from the 1-byte token, bandwidth at 1 MiB (where a link's rate,
# not its latency, sets the pace), and two sizes between so that the
# a + b·length fit has a line over 1 KiB-1 MiB.
MATRIX_SIZES: tuple[int, ...] = (0, 1 << 10, 1 << 16, 1 << 20)
DEFAULT_MATRIX_OPTIONS = PingPongOptions(sizes=MATRIX_SIZES)
_COUNT = canonical_unit("count")


@dataclass(frozen=True)
class RetestRound:
    """One round of a retest: its level (1, 2, ...), the most pairs allowed at
    once at that level, and the pairs that ran."""

    level: int
    concurrency: int
    pairs: tuple[tuple[str, str], ...]


@dataclass
class MatrixSummary:
    """What a matrix run stored and decided."""

    run_id: int
    plans: list[PairPlan]
    metric: str  # the bandwidth metric judged: bandwidth.<largest size>
    limit: float | None = None  # below it a pair is slow
    values: dict[str, float] = field(default_factory=dict)  # pair -> bandwidth in the matrix
    retests: list[RetestRound] = field(default_factory=list)
    retest_values: dict[str, float] = field(default_factory=dict)  # pair -> best bandwidth retested
    verdicts: dict[str, str] = field(default_factory=dict)  # slow pair -> bad-link, contention, not-retested
    per_pair: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def suspects(self) -> list[str]:
        return list(self.verdicts)

    def with_verdict(self, verdict: str) -> list[str]:
        return [label for label, v in self.verdicts.items() if v == verdict]

    @property
    def notes(self) -> list[str]:
        return [plan.describe() for plan in self.plans if plan.idle]

    def to_json(self) -> dict:
        """The run as data: its id, rounds, the judged metric and its limit
        (MB/s), every pair's bandwidth, the retests and their verdicts, and
        per pair outcome counts."""
        return {"run_id": self.run_id, "notes": self.notes, "rounds": len(self.plans), "metric": self.metric,
                "limit": self.limit, "values": dict(self.values),
                "retests": [{"level": r.level, "concurrency": r.concurrency,
                             "pairs": [pair_label(a, b) for a, b in r.pairs]} for r in self.retests],
                "retest_values": dict(self.retest_values), "verdicts": dict(self.verdicts),
                "per_pair": {label: dict(counts) for label, counts in self.per_pair.items()}}


def retest_rounds(pairs: Sequence[tuple[str, str]], concurrency: int) -> list[list[tuple[str, str]]]:
    """Pack pairs, first fit in their order, into rounds of at most
    ``concurrency`` pairs with no node in two pairs of a round."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    rounds: list[list[tuple[str, str]]] = []
    for pair in pairs:
        for group in rounds:
            if len(group) < concurrency and is_disjoint([*group, pair]):
                group.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


def halving_levels(pairs_per_round: int) -> list[int]:
    """The concurrency of each retest level: half the matrix's pairs per
    round, then half again, down to 1 (a pair alone)."""
    levels, concurrency = [], max(1, pairs_per_round // 2)
    while True:
        levels.append(concurrency)
        if concurrency == 1:
            return levels
        concurrency = max(1, concurrency // 2)


def _stored(store: Store, run_id: int, benchmark: str, metric: str, repetition: int | None = None
            ) -> dict[str, float]:
    """Read back the best valid value per label of one run's series."""
    return store.best_by_label(run_id, benchmark, metric, repetition)


def _retest_recorder(sizes: Sequence[int], level: int, concurrency: dict[str, int]) -> PairRecorder:
    """Record a retested pair as ping rounds do, and how many pairs ran with it."""
    ping = ping_recorder(MATRIX_RETEST_BENCHMARK, sizes,
                         lambda _, client, server: {"level": level,
                                                    "concurrency": concurrency[pair_label(client, server)]})

    def record(batch: ResultBatch, client: str, server: str, repetition: int, results: dict[str, NodeResult],
               raw_ref: str) -> tuple[str, str | None]:
        label = pair_label(client, server)
        batch.add(MATRIX_RETEST_BENCHMARK, label, float(concurrency[label]), metric=CONCURRENCY_METRIC,
                  unit=_COUNT, direction=Direction.LOWER, label_kind=LabelKind.PAIR, repetition=repetition,
                  parameters={"level": level}, raw_ref=raw_ref)
        return ping(batch, client, server, repetition, results, raw_ref)

    return record


def run_matrix(
    store: Store,
    target: Target,
    *,
    options: PingPongOptions = DEFAULT_MATRIX_OPTIONS,
    sensitivity: Sensitivity | None = None,
    retest: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
    command: str = "oddnode matrix",
) -> MatrixSummary:
    """Ping every ordered pair of the target's nodes in rounds of disjoint
    pairs, then retest the slow ones with halving concurrency (unless not
    ``retest``); store everything and return the verdicts."""
    sizes = list(options.sizes)
    if not any(size > 0 for size in sizes):
        raise ValueError("the matrix needs a message size above 0 bytes to measure bandwidth")
    metric = f"bandwidth.{max(sizes)}"
    plans = ordered_rounds(target.nodes)
    run_id = new_target_run(store, target, command)
    summary = MatrixSummary(run_id, plans, metric)
    total = len(plans)
    done = 0

    def progress(step: int, _: int) -> None:
        if on_progress is not None:
            on_progress(done + step, total)

    common = dict(client_argv=ping_client_argv(options), session_seconds=options.run_seconds,
                  measure_seconds=options.measure_seconds, port=options.port, connect_wait=options.connect_wait)
    # Both ends run one build of the kernel: building it for the server builds it.
    lead = prepare(target, pingpong_serve_argv(options.port), PREPARE_TIMEOUT)
    record = ping_recorder(MATRIX_BENCHMARK, sizes,
                           lambda repetition, *_: {"round": repetition, "concurrency": len(plans[repetition - 1].pairs)})
    lead = run_pair_rounds(store, target, run_id, MATRIX_BENCHMARK, [(p.repetition, p.pairs) for p in plans],
                           record=record, lead=lead, per_pair=summary.per_pair, on_progress=progress, **common)
    done = total
    summary.values = _stored(store, run_id, MATRIX_BENCHMARK, metric)
    if not summary.values:
        return summary
    # The finding rules load scipy: imported when a matrix runs, not whenever a command starts.
    from oddnode.findings.pairs import slow_pair_limit
    from oddnode.findings.registry import Sensitivity

    summary.limit = limit = slow_pair_limit(np.array(list(summary.values.values())), sensitivity or Sensitivity())
    pairs_of = {pair_label(a, b): (a, b) for plan in plans for a, b in plan.pairs}
    suspects = [label for label in pairs_of if summary.values.get(label, np.inf) < limit]
    summary.verdicts = {label: NOT_RETESTED for label in suspects}
    if not retest:
        return summary
    pairs_per_round = max(len(plan.pairs) for plan in plans)
    for level, concurrency in enumerate(halving_levels(pairs_per_round), start=1):
        if not suspects:
            break
        rounds = retest_rounds([pairs_of[label] for label in suspects], concurrency)
        running = {pair_label(a, b): len(group) for group in rounds for a, b in group}
        summary.retests += [RetestRound(level, concurrency, tuple(group)) for group in rounds]
        total += len(rounds)
        lead = run_pair_rounds(store, target, run_id, MATRIX_RETEST_BENCHMARK, [(level, g) for g in rounds],
                               record=_retest_recorder(sizes, level, running), lead=lead, on_progress=progress,
                               **common)
        done = total
        measured = _stored(store, run_id, MATRIX_RETEST_BENCHMARK, metric, level)
        for label in suspects:
            if label in measured:
                summary.retest_values[label] = max(measured[label], summary.retest_values.get(label, -np.inf))
        # Back above the limit with fewer pairs at once: contention.  Still
        # below it: on to the next level, down to the pair alone.
        for label in suspects:
            if measured.get(label, -np.inf) >= limit:
                summary.verdicts[label] = CONTENTION
        suspects = [label for label in suspects if summary.verdicts[label] != CONTENTION]
        if concurrency == 1:
            for label in suspects:
                summary.verdicts[label] = BAD_LINK if label in summary.retest_values else NOT_RETESTED
    return summary



@dataclass(frozen=True)
class MatrixOptions(PingPongOptions):
    """What each ordered pair of the matrix measures, and whether slow
    pairs are retested with halving concurrency."""

    sizes: tuple[int, ...] = option(MATRIX_SIZES, help="Message sizes in bytes, comma-separated: latency at the "
                                                       "first, bandwidth at the last", check="sizes")
    retest: bool = option(True, help="Retest slow pairs with fewer pairs at once, down to alone")


class MatrixStep(Step):
    """Every ordered pair of nodes in rounds of disjoint pairs, the slow ones
    retested at halving concurrency: a bad link told from contention."""

    name = "matrix"
    stage = "interconnect"
    options = MatrixOptions
    series = (MATRIX_BENCHMARK, MATRIX_RETEST_BENCHMARK)
    default = False
    min_nodes = 2
    summary = "ping-pong of every ordered pair, slow pairs retested: bad links against contention"

    def check(self, options: MatrixOptions) -> None:
        if not any(size > 0 for size in options.sizes):
            raise ValueError("the matrix needs a message size above 0 bytes to measure bandwidth")

    def run(self, context: StepContext, options: MatrixOptions) -> StepOutcome:
        if not context.run_once(self.name):
            return self.already_done()
        context.observer.benchmark_started(self.name, 0, 1)
        summary = run_matrix(context.store, context.target, options=options, sensitivity=context.sensitivity,
                             retest=options.retest, command=context.step_command(self.name),
                             on_progress=context.progress(self.name, 1))
        context.record(self.name, summary.run_id)
        verdicts = ", ".join(f"{len(summary.with_verdict(v))} {v}" for v in (BAD_LINK, CONTENTION, NOT_RETESTED)
                             if summary.with_verdict(v))
        return StepOutcome(notes=[f"{self.name}: {len(summary.values)} ordered pairs measured, "
                                  f"{len(summary.suspects)} slow ({verdicts or 'none'})"])
