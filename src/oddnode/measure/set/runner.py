"""Run a parallel benchmark on sets of nodes, STAB's and SCAB's way.

``oddnode sets``: every set of K nodes of one ordering (sorted, shuffled;
with a topology packed, striped) runs at once, R repetitions, each set's result stored under its folded node
set.  ``oddnode scale``: one set per node count, each alone on the cluster,
for the sorted list and a shuffled one.

A set's benchmark is started on its first node, which launches the ranks on
all the members (Open MPI's ``mpirun`` over ssh, or inside a Slurm
allocation srun itself; one rank per node); that node's output is the
set's result.  Our collectives kernel under mpirun runs several rounds in
one launch instead, a rank on every node, each round split into its sets
(the kernel's plan): the launch's start, seconds on a large or busy
cluster, is paid once, not once per set and round.  A set that fails is
kept, invalid, with the reason; every member the transport cannot reach
then gets its own reason, so that the failed sets' common node is named,
not only the node that launched them.  A launch of several rounds that
fails leaves its unfinished rounds, and every later one, to a launch per
set, which pins the failure on its sets.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, ClassVar

from oddnode.reach.jobs import parse_runner_output, start_option, with_runner_options
from oddnode.core.model import LabelKind
from oddnode.core.nodes import fold
from oddnode.parsers.base import ParsedOutput, ParseError
from oddnode.measure.runner import (
    CutSizes,
    new_target_run,
    parsed_run,
    prepare,
    quote_detail,
    raw_outputs,
    raw_reference,
    start_lead,
    store_round,
    why_failed,
)
from oddnode.measure.estimate import (
    COLLECTIVE_BATCH_SECONDS,
    MPI_START_SECONDS,
    Estimate,
    rate_words,
    rounds_estimate,
    size_seconds,
)
from oddnode.measure.set import collectives
from oddnode.measure.set.collectives import moved_bytes, pairs_only
from oddnode.parsers.oddnode_mpi_collectives import benchmark_sizes, plan_sections
from oddnode.reach.launch import AUTO, MPIRUN, check_launcher
from oddnode.measure.set.jobs import DEFAULT_COMMAND_TIMEOUT, SetJob, collectives_job, command_job, mpi_launcher
from oddnode.readings.partition import (
    DEFAULT_SET_SIZE,
    SetPlan,
    check_ordering,
    check_topology,
    scale_counts,
    scale_plans,
    set_plans,
    topology_notes,
)
from oddnode.readings.sets_series import (
    LIST_ORDERINGS,
    ORDERINGS,
    SCALE,
    SETS,
    SHUFFLED,
    TOPOLOGY_ORDERINGS,
    set_series,
)
from oddnode.measure.steps import Step, option, StepContext, StepOutcome
from oddnode.store import ResultBatch, Store
from oddnode.reach.base import NodeResult, NodeStatus, Target

if TYPE_CHECKING:
    from oddnode.report import documents

# Seconds the benchmark's build may take on every node, and what a set's
# run may take beyond its own measurements: mpirun reaching every member
# over ssh, the MPI library's wire-up, the runner's start and report.
PREPARE_TIMEOUT = 360.0
LAUNCH_SLACK = 60.0
# Seconds each member of a failed set has to answer a `true`: who of them
# is down, for the failure's reasons.
PROBE_SECONDS = 20.0
# The most one launch of several rounds may run, by the job's bound of a
# round (its run_seconds) times its rounds: what an interrupt, a spent
# --max-minutes budget or a failed launch may cost of measuring, and the
# longest wait between two reports of progress.
MAX_LAUNCH_RUN_SECONDS = 300.0


@dataclass
class SetRunSummary:
    """What a set run stored: its run id, family (sets, scale), ordering, the
    notes of repetitions with nodes left out, and per set run its outcome."""

    run_id: int
    family: str
    ordering: str
    notes: list[str] = field(default_factory=list)
    # (repetition, folded set) -> (outcome: ok, invalid, failed; why or None)
    outcomes: dict[tuple[int, str], tuple[str, str | None]] = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        return sum(1 for o, _ in self.outcomes.values() if o == outcome)

    def to_json(self) -> documents.SetRun:
        return {"run_id": self.run_id, "family": self.family, "ordering": self.ordering, "notes": self.notes,
                "runs": [{"repetition": repetition, "set": label, "outcome": outcome, "why": why}
                         for (repetition, label), (outcome, why) in self.outcomes.items()]}

    @property
    def problems(self) -> list[str]:
        """One line per set run that failed or was invalid."""
        return [f"repetition {repetition}, {label}: {outcome}: {why}"
                for (repetition, label), (outcome, why) in self.outcomes.items() if outcome != "ok"]


def member_reasons(target: Target, members: Sequence[str]) -> dict[str, str]:
    """Why each member of a failed set may be behind the failure: those the
    transport cannot run a `true` on, with its reason."""
    results = target.transport.run(list(members), ["true"], timeout=PROBE_SECONDS)
    reasons = {}
    for node in members:
        result = results.get(node)
        if result is None:
            reasons[node] = "unreachable: the transport returned no result"
        elif result.status is not NodeStatus.OK:
            reasons[node] = f"{result.status.value}: {quote_detail(result.stderr) or f'exit status {result.exit_code}'}"
    return reasons


def _record_set(batch: ResultBatch, job: SetJob, family: str, ordering: str, members: Sequence[str],
                repetition: int, result: NodeResult | None, reasons: Callable[[], dict[str, str]], raw_ref: str,
                parse: Callable[[str, str], ParsedOutput]) -> tuple[str, str | None, dict[str, str]]:
    """Add one set run's rows (its output read by ``parse``): its outcome
    (ok, invalid, failed), why, and the members' own reasons when it failed."""
    label = fold(members)
    common = {"members": list(members), "nodes": len(members), "ordering": ordering, **job.parameters}
    parsed, problem = parsed_run(result, parse, raw_ref)
    if parsed is None:
        why = reasons()
        if job.launch_reasons is not None and result is not None:
            # What the launcher said of each member's rank, where the
            # transport found the member itself sound.
            why = {**job.launch_reasons(result.stdout, members), **why}
        for benchmark, metric, unit, direction in job.expected:
            batch.add(set_series(family, benchmark, ordering), label, None, metric=metric, unit=unit,
                      direction=direction, label_kind=LabelKind.SET, repetition=repetition, valid=False,
                      parameters={**common, "error": problem, "member_reasons": why}, raw_ref=raw_ref)
        return "failed", problem, why
    for m in parsed.measurements:
        batch.add(set_series(family, m.benchmark, ordering), label, m.value, metric=m.metric, unit=m.unit,
                  direction=m.direction, label_kind=LabelKind.SET, repetition=repetition, valid=m.valid,
                  parameters={**m.parameters, **common}, raw_ref=raw_ref)
    if parsed.valid:
        return "ok", None, {}
    return "invalid", "; ".join(parsed.problems), {}


