"""Bisection bandwidth as STAB demonstrated it: the cut pattern's pairs (node
i with node i+N/2, the two halves of the list facing each other) all stream
at once at a large message size, and the sum of their bandwidths is the
bandwidth the network carried across the cut.

It is shown next to what the cut would carry if no pair slowed another:
N/2 times the median bandwidth of a cut pair streaming alone, each pair
measured one at a time.  Their ratio is the fraction of full bisection.

Series (one run):

* ``bisection.cut`` (pairs): ``bandwidth`` (MB/s) of each pair, all at once;
* ``bisection.alone`` (pairs): ``bandwidth`` of each pair alone;
* ``bisection`` (the set of the cut's nodes): ``demonstrated``, the sum
  over the pairs of one repetition (invalid unless every pair measured);
  ``single_pair``, the median of the pairs' best alone; ``full``, the pair
  count times ``single_pair``; ``fraction``, the best demonstrated over full.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from oddnode.measure.estimate import Estimate, rounds_estimate
from oddnode.readings.interconnect_series import BISECTION as BISECTION_BENCHMARK
from oddnode.readings.interconnect_series import BISECTION_ALONE as ALONE_BENCHMARK
from oddnode.readings.interconnect_series import BISECTION_CUT as CUT_BENCHMARK
from oddnode.measure.pair.pairs import (
    PREPARE_TIMEOUT,
    PairRecorder,
    StreamOptions,
    run_pair_rounds,
    stream_client_argv,
)
from oddnode.readings.patterns import PairPlan, pair_label, pairs_cut
from oddnode.measure.pair.pingpong import parse_stream_run, pingpong_serve_argv
from oddnode.core.model import Direction, LabelKind
from oddnode.core.nodes import fold
from oddnode.measure.runner import DEFAULT_REPETITIONS, new_target_run, parsed_client_run, prepare
from oddnode.measure.steps import Step, StepContext, StepOutcome
from oddnode.store import ResultBatch, Store
from oddnode.reach.base import NodeResult, Target
from oddnode.core.units import canonical_unit

BANDWIDTH_METRIC = "bandwidth"
_MB_PER_S = canonical_unit("MB/s")
_FRACTION = canonical_unit("")


@dataclass(frozen=True)
class BisectionFigures:
    """The arithmetic of a bisection measurement (MB/s)."""

    pairs: int
    demonstrated: float | None  # the best repetition's sum over all pairs at once
    single_pair: float | None  # median over the pairs of each one's best alone
    full: float | None  # pairs × single_pair

    @property
    def fraction(self) -> float | None:
        if self.demonstrated is None or not self.full:
            return None
        return self.demonstrated / self.full


def repetition_sums(concurrent: Sequence[Mapping[str, float | None]], pairs: Sequence[str]) -> list[float | None]:
    """The sum over the pairs of each repetition; None for a repetition in which
    a pair has no value (a sum over fewer pairs would understate the cut)."""
    sums: list[float | None] = []
    for values in concurrent:
        got = [values.get(label) for label in pairs]
        sums.append(None if any(v is None or not math.isfinite(v) for v in got) else float(sum(got)))
    return sums


def bisection_figures(concurrent: Sequence[Mapping[str, float | None]], alone: Mapping[str, float | None],
                      pairs: Sequence[str]) -> BisectionFigures:
    """Demonstrated and full bisection from each repetition's concurrent pair
    bandwidths and each pair's best bandwidth alone."""
    sums = [s for s in repetition_sums(concurrent, pairs) if s is not None]
    singles = [v for label in pairs if (v := alone.get(label)) is not None and math.isfinite(v)]
    single = float(statistics.median(singles)) if singles else None
    return BisectionFigures(
        pairs=len(pairs),
        demonstrated=max(sums) if sums else None,
        single_pair=single,
        full=len(pairs) * single if single is not None else None,
    )


