"""Run a benchmark STAB's way: R repetitions, all nodes at once in each, every
run validated and stored, the best valid run per node analysed.

Each repetition is stored in its own transaction as soon as it ends, so an
interrupt (Ctrl-C, a lost allocation) keeps every finished repetition.  A node
that fails one repetition still runs the next ones: nothing it gave is lost,
and its troubles are kept per repetition in ``node_status``.

A synchronized benchmark (our kernels, fio, hpcc through the node runner) is
first prepared on every node -- built, or its tool found -- and each of its
repetitions then starts on every node at the same wall-clock moment, as an
MPI job would after a barrier: otherwise the nodes launched first run while
the last are still connecting, and on shared hardware (the testbed, a
shared memory bus or switch) their results differ by when they started,
not by what they are.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from oddnode.measure.benchmarks import BenchmarkSpec
from oddnode.reach.jobs import (
    PREPARE_OPTION,
    schedule_results,
    scheduled_argv,
    start_option,
    start_timing,
    with_runner_options,
)
from oddnode.core.model import DEFAULT_METRIC, Direction, LabelKind
from oddnode.parsers.base import ParsedOutput, ParseError, ToolUnavailable
from oddnode.store import ResultBatch, Store
from oddnode.reach.base import NodeResult, NodeStatus, Target

DEFAULT_REPETITIONS = 5  # STAB's default: enough for a best-of that shrugs off one noisy run
DEFAULT_TIMEOUT = 600.0  # seconds one repetition may take on a node, build included
# How much of a bad output a node-status detail quotes; an end of a pair or
# a member of a set less, as a round's status line may name several.
DETAIL_CHARS = 500
ROUND_DETAIL_CHARS = 300
# Configuration keys of a parsed run that are stored with each of its results:
# what the node really used (threads counted, affinity) and which build ran.
EFFECTIVE_KEYS = ("threads_counted", "proc_bind", "compiler", "cache_key", "cpu_model")
# A synchronized repetition is sent this long before its start: the time the
# slowest node took from sending to its runner starting, the last time,
# times LEAD_SAFETY plus LEAD_MARGIN (which covers what the runner does before
# it is ready: checking the compiler and the cached build), within
# [MIN_LEAD, MAX_LEAD] seconds.
LEAD_SAFETY = 1.5
LEAD_MARGIN = 0.5
MIN_LEAD = 1.0
MAX_LEAD = 300.0
# Outcome counts kept per node in a RunSummary; "unavailable": the node lacks
# the tool the benchmark runs (fio, hpcc).
OUTCOMES = ("ok", "invalid", "failed", "unreachable", "timeout", "unavailable")


@dataclass
class RunSummary:
    """What a benchmark run stored: its run id, the repetitions done, and per
    node how many repetitions ended in each outcome (see OUTCOMES)."""

    run_id: int
    repetitions: int
    per_node: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def unavailable_everywhere(self) -> bool:
        """No node has the tool: the benchmark was skipped, nobody failed it."""
        return self.repetitions > 0 and bool(self.per_node) and all(
            counts["unavailable"] == self.repetitions for counts in self.per_node.values()
        )


@dataclass(frozen=True)
class _NodeOutcome:
    status: str  # a node_status status: ok, failed, unreachable, timeout
    outcome: str  # one of OUTCOMES
    detail: str | None


def _failed_rows(batch: ResultBatch, spec: BenchmarkSpec, node: str, repetition: int,
                 reason: str, raw_ref: str) -> None:
    """A run that gave no numbers still leaves a row (value NULL, invalid)."""
    series = spec.series or ((spec.name, DEFAULT_METRIC, "", Direction.HIGHER),)
    for benchmark, metric, unit, direction in series:
        batch.add(benchmark, node, None, metric=metric, unit=unit, direction=direction,
                  label_kind=LabelKind.NODE, repetition=repetition, valid=False,
                  parameters={"error": reason}, raw_ref=raw_ref)


def raw_reference(benchmark: str, label: str, repetition: int) -> str:
    """The reference a run's stored rows give its raw output by, and the
    source its parser names in what it says."""
    return f"raw:{benchmark}:{label}:{repetition}"


def _record_node(batch: ResultBatch, spec: BenchmarkSpec, result: NodeResult, repetition: int) -> _NodeOutcome:
    """Add one node's rows for one repetition and say how it fared.  A
    synchronized run's rows say how late the node was for the common start
    (``start_late_s``): a late node ran while others were already going."""
    node = result.node
    raw_ref = raw_reference(spec.name, node, repetition)
    if result.status in (NodeStatus.UNREACHABLE, NodeStatus.TIMEOUT):
        detail = f"repetition {repetition}: {quote_detail(result.stderr, DETAIL_CHARS) or result.status.value}"
        return _NodeOutcome(result.status.value, result.status.value, detail)
    if result.status is NodeStatus.FAILED:
        reason = f"exited with status {result.exit_code}: {quote_detail(result.stderr, DETAIL_CHARS) or 'no message'}"
        _failed_rows(batch, spec, node, repetition, reason, raw_ref)
        return _NodeOutcome("failed", "failed", f"repetition {repetition}: {reason}")
    try:
        parsed = spec.parse(result.stdout, raw_ref)
    except ToolUnavailable as missing:
        return _NodeOutcome("ok", "unavailable", f"repetition {repetition}: {missing.detail}")
    except ParseError as problem:
        reason = quote_detail(str(problem), DETAIL_CHARS)
        _failed_rows(batch, spec, node, repetition, reason, raw_ref)
        return _NodeOutcome("failed", "failed", f"repetition {repetition}: {reason}")
    effective = {key: parsed.configuration[key] for key in EFFECTIVE_KEYS if key in parsed.configuration}
    timing = start_timing(result.stdout) if spec.synchronized else None
    if timing is not None and timing.start_at is not None:
        effective["start_late_s"] = round(timing.late, 3)
    for m in parsed.measurements:
        batch.add(m.benchmark, node, m.value, metric=m.metric, unit=m.unit, direction=m.direction,
                  label_kind=LabelKind.NODE, repetition=repetition, valid=parsed.valid and m.valid,
                  parameters={**m.parameters, **effective}, raw_ref=raw_ref)
    if parsed.valid:
        return _NodeOutcome("ok", "ok", None)
    # It answered and its numbers are stored (invalid); the analysis reports
    # them as accuracy failures, so the node itself counts as reachable.
    return _NodeOutcome("ok", "invalid", f"repetition {repetition}: {'; '.join(parsed.problems)}")


def _node_statuses(outcomes: dict[str, _NodeOutcome]) -> list[tuple[str, str, str | None]]:
    """node_status rows of one repetition.  A node without the benchmark's
    tool is in trouble only when other nodes have it: then it is the odd one
    out; when none has it, the benchmark is simply not run here."""
    have_tool = sum(outcome.outcome != "unavailable" for outcome in outcomes.values())
    rows = []
    for node, outcome in outcomes.items():
        if outcome.outcome == "unavailable" and have_tool:
            rows.append((node, "failed", f"{outcome.detail} (it ran on {have_tool} other nodes)"))
        else:
            rows.append((node, outcome.status, outcome.detail))
    return rows


def start_lead(results: Mapping[str, NodeResult], sent: float) -> float:
    """How long before its start to send the next synchronized repetition,
    from when the runners of the last one, sent at ``sent``, started (see
    LEAD_SAFETY)."""
    delays = [timing.launched - sent for timing in map(start_timing, (r.stdout for r in results.values()))
              if timing is not None]
    if not delays:
        return MIN_LEAD
    return min(MAX_LEAD, max(MIN_LEAD, LEAD_SAFETY * max(delays) + LEAD_MARGIN))


def new_target_run(store: Store, target: Target, command: str) -> int:
    """A new run of ``command`` over the target, in its own transaction; its
    source names the transport and the node set, and the target's node list
    is recorded as declared, in its order."""
    with store.transaction():
        return store.new_run(command, source=f"{target.transport.name}:{target.nodeset}", nodes=target.nodes)


def prepare(target: Target, argv: list[str], timeout: float) -> float:
    """Build a node runner argv's kernel (or find its tool) on every node;
    the lead of its first synchronized repetition.  What a node answers is
    not stored: a node that cannot build fails again, and is recorded, in
    the repetitions."""
    sent = time.time()
    results = target.transport.run(target.nodes, with_runner_options(argv, PREPARE_OPTION), timeout=timeout)
    return start_lead(results, sent)


def run_benchmark(
    store: Store,
    target: Target,
    spec: BenchmarkSpec,
    repetitions: int = DEFAULT_REPETITIONS,
    timeout: float = DEFAULT_TIMEOUT,
    on_progress: Callable[[int, int], None] | None = None,
    command: str = "oddnode run",
    run_id: int | None = None,
    start: int = 1,
) -> RunSummary:
    """Run ``spec`` ``repetitions`` times on every node of ``target`` at once,
    storing each repetition (results, raw outputs, node status under the
    benchmark's name) in one transaction; ``on_progress(done, total)`` after
    each one is stored.

    An interrupted run goes on with ``run_id`` and ``start``, the first
    repetition it lacks; the summary then counts the new repetitions only.
    """
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    if run_id is None:
        run_id = new_target_run(store, target, command)
    summary = RunSummary(run_id, 0, {node: dict.fromkeys(OUTCOMES, 0) for node in target.nodes})
    lead = prepare(target, spec.argv, timeout) if spec.synchronized else 0.0
    for repetition in range(start, repetitions + 1):
        argv = spec.argv
        sent = time.time()
        if spec.synchronized:
            argv = with_runner_options(argv, start_option(sent + lead))
        results = target.transport.run(target.nodes, argv, timeout=timeout + lead)
        if spec.synchronized:
            lead = start_lead(results, sent)
        batch = ResultBatch()
        outcomes: dict[str, _NodeOutcome] = {}
        raw: list[tuple[str, str, str]] = []
        for node in target.nodes:
            result = results.get(node) or NodeResult(
                node, NodeStatus.UNREACHABLE, "", "the transport returned no result for this node", None, 0.0
            )
            outcome = _record_node(batch, spec, result, repetition)
            outcomes[node] = outcome
            raw.append((node, result.stdout, result.stderr))
            summary.per_node[node][outcome.outcome] += 1
        statuses = _node_statuses(outcomes)
        with store.transaction():
            store.add_results(run_id, batch)
            for node, stdout, stderr in raw:
                store.add_raw_output(run_id, spec.name, node, repetition, stdout, stderr)
            store.add_node_status(run_id, spec.name, statuses)
        summary.repetitions = repetition - start + 1
        if on_progress is not None:
            on_progress(repetition, repetitions)
    return summary


# --- the rounds of pairs and sets: each end's run, parsed or why not, stored whole ----


def quote_detail(text: str, limit: int = ROUND_DETAIL_CHARS) -> str:
    """A node's message on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def why_failed(result: NodeResult | None) -> str:
    """What went wrong with one end of a pair, in one line."""
    if result is None:
        return "the transport returned no result"
    if result.status is NodeStatus.OK:
        return "ok"
    detail = quote_detail(result.stderr) or f"exit status {result.exit_code}"
    return f"{result.status.value}: {detail}"


def parsed_run(result: NodeResult | None, parse: Callable[[str, str], ParsedOutput], source: str
               ) -> tuple[ParsedOutput | None, str | None]:
    """A node's run of one of our kernels, parsed; or None and why it gave
    nothing to use."""
    if result is None or result.status is not NodeStatus.OK:
        return None, why_failed(result)
    try:
        return parse(result.stdout, source), None
    except ParseError as error:
        return None, quote_detail(str(error))


def parsed_client_run(results: Mapping[str, NodeResult], client: str, server: str,
                      parse: Callable[[str, str], ParsedOutput], raw_ref: str
                      ) -> tuple[ParsedOutput | None, str | None]:
    """A pair's client run, parsed; or None and why the pair failed: the
    client's trouble, and the server's when its run failed too."""
    parsed, problem = parsed_run(results.get(client), parse, raw_ref)
    if parsed is not None:
        return parsed, None
    problem = f"client {client}: {problem}"
    serve = results.get(server)
    if serve is not None and serve.status is not NodeStatus.OK:
        problem += f"; server {server}: {why_failed(serve)}"
    return None, problem


def transport_trouble(results: Mapping[str, NodeResult], nodes: Sequence[str],
                      where: str) -> list[tuple[str, str, str]]:
    """Node status rows for the nodes the transport could not run on."""
    rows = []
    for node in nodes:
        result = results.get(node)
        if result is None or result.status is not NodeStatus.OK:
            rows.append((node, result.status.value if result else "unreachable", f"{where}: {why_failed(result)}"))
    return rows


def raw_outputs(results: Mapping[str, NodeResult], nodes: Sequence[str], label: str) -> list[tuple[str, str, str]]:
    """Every node's output of a round, under ``label@node``."""
    return [(f"{label}@{node}", results[node].stdout if node in results else "",
             results[node].stderr if node in results else "") for node in nodes]


def store_round(store: Store, run_id: int, benchmark: str, batch: ResultBatch, repetition: int,
                raw: list[tuple[str, str, str]], statuses: list[tuple[str, str, str]]) -> None:
    """One round's results, raw outputs and node statuses, all or nothing."""
    with store.transaction():
        store.add_results(run_id, batch)
        for label, stdout, stderr in raw:
            store.add_raw_output(run_id, benchmark, label, repetition, stdout, stderr)
        store.add_node_status(run_id, benchmark, statuses)


# --- rounds sent to the nodes together ----------------------------------------------

# Rounds whose every process is a job of our node runner (the TCP kernels'
# clients, relays and servers) go to the nodes in batches: each node's jobs
# in a batch's rounds are one start of its runner (reach.jobs.scheduled_argv),
# and round i of a batch starts i slots after the first, whose start is the
# lead's as a single round's is.  A node's runner starts once a batch, not
# once a round: with ssh to many nodes, or on nodes whose CPUs are capped,
# that start takes longer than the measuring.  A slot is ROUND_SAFETY times
# the longest a round's measurements are expected or were seen to take,
# plus ROUND_MARGIN for the kernels' start and connections: a size's seconds
# are an upper bound its kernel keeps but for the batch under way, about a
# tenth of them on a sound link (kernels.md#time-budgets), so a fifth more
# leaves twice that.  A round that outlasts its slot (a link too slow for
# its sizes' seconds) makes the next one start while it still runs: said in
# the node status, and the next batch's slots fit it.  A batch holds at most
# BATCH_SECONDS of slots (Ctrl-C loses what the nodes measured of the batch
# under way; a --max-minutes budget is checked between batches) and
# MAX_BATCH_ROUNDS rounds (each round's job adds to the command line).
ROUND_SAFETY = 1.2
ROUND_MARGIN = 0.5
BATCH_SECONDS = 60.0
MAX_BATCH_ROUNDS = 40

# A round's jobs: each node's plain runner argv and its start (None: as
# soon as the node's job before it has ended).
RoundJobs = Mapping[str, tuple[float | None, Sequence[str]]]


def round_slot(measure_seconds: float) -> float:
    """The seconds between the starts of a batch's rounds (see ROUND_SAFETY)."""
    return ROUND_SAFETY * measure_seconds + ROUND_MARGIN


def rounds_per_batch(slot: float) -> int:
    """How many rounds of ``slot`` seconds a batch holds (see BATCH_SECONDS)."""
    return max(1, min(MAX_BATCH_ROUNDS, int(BATCH_SECONDS // slot)))


def run_scheduled_rounds(target: Target, rounds: Sequence[RoundJobs], timeout: float) -> list[dict[str, NodeResult]]:
    """Rounds sent to the nodes together, each node's jobs in them one start
    of its runner (one round: each job its own, with its start as the
    runner's option): each round's node results, as its jobs' own runs
    would have given them."""
    if len(rounds) == 1:
        commands = {node: list(argv) if start is None else with_runner_options(argv, start_option(start))
                    for node, (start, argv) in rounds[0].items()}
        return [target.transport.run_each(commands, timeout=timeout)]
    jobs: dict[str, list[tuple[float | None, Sequence[str]]]] = {}
    rounds_of: dict[str, list[int]] = {}
    for index, round_jobs in enumerate(rounds):
        for node, job in round_jobs.items():
            jobs.setdefault(node, []).append(job)
            rounds_of.setdefault(node, []).append(index)
    results = target.transport.run_each(
        {node: scheduled_argv(node_jobs) for node, node_jobs in jobs.items()},
        timeout=timeout)
    outcomes: list[dict[str, NodeResult]] = [{} for _ in rounds]
    for node, indices in rounds_of.items():
        if node in results:
            for index, result in zip(indices, schedule_results(results[node], len(indices))):
                outcomes[index][node] = result
    return outcomes


def run_round_batches(target: Target, rounds: int, jobs: Callable[[int, float, float], RoundJobs],
                      starters: Callable[[int], Sequence[str]],
                      record: Callable[[int, Mapping[str, NodeResult], Mapping[str, str]], None], *,
                      measure_seconds: float, session_seconds: float, connect_wait: float, slack: float,
                      lead: float, batches: bool = True,
                      on_progress: Callable[[int, int], None] | None = None) -> float:
    """Run ``rounds`` rounds, as many at once as a batch holds (one at a
    time unless ``batches``), from ``lead`` seconds ahead; returns the lead
    for the next synchronized round.

    ``jobs(index, start, wait)`` makes round ``index``'s jobs for its
    ``start``, ``wait`` being how long a job that runs as soon as it can
    waits for its partners (through that start and ``connect_wait``);
    ``starters(index)`` names the nodes held until the start, whose runs
    measure the round's length.  ``record(index, results, late)`` stores
    the round from its node results, ``late`` giving a line for each
    starter that began before the round before had ended; ``on_progress(done,
    total)`` follows each batch, once it is recorded.  A job's session lasts
    at most ``session_seconds``, and ``slack`` is what a round may take
    beyond its waits and sessions."""
    slot = round_slot(measure_seconds)
    done = 0
    while done < rounds:
        indices = range(done, min(rounds, done + (rounds_per_batch(slot) if batches else 1)))
        sent = time.time()
        starts = [sent + lead + position * slot for position in range(len(indices))]
        timeout = starts[-1] - sent + connect_wait + len(indices) * session_seconds + slack
        outcomes = run_scheduled_rounds(target, [jobs(index, start, start - sent + connect_wait)
                                                 for index, start in zip(indices, starts)], timeout)
        held = [starters(index) for index in indices]
        lead = start_lead({node: outcomes[0][node] for node in held[0] if node in outcomes[0]}, sent)
        late = late_starters(held, outcomes)
        for position, (index, results) in enumerate(zip(indices, outcomes)):
            record(index, results, {node: line for (at, node), line in late.items() if at == position})
        slot = max(slot, round_slot(longest_run(held, outcomes)))
        done = indices.stop
        if on_progress is not None:
            on_progress(done, rounds)
    return lead


def timed_runs(starters: Sequence[str], results: Mapping[str, NodeResult]) -> list[tuple[str, float, float]]:
    """(node, when it began, when it finished) for each of a round's
    ``starters`` (the nodes held until its start) whose report says both."""
    times = []
    for node in starters:
        timing = start_timing(results[node].stdout) if node in results else None
        if timing is not None and timing.finished is not None:
            times.append((node, max(timing.arrived, timing.start_at or timing.arrived), timing.finished))
    return times


def longest_run(starters: Sequence[Sequence[str]], outcomes: Sequence[Mapping[str, NodeResult]]) -> float:
    """The longest a starter of these rounds ran (0 if none said)."""
    return max((end - began for nodes, results in zip(starters, outcomes)
                for _, began, end in timed_runs(nodes, results)), default=0.0)


def late_starters(starters: Sequence[Sequence[str]], outcomes: Sequence[Mapping[str, NodeResult]]
                  ) -> dict[tuple[int, str], str]:
    """The starters of a batch's rounds, by (round, node), that began while
    a starter of the round before theirs still ran, with a line saying so:
    that round outlasted its slot."""
    late: dict[tuple[int, str], str] = {}
    for index in range(1, len(starters)):
        ended = max((end for _, _, end in timed_runs(starters[index - 1], outcomes[index - 1])), default=None)
        if ended is None:
            continue
        for node, began, _ in timed_runs(starters[index], outcomes[index]):
            if began < ended:
                late[index, node] = (f"began {ended - began:.2f} s before the round before it had ended, "
                                     "which outlasted its slot")
    return late


@dataclass
class CutSizes:
    """The message sizes that ran out of their time in a run of our pair or
    set kernels (a size's seconds are an upper bound; one that cannot time
    the batches its kernel wants in them is cut, its minimum and median
    resting on fewer samples): how many runs cut each size."""

    runs: Counter[int] = field(default_factory=Counter)

    def noting(self, parse: Callable[[str, str], ParsedOutput]) -> Callable[[str, str], ParsedOutput]:
        """``parse``, counting the sizes each parsed run says were cut."""
        def parse_and_note(text: str, source: str) -> ParsedOutput:
            parsed = parse(text, source)
            self.runs.update({m.parameters["bytes"] for m in parsed.measurements if m.parameters.get("cut_by_time")})
            return parsed
        return parse_and_note

    def notes(self, step: str, flag: str = "--seconds-per-size") -> list[str]:
        """One line naming the cut sizes, or none."""
        if not self.runs:
            return []
        sizes = ", ".join(f"{size} B in {count} run{'s' if count > 1 else ''}" for size, count in sorted(self.runs.items()))
        return [f"{step}: sizes cut by their time ({flag}) before the timed batches they want, their medians "
                f"resting on fewer samples: {sizes}"]