Round = tuple[int, Sequence[Sequence[str]]]  # (repetition, its sets' members)


def run_set_rounds(store: Store, target: Target, run_id: int, job: SetJob, family: str,
                   rounds: Sequence[Round], summary: SetRunSummary, *,
                   lead: float, on_progress: Callable[[int, int], None] | None = None,
                   round_summaries: Sequence[SetRunSummary] | None = None) -> None:
    """Run rounds of sets, each round's sets at once, each round stored in
    one transaction as it ends: as many rounds as one launch takes in one
    launch where the job can (``rounds_argv``), else each set its own from
    one wall-clock moment.  Each round is stored under the ordering of
    ``summary`` and its outcomes kept there, or under that of its own of
    ``round_summaries`` and there (the model's placements, a round each);
    the notes go to ``summary``."""
    if round_summaries is not None and len(round_summaries) != len(rounds):
        raise ValueError(f"{len(round_summaries)} summaries for {len(rounds)} rounds")
    cuts = CutSizes()
    parse = cuts.noting(job.parse)

    def record(index: int, repetition: int, sets: Sequence[Sequence[str]],
               results: Mapping[str, NodeResult]) -> None:
        kept = summary if round_summaries is None else round_summaries[index]
        _record_round(store, target, run_id, job, family, kept.ordering, kept, parse, repetition, sets, results)

    pending, done = list(rounds), 0
    one_launch = job.rounds_argv is not None
    while pending:
        batch = _launch_batch(job, pending) if one_launch else []
        if len(batch) > 1:
            finished, failure = _run_in_one_launch(target, job, batch)
            if failure is not None:
                # The rest runs a launch per set, which pins the failure on its sets.
                one_launch = False
                unfinished = f"rounds {done + len(finished) + 1}-{done + len(batch)} of {len(rounds)}"
                summary.notes.append(f"{family}.{summary.ordering}: one launch of several rounds failed ({failure}); "
                                     f"{unfinished} and every later one ran a launch per set")
            for index, ((repetition, sets), results) in enumerate(zip(batch, finished), start=done):
                record(index, repetition, sets, results)
            del pending[:len(finished)]
            # Told once every finished round is stored: a spent budget stops here.
            for _ in finished:
                done += 1
                if on_progress is not None:
                    on_progress(done, len(rounds))
            continue
        repetition, sets = pending.pop(0)
        results, lead = _run_round_apart(target, job, sets, lead)
        record(done, repetition, sets, results)
        done += 1
        if on_progress is not None:
            on_progress(done, len(rounds))
    summary.notes += cuts.notes(f"{family}.{summary.ordering}")