@dataclass
class BisectionSummary:
    """What a bisection run stored, and its figures."""

    run_id: int
    plan: PairPlan
    options: StreamOptions
    figures: BisectionFigures
    sums: list[float | None] = field(default_factory=list)  # demonstrated per repetition
    concurrent: dict[str, float] = field(default_factory=dict)  # pair -> best bandwidth all at once
    alone: dict[str, float] = field(default_factory=dict)  # pair -> best bandwidth alone
    per_pair: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def nodes(self) -> str:
        return fold(self.plan.nodes)

    @property
    def notes(self) -> list[str]:
        return [self.plan.describe()] if self.plan.idle else []

    def to_json(self) -> dict:
        """The run as data: its id, nodes, stream settings, cut pairs, figures
        (MB/s), each repetition's sum and each pair's best at once and alone,
        and per pair outcome counts."""
        figures = self.figures
        return {"run_id": self.run_id, "nodes": self.nodes, "notes": self.notes,
                "message_size": self.options.message_size, "seconds": self.options.seconds,
                "both": self.options.both, "pairs": self.plan.labels,
                "figures": {"pairs": figures.pairs, "demonstrated": figures.demonstrated,
                            "single_pair": figures.single_pair, "full": figures.full, "fraction": figures.fraction},
                "sums": list(self.sums), "concurrent": dict(self.concurrent), "alone": dict(self.alone),
                "per_pair": {label: dict(counts) for label, counts in self.per_pair.items()}}


def stream_recorder(benchmark: str, options: StreamOptions, concurrency: int,
                    into: dict[tuple[int, str], float | None]) -> PairRecorder:
    """The recorder of stream rounds: each pair's bandwidth (both directions
    added when both stream), kept in ``into`` by (repetition, pair) too."""

    def record(batch: ResultBatch, client: str, server: str, repetition: int, results: dict[str, NodeResult],
               raw_ref: str) -> tuple[str, str | None]:
        label = pair_label(client, server)
        parameters = {"client": client, "server": server, "message_size": options.message_size,
                      "seconds": options.seconds, "both": options.both, "concurrency": concurrency}
        parsed, problem = parsed_client_run(results, client, server, parse_stream_run, raw_ref)
        if parsed is None:
            batch.add(benchmark, label, None, metric=BANDWIDTH_METRIC, unit=_MB_PER_S, direction=Direction.HIGHER,
                      label_kind=LabelKind.PAIR, repetition=repetition, valid=False,
                      parameters={**parameters, "error": problem}, raw_ref=raw_ref)
            into[repetition, label] = None
            return "failed", problem
        value = sum(m.value for m in parsed.measurements)
        directions = {m.metric.removeprefix("bandwidth."): m.value for m in parsed.measurements}
        batch.add(benchmark, label, value, metric=BANDWIDTH_METRIC, unit=_MB_PER_S, direction=Direction.HIGHER,
                  label_kind=LabelKind.PAIR, repetition=repetition, valid=parsed.valid,
                  parameters={**parameters, "directions": directions}, raw_ref=raw_ref)
        into[repetition, label] = value if parsed.valid else None
        return ("ok", None) if parsed.valid else ("invalid", "; ".join(parsed.problems))

    return record


def _best(values: Mapping[tuple[int, str], float | None], label: str) -> float | None:
    got = [v for (_, pair), v in values.items() if pair == label and v is not None]
    return max(got) if got else None


def _figure_rows(batch: ResultBatch, label: str, figures: BisectionFigures, sums: list[float | None],
                 options: StreamOptions) -> None:
    parameters = {"pairs": figures.pairs, "message_size": options.message_size, "seconds": options.seconds,
                  "both": options.both}
    for repetition, total in enumerate(sums, start=1):
        batch.add(BISECTION_BENCHMARK, label, total, metric="demonstrated", unit=_MB_PER_S,
                  direction=Direction.HIGHER, label_kind=LabelKind.SET, repetition=repetition,
                  valid=total is not None, parameters=parameters)
    for metric, value, unit in (("single_pair", figures.single_pair, _MB_PER_S), ("full", figures.full, _MB_PER_S),
                                ("fraction", figures.fraction, _FRACTION)):
        batch.add(BISECTION_BENCHMARK, label, value, metric=metric, unit=unit, direction=Direction.HIGHER,
                  label_kind=LabelKind.SET, repetition=1, valid=value is not None, parameters=parameters)


def _shifted(on_progress: Callable[[int, int], None] | None, offset: int, total: int
             ) -> Callable[[int, int], None] | None:
    """Progress of one call of rounds as progress of the whole run."""
    if on_progress is None:
        return None
    return lambda done, _: on_progress(offset + done, total)


