"""Measure a profile's points on candidate placements of its job, and store
the predictions.

The candidates are the job's node count placed ``given`` (the profile's own
hosts, in rank order, when the target holds them all), ``packed``,
``striped`` (with a topology) and ``shuffled``; two that pick the same nodes
in the same order are measured once, under the first name.  Every
repetition runs each candidate once, one at a time on an otherwise idle
set of nodes, in an order shuffled from the seed (a drift of the cluster
then falls on every placement alike); under mpirun, as many of these runs
as one launch takes share it, a round each (measure.set.runner).

Stored, in one run over the placements' nodes (the target's others were
asked for nothing): the kernel's results per placement as
``model.<benchmark>.<placement>`` (one label, the placement's folded node
set, per repetition), and the prediction as ``model.prediction.<placement>``
with metric ``profile.<id>`` (seconds per rank in the modelled calls), which
the ``placement-sensitive`` rule reads.
"""

from __future__ import annotations

import random
from itertools import product
from collections.abc import Callable, Sequence
from dataclasses import replace

from oddnode.core.model import Direction, LabelKind
from oddnode.parsers.base import ParsedOutput
from oddnode.readings.placement import (
    MODEL,
    PREDICTION,
    Candidate,
    ModelRun,
    Point,
    Selection,
    prediction_metric,
    predictions_by_repetition,
)
from oddnode.measure.runner import new_target_run, prepare, raw_reference
from oddnode.measure.set.jobs import collectives_job
from oddnode.measure.set.runner import PREPARE_TIMEOUT, SetRunSummary, run_set_rounds
from oddnode.readings.sets_series import set_series
from oddnode.store import ResultBatch, Store
from oddnode.reach.base import Target

DEFAULT_REPETITIONS = 5
# The kernel times each point this long per placement and repetition: ten
# batches of at least 10 ms fit, as in a set run.
DEFAULT_SECONDS_PER_SIZE = 0.2


def _point_times(parsed, points: Sequence[Point]) -> dict[Point, float]:
    """Seconds per call of each point in one kernel run (its median batch)."""
    times = {}
    for m in parsed.measurements:
        if not m.valid or not m.metric.startswith("time"):
            continue
        point = Point(m.benchmark, int(m.parameters["bytes"]))
        if point in points:
            times[point] = m.parameters["median_us"] * 1e-6
    return times


def measure(store: Store, target: Target, selection: Selection, placements: Sequence[Candidate], *,
            profile_id: int | None, repetitions: int = DEFAULT_REPETITIONS, seed: int = 0,
            seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE, rsh_agent: str | None = None,
            mpi_yield: bool = False, command: str = "oddnode model",
            on_progress: Callable[[int, int], None] | None = None) -> ModelRun:
    """Every point on every placement, ``repetitions`` times; each set run
    stored as it ends, the predictions at the end."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    points = selection.points
    kernels = sorted({p.kernel for p in points})
    sizes = sorted({p.size for p in points if p.kernel != "barrier"}) or [0]
    # The run is of the placements' nodes alone: the others of the target
    # were not asked for anything, and must not look as if they left nothing.
    used = list(dict.fromkeys(node for candidate in placements for node in candidate.members))
    target = replace(target, nodes=used)
    job = collectives_job(target, kernels, sizes, seconds_per_size, largest_set=max(len(c.members) for c in placements),
                          rsh_agent=rsh_agent, mpi_yield=mpi_yield)
    run_id = new_target_run(store, target, command)
    lead = prepare(target, job.build, PREPARE_TIMEOUT) if job.build is not None else 0.0
    result = ModelRun(run_id, list(placements))
    rng = random.Random(f"{seed}:model")
    plan = []
    for repetition in range(1, repetitions + 1):
        order = list(placements)
        rng.shuffle(order)
        plan += [(repetition, c) for c in order]
    # Each placement's run is a round of its own; as many rounds as one
    # launch takes share it (run_set_rounds), each stored under its placement.
    parsed: dict[str, ParsedOutput] = {}
    summary = SetRunSummary(run_id, MODEL, "placements")
    summaries = {c.name: SetRunSummary(run_id, MODEL, c.name) for c in placements}
    run_set_rounds(store, target, run_id, replace(job, parse=_keeping(job.parse, parsed)), MODEL,
                   [(repetition, [candidate.members]) for repetition, candidate in plan], summary, lead=lead,
                   on_progress=on_progress, round_summaries=[summaries[candidate.name] for _, candidate in plan])
    result.problems += [f"{name}: {problem}" for name, kept in summaries.items() for problem in kept.problems]
    result.problems += summary.notes
    for repetition, candidate in plan:
        run = parsed.get(raw_reference(set_series(MODEL, job.name, candidate.name), candidate.label, repetition))
        times = _point_times(run, points) if run is not None else {}
        if set(points) <= set(times):
            result.measured.setdefault(candidate.name, {})[repetition] = times
    result.predictions = predictions_by_repetition(selection, result.measured)
    _store_predictions(store, run_id, result, profile_id)
    return result


def _keeping(parse: Callable[[str, str], ParsedOutput], kept: dict[str, ParsedOutput]
             ) -> Callable[[str, str], ParsedOutput]:
    """``parse`` that also keeps what it returns, by the source it read (a
    set run's raw reference)."""
    def parse_and_keep(text: str, source: str) -> ParsedOutput:
        parsed = parse(text, source)
        kept[source] = parsed
        return parsed
    return parse_and_keep


def _store_predictions(store: Store, run_id: int, run: ModelRun, profile_id: int | None) -> None:
    batch = ResultBatch()
    by_name = {c.name: c for c in run.candidates}
    for primary, repetitions in run.predictions.items():
        candidate = by_name[primary]
        # Under every name that chose these nodes: `given` is also `striped`.
        for name, (repetition, seconds) in product((primary, *candidate.aliases), repetitions.items()):
            batch.add(set_series(MODEL, PREDICTION, name), candidate.label, seconds,
                      metric=prediction_metric(profile_id), unit="s", direction=Direction.LOWER,
                      label_kind=LabelKind.SET, repetition=repetition,
                      parameters={"members": list(candidate.members), "groups": list(candidate.groups),
                                  "aliases": list(candidate.aliases), "profile_id": profile_id,
                                  "nodes": len(candidate.members)})
    if len(batch):
        with store.transaction():
            store.add_results(run_id, batch)