def _rounds_per_launch(round_seconds: float) -> int:
    """The most rounds one launch takes, each bounded by ``round_seconds``."""
    return max(1, int(MAX_LAUNCH_RUN_SECONDS // max(round_seconds, 1e-9)))


def _batch_length(pairs: Sequence[bool], per_launch: int) -> int:
    """How many of the next rounds (of pairs or not, ``pairs``, at least
    one) one launch takes: up to ``per_launch``, all of the first one's kind
    (collectives.pairs_only: each set bound as a launch of it alone)."""
    return sum(1 for _ in itertools.takewhile(lambda kind: kind == pairs[0], pairs[:per_launch]))


def _launch_batch(job: SetJob, pending: Sequence[Round]) -> list[Round]:
    """The next rounds one launch runs."""
    per_launch = _rounds_per_launch(job.run_seconds)
    return list(pending[:_batch_length([pairs_only(sets) for _, sets in pending[:per_launch]], per_launch)])


def _run_round_apart(target: Target, job: SetJob, sets: Sequence[Sequence[str]], lead: float
                     ) -> tuple[Mapping[str, NodeResult], float]:
    """One round, each set its own launch, all from one wall-clock moment
    ``lead`` seconds ahead; the results and the next round's lead."""
    sent = time.time()
    jobs = {node: argv for members in sets for node, argv in job.commands(members).items()}
    # Processes of one round start together (the sets that contend, the
    # ranks of one set that the transport starts); one alone, as a set
    # that mpirun launches on a cluster of its own, starts at once.
    start = (start_option(sent + lead),) if len(jobs) > 1 else ()
    commands = {node: with_runner_options(argv, *start) for node, argv in jobs.items()}
    results = target.transport.run_each(commands, timeout=job.run_seconds + LAUNCH_SLACK + lead)
    return results, start_lead(results, sent)


def _run_in_one_launch(target: Target, job: SetJob, batch: Sequence[Round]
                       ) -> tuple[list[dict[str, NodeResult]], str | None]:
    """Several rounds in one launch from the target's first node; per round
    that finished, its sets' results as each set's first node would have
    given them (the runner's report, its output that set's section), and
    why the launch failed (None when it did not).  A launch whose job
    cannot be made (a plan too long for it) fails before it starts."""
    assert job.rounds_argv is not None
    first = target.nodes[0]
    source = f"{first}: one launch"
    try:
        argv = job.rounds_argv(target.nodes, [sets for _, sets in batch])
    except ValueError as error:
        return [], str(error)
    result = target.transport.run_each({first: argv}, timeout=len(batch) * job.run_seconds + LAUNCH_SLACK).get(first)
    if result is None or result.status is not NodeStatus.OK:
        return [], why_failed(result)
    try:
        report = parse_runner_output(source, result.stdout)
        sections = plan_sections(report.stdout, source, complete=report.returncode == 0)
    except ParseError as error:
        return [], quote_detail(str(error))
    finished = []
    for number, (_, sets) in enumerate(batch, start=1):
        if any((number, index) not in sections for index in range(1, len(sets) + 1)):
            break
        # Each section is a whole run of its set: the report a launch of that
        # set alone would have given.
        finished.append({members[0]: NodeResult(
            members[0], NodeStatus.OK,
            json.dumps({**asdict(report), "stdout": sections[(number, index)], "stderr": "", "returncode": 0}),
            "", 0, result.duration) for index, members in enumerate(sets, start=1)})
    if len(finished) == len(batch):
        return finished, None
    said = quote_detail(report.stderr)
    return finished, f"exit status {report.returncode}" + (f": {said}" if said else "")


def _record_round(store: Store, target: Target, run_id: int, job: SetJob, family: str, ordering: str,
                  summary: SetRunSummary, parse: Callable[[str, str], ParsedOutput], repetition: int,
                  sets: Sequence[Sequence[str]], results: Mapping[str, NodeResult]) -> None:
    """One round's sets from their first nodes' ``results``, stored in one
    transaction: their results, raw outputs and every node's status."""
    batch = ResultBatch()
    raw, statuses = [], []
    for members in sets:
        label, first = fold(members), members[0]
        raw_ref = raw_reference(set_series(family, job.name, ordering), label, repetition)
        outcome, why, reasons = _record_set(
            batch, job, family, ordering, members, repetition, results.get(first),
            lambda: member_reasons(target, members), raw_ref, parse)
        summary.outcomes[(repetition, label)] = (outcome, why)
        raw += raw_outputs(results, (first,), label)
        where = f"repetition {repetition}, set {label}"
        statuses += [(node, reason.split(":", 1)[0], f"{where}: {reason}") for node, reason in reasons.items()]
        if outcome != "ok" and first not in reasons:
            statuses.append((first, "ok" if outcome == "invalid" else _status(results.get(first)),
                             f"{where}: {why}"))
    store_round(store, run_id, set_series(family, job.name, ordering), batch, repetition, raw, statuses)


def _status(result: NodeResult | None) -> str:
    return result.status.value if result is not None else NodeStatus.UNREACHABLE.value


def _start(store: Store, target: Target, job: SetJob, command: str) -> tuple[int, float]:
    run_id = new_target_run(store, target, command)
    lead = prepare(target, job.build, PREPARE_TIMEOUT) if job.build is not None else 0.0
    return run_id, lead


def run_sets(store: Store, target: Target, job: SetJob, ordering: str, repetitions: int, *, size: int,
             seed: int = 0, command: str = "oddnode sets", groups: Mapping[str, str] | None = None,
             on_progress: Callable[[int, int], None] | None = None) -> SetRunSummary:
    """Every set of ``size`` nodes of one ordering, all at once, ``repetitions``
    times (shuffled: a new shuffle each time); every set's result stored.
    Packed and striped need ``groups``, node -> group (a topology)."""
    plans: list[SetPlan] = set_plans(target.nodes, size, ordering, repetitions, seed, groups)
    notes = topology_notes(target.nodes, groups or {}, ordering) if ordering in TOPOLOGY_ORDERINGS else []
    # A fixed order leaves out the same nodes every repetition: said once.
    notes += list(dict.fromkeys(p.describe() if ordering == SHUFFLED else _idle_note(p, repetitions)
                                for p in plans if p.idle))
    run_id, lead = _start(store, target, job, command)
    summary = SetRunSummary(run_id, SETS, ordering, notes=notes)
    run_set_rounds(store, target, run_id, job, SETS, [(p.repetition, p.sets) for p in plans], summary,
                   lead=lead, on_progress=on_progress)
    return summary


def _idle_note(plan: SetPlan, repetitions: int) -> str:
    """What a fixed order's nodes left out say, once for all its repetitions."""
    return (f"{plan.ordering}, every repetition: {fold(plan.idle)} sat out ({len(plan.idle)} nodes beyond "
            f"{len(plan.sets)} sets of {len(plan.sets[0]) if plan.sets else 0})")


def run_scale(store: Store, target: Target, job: SetJob, ordering: str, repetitions: int, *,
              counts: Sequence[int], seed: int = 0, command: str = "oddnode scale",
              on_progress: Callable[[int, int], None] | None = None) -> SetRunSummary:
    """One set per node count, alone on the cluster, for each repetition
    (shuffled: a new shuffle each repetition, its first ``count`` nodes)."""
    plans = scale_plans(target.nodes, counts, ordering, repetitions, seed)
    run_id, lead = _start(store, target, job, command)
    summary = SetRunSummary(run_id, SCALE, ordering)
    run_set_rounds(store, target, run_id, job, SCALE, [(r, [members]) for r, _, members in plans],
                   summary, lead=lead, on_progress=on_progress)
    return summary


def outcome_counts(summaries: Mapping[str, SetRunSummary]) -> dict[str, dict[str, int]]:
    """Per ordering, how many set runs ended ok, invalid and failed."""
    return {ordering: {o: s.count(o) for o in ("ok", "invalid", "failed")} for ordering, s in summaries.items()}


# --- the steps of a check's sets stage -----------------------------------------------


@dataclass(frozen=True)
class SetBenchmarkOptions:
    """What runs on every set: our collectives kernel (its benchmarks, message
    sizes and seconds per size) or, with ``command`` and ``parser``, an
    installed MPI application from a command template (see sets.jobs)."""

    # the orderings these options may name; sets add those by topology
    known_orderings: ClassVar[tuple[str, ...]] = LIST_ORDERINGS

    orderings: tuple[str, ...] = LIST_ORDERINGS
    seed: int = 0
    benchmarks: tuple[str, ...] = option(collectives.DEFAULT_BENCHMARKS,
                                         help="Our MPI kernel's benchmarks, comma-separated: sendrecv, allreduce, "
                                              "alltoall, bcast, barrier", shown_default="all but bcast")
    sizes: tuple[int, ...] = option(collectives.DEFAULT_SIZES, help="Message sizes in bytes, comma-separated",
                                    check="sizes", shown_default="0, 1 B to 4 MiB by powers of two")
    seconds_per_size: float = option(collectives.DEFAULT_SECONDS_PER_SIZE,
                                     help="Seconds each benchmark and message size is timed", check="seconds")
    command: str | None = option(None, help="Run an installed MPI application instead, from a template run on each "
                                            "set's first node: {hosts} (members, comma-separated), {ranks}, {first}, "
                                            "{hostfile} (a hostfile of the members); e.g. 'mpirun -np {ranks} --host "
                                            "{hosts} bt.B.x'. Needs --parser")
    parser: str | None = option(None, help="With --command: the parser of its output (npb, hpcc, imb, osu, ...; see "
                                           "oddnode import)")
    name: str | None = None  # what a command's failed runs are stored under (default: the parser's name)
    command_timeout: float = option(DEFAULT_COMMAND_TIMEOUT, help="With --command: seconds one run may take",
                                    check="seconds")
    # NAME=PATH: input files of the command's run directory
    files: tuple[str, ...] = option((), help="With --command: NAME=PATH, a file the run's directory gets "
                                             "(repeatable), e.g. hpccinf.txt=./hpccinf.txt", flag="file",
                                    repeatable=True)
    # the file the command writes its results to, when not its stdout
    output: str | None = option(None, help="With --command: the file the application writes its results to, parsed "
                                           "instead of its output (hpcc: hpccoutf.txt)", flag="output-file")
    mpi_yield: bool = False  # idle ranks yield their CPU: for capped or shared CPUs (the testbed's)
    # What starts our kernel's ranks: mpirun (inside an allocation too), srun
    # (the slurm transport), or auto (srun where srun and Open MPI share an
    # MPI plugin).  mpirun by default: on the testbed's Slurm about one srun
    # launch in fifteen waited out its timeout (docs/testbed.md).
    launcher: str = MPIRUN

    def __post_init__(self) -> None:
        for ordering in self.orderings:
            check_ordering(ordering, self.known_orderings)
        if not self.orderings or len(set(self.orderings)) != len(self.orderings):
            raise ValueError(f"orderings must be distinct names of {', '.join(self.known_orderings)}, "
                             f"got {self.orderings}")
        if (self.command is None) != (self.parser is None):
            raise ValueError("a command template needs a parser of its output, and a parser a command")
        check_launcher(self.launcher)
        if self.command is not None and self.launcher not in (AUTO, MPIRUN):
            raise ValueError(f"--launcher {self.launcher} starts our MPI kernel's ranks; a command template names "
                             "its own launcher (srun … {hosts})")

    def check_job(self) -> None:
        """Refuse a command, parser, input file or kernel argument the job
        could not run with (ValueError), before any run."""
        if self.command is not None:
            command_job(self.command, self.parser, name=self.name, timeout=self.command_timeout,
                        files=self.files, output=self.output)
        else:
            collectives.kernel_args(self.benchmarks, self.sizes, self.seconds_per_size)

    def run_estimate(self, step: str, counts: Sequence[int], repetitions: int,
                     link_bytes_per_s: float | None) -> Estimate | None:
        """How long the set runs of these member counts take, every ordering
        ``repetitions`` times, one run after the other (the sets of a round
        run at once: the largest stands for them); None for a command's,
        whose time is its own.  Under mpirun an ordering's rounds share a
        launch as far as MAX_LAUNCH_RUN_SECONDS allows (run_set_rounds)."""
        if self.command is not None:
            return None
        runs = list(counts) * len(self.orderings) * repetitions
        launch = MPI_START_SECONDS
        if self.launcher == MPIRUN and runs:
            bound = collectives.run_seconds(self.benchmarks, self.sizes, self.seconds_per_size, ranks=max(counts))
            launch = MPI_START_SECONDS * len(self.orderings) * _launches(
                [count == 2 for count in counts] * repetitions, _rounds_per_launch(bound)) / len(runs)
        per_run = [sum(size_seconds(moved_bytes(benchmark, size, ranks) / 2 / link_bytes_per_s if link_bytes_per_s
                                    else 0.0, self.seconds_per_size, COLLECTIVE_BATCH_SECONDS)
                       for benchmark in self.benchmarks for size in benchmark_sizes(benchmark, self.sizes))
                   for ranks in runs]
        what = (f"{len(self.benchmarks)} benchmarks × {len(self.sizes)} sizes at most {self.seconds_per_size:g} s "
                f"each, {rate_words(link_bytes_per_s)}")
        return rounds_estimate(step, len(runs), sum(per_run) / len(runs) if runs else 0.0, launch, what,
                               prepares=len(self.orderings))

    def job(self, target: Target, largest_set: int, rsh_agent: str | None = None) -> SetJob:
        """The job these options run on sets of up to ``largest_set`` of the
        target's nodes (``rsh_agent``: how mpirun reaches the members)."""
        if self.command is not None:
            return command_job(self.command, self.parser, name=self.name, timeout=self.command_timeout,
                               files=self.files, output=self.output)
        return collectives_job(target, self.benchmarks, self.sizes, self.seconds_per_size, largest_set=largest_set,
                               rsh_agent=rsh_agent, mpi_yield=self.mpi_yield,
                               launcher=mpi_launcher(target, self.launcher))


@dataclass(frozen=True)
class SetsOptions(SetBenchmarkOptions):
    """Sets of ``size`` nodes (a check makes them smaller when the cluster
    holds fewer than two sets of that size); packed and striped orderings
    take the topology recorded in the store."""

    known_orderings: ClassVar[tuple[str, ...]] = ORDERINGS

    size: int = option(DEFAULT_SET_SIZE, help="Nodes per set of the sets stage, fewer when the cluster holds "
                                              "fewer than two sets of that size")

    @property
    def needs_topology(self) -> bool:
        return any(o in TOPOLOGY_ORDERINGS for o in self.orderings)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.size < 2:
            raise ValueError(f"a set has at least 2 nodes, not {self.size}")


@dataclass(frozen=True)
class ScaleOptions(SetBenchmarkOptions):
    """The node counts of the curve (None: 2, 4, 8, … and all the nodes)."""

    counts: tuple[int, ...] | None = option(None, help="Node counts, comma-separated", check="counts",
                                            shown_default="2, 4, 8, ... and all the nodes")


def _launches(pairs: Sequence[bool], per_launch: int) -> int:
    """How many launches an ordering's rounds take, each round's sets of two
    or not (``pairs``), as run_set_rounds groups them (_batch_length)."""
    launches, start = 0, 0
    while start < len(pairs):
        launches, start = launches + 1, start + _batch_length(pairs[start:], per_launch)
    return launches


def check_set_size_for(nodes: int, size: int) -> tuple[int, str | None]:
    """The set size a check uses on ``nodes`` nodes: ``size``, or the largest
    that still makes two sets (a lone set is compared with nothing), and a
    note when it had to shrink."""
    if nodes >= 2 * size:
        return size, None
    chosen = max(2, nodes // 2)
    return chosen, f"sets of {chosen} nodes: {nodes} nodes make fewer than two sets of {size}"


def _ordering_note(step: str, summary: SetRunSummary, repetitions: int) -> str:
    runs = len(summary.outcomes)
    return (f"{step}: {repetitions} repetitions, {runs} set runs: {summary.count('ok')} valid, "
            f"{summary.count('invalid')} invalid, {summary.count('failed')} failed")


def run_orderings(context: StepContext, name: str, orderings: Sequence[str],
                  run: Callable[[str, str], SetRunSummary]) -> StepOutcome:
    """A set step's orderings one after the other, ``run(ordering, step)``
    each, every one recorded with the check once it has finished (as step
    ``name.ordering``): a resumed check runs again only the one under way."""
    notes = []
    for ordering in orderings:
        step = f"{name}.{ordering}"
        if not context.run_once(step):
            notes.append(f"{step}: finished by an earlier, interrupted invocation")
            continue
        context.observer.benchmark_started(step, 0, context.repetitions)
        summary = run(ordering, step)
        context.record(step, summary.run_id)
        notes.append(_ordering_note(step, summary, context.repetitions))
        notes += summary.notes
    return StepOutcome(notes=notes)


class SetsStep(Step):
    """STAB's parallel runs: every set of K nodes of each ordering at once, R times."""

    name = "sets"
    stage = "sets"
    options = SetsOptions
    series = (SETS,)
    min_nodes = 4  # two sets of two
    summary = ("MPI Sendrecv chain, Allreduce, Alltoall, Barrier on every set of K nodes, sorted and shuffled "
               "(with a topology also packed, striped)")

    def check(self, options: SetsOptions) -> None:
        options.check_job()

    def estimate(self, options: SetsOptions, nodes: int, repetitions: int,
                 link_bytes_per_s: float | None = None) -> Estimate | None:
        size, _ = check_set_size_for(nodes, options.size)
        if nodes < size:
            return None
        return options.run_estimate(self.name, [size], repetitions, link_bytes_per_s)

    def run(self, context: StepContext, options: SetsOptions) -> StepOutcome:
        size, note = check_set_size_for(len(context.target.nodes), options.size)
        # Packed and striped read the topology the check recorded (--topology);
        # refused before any ordering runs when there is none for these nodes.
        groups = context.store.load_topology() if options.needs_topology else None
        if options.needs_topology:
            check_topology(context.target.nodes, groups, next(o for o in options.orderings
                                                              if o in TOPOLOGY_ORDERINGS))
        job = options.job(context.target, size)
        outcome = run_orderings(context, self.name, options.orderings, lambda ordering, step: run_sets(
            context.store, context.target, job, ordering, context.repetitions, size=size, seed=options.seed,
            command=context.step_command(step), groups=groups, on_progress=context.progress(step)))
        if note:
            outcome.notes.insert(0, note)
        return outcome


class ScaleStep(Step):
    """SCAB: one set per node count, alone on the cluster, sorted and shuffled."""

    name = "scale"
    stage = "sets"
    options = ScaleOptions
    series = (SCALE,)
    default = False
    min_nodes = 3  # two counts at least
    summary = "SCAB's scaling curve: one set per node count 2, 4, 8, ..., N, sorted and shuffled"

    def check(self, options: ScaleOptions) -> None:
        options.check_job()

    def estimate(self, options: ScaleOptions, nodes: int, repetitions: int,
                 link_bytes_per_s: float | None = None) -> Estimate | None:
        try:
            counts = scale_counts(nodes, options.counts)
        except ValueError:
            return None
        return options.run_estimate(self.name, counts, repetitions, link_bytes_per_s)

    def run(self, context: StepContext, options: ScaleOptions) -> StepOutcome:
        counts = scale_counts(len(context.target.nodes), options.counts)
        job = options.job(context.target, max(counts))
        return run_orderings(context, self.name, options.orderings, lambda ordering, step: run_scale(
            context.store, context.target, job, ordering, context.repetitions, counts=counts, seed=options.seed,
            command=context.step_command(step), on_progress=context.progress(step)))