def run_bisection(
    store: Store,
    target: Target,
    repetitions: int = DEFAULT_REPETITIONS,
    *,
    options: StreamOptions = StreamOptions(),
    on_progress: Callable[[int, int], None] | None = None,
    command: str = "oddnode bisection",
) -> BisectionSummary:
    """Stream the cut pattern's pairs all at once, then each alone, ``repetitions``
    times, and store the pairs' bandwidths and the bisection figures."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    plan = pairs_cut(target.nodes)
    labels = plan.labels
    run_id = new_target_run(store, target, command)
    concurrent: dict[tuple[int, str], float | None] = {}
    alone: dict[tuple[int, str], float | None] = {}
    summary = BisectionSummary(run_id, plan, options, BisectionFigures(len(labels), None, None, None))
    per_round = 1 + len(plan.pairs)
    total = repetitions * per_round
    common = dict(client_argv=stream_client_argv(options), session_seconds=options.run_seconds,
                  measure_seconds=options.measure_seconds, port=options.port, connect_wait=options.connect_wait,
                  per_pair=summary.per_pair)
    lead = prepare(target, pingpong_serve_argv(options.port), PREPARE_TIMEOUT)
    for repetition in range(1, repetitions + 1):
        done = (repetition - 1) * per_round
        # The pairs all at once, then each alone: interleaved per repetition,
        # so that a drift over the run weighs on both alike.
        lead = run_pair_rounds(store, target, run_id, CUT_BENCHMARK, [(repetition, list(plan.pairs))],
                               record=stream_recorder(CUT_BENCHMARK, options, len(plan.pairs), concurrent),
                               lead=lead, on_progress=_shifted(on_progress, done, total), **common)
        lead = run_pair_rounds(store, target, run_id, ALONE_BENCHMARK, [(repetition, [p]) for p in plan.pairs],
                               record=stream_recorder(ALONE_BENCHMARK, options, 1, alone), lead=lead,
                               on_progress=_shifted(on_progress, done + 1, total), **common)
    by_repetition = [{label: concurrent.get((r, label)) for label in labels} for r in range(1, repetitions + 1)]
    summary.alone = {label: v for label in labels if (v := _best(alone, label)) is not None}
    summary.concurrent = {label: v for label in labels if (v := _best(concurrent, label)) is not None}
    summary.sums = repetition_sums(by_repetition, labels)
    summary.figures = bisection_figures(by_repetition, summary.alone, labels)
    batch = ResultBatch()
    _figure_rows(batch, fold(plan.nodes), summary.figures, summary.sums, options)
    with store.transaction():
        store.add_results(run_id, batch)
    return summary


class BisectionStep(Step):
    """Bisection bandwidth: the cut pattern's pairs streaming at once, then
    each alone, R times."""

    name = "bisection"
    stage = "interconnect"
    options = StreamOptions
    series = (BISECTION_BENCHMARK,)
    min_nodes = 2
    summary = "bisection bandwidth: the cut pairs streaming at once against each alone"

    def estimate(self, options: StreamOptions, nodes: int, repetitions: int,
                 link_bytes_per_s: float | None = None) -> Estimate | None:
        pairs = nodes // 2
        return rounds_estimate(self.name, repetitions * (1 + pairs) if pairs else 0, options.seconds, 0.0,
                               f"the {pairs} cut pairs at once, then each alone, {options.seconds:g} s each")

    def run(self, context: StepContext, options: StreamOptions) -> StepOutcome:
        if not context.run_once(self.name):
            return self.already_done()
        wanted = context.repetitions
        context.observer.benchmark_started(self.name, 0, wanted)
        bisection = run_bisection(context.store, context.target, wanted, options=options,
                                  command=context.step_command(self.name),
                                  on_progress=context.progress(self.name, wanted))
        context.record(self.name, bisection.run_id)
        figures = bisection.figures
        if figures.demonstrated is None:
            return StepOutcome(notes=[f"{self.name}: no repetition in which every cut pair streamed"])
        full = f", {figures.fraction * 100:.1f}% of full bisection ({figures.full:.4g} MB/s)" if figures.full else ""
        return StepOutcome(notes=[f"{self.name}: demonstrated {figures.demonstrated:.4g} MB/s over "
                                  f"{figures.pairs} cut pairs{full}"])
