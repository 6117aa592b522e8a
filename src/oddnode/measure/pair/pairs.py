"""Run a pair pattern STAB's way: every pair of the pattern pings at once
(or one pair at a time, ``serial``), R repetitions, every pair's result
stored under its pair label, so that the analysis can find the node or the
group common to the slow pairs.

In each round of pairs the first node of a pair runs the ping-pong client
against its partner, which serves (``oddnode.measure.pair.pingpong``); the
clients start together at one wall-clock moment, after the servers listen.
A pair whose client cannot reach its server is kept, invalid, with the
reason, and so is everything the other pairs measured.  Several rounds go
to the nodes at once, each node's part in them one start of its runner
(measure.runner.BATCH_SECONDS).

Series: ``pingpong.<pattern>`` with ``latency.<bytes>`` (us) and
``bandwidth.<bytes>`` (MB/s) per pair, and the least-squares fit of each
pair's times, ``fit.latency`` and ``fit.bandwidth``, over its sizes from
FIT_MIN_SIZE up (``poor_fit`` in its parameters when the line misses a
size by more than the fit's tolerance).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oddnode.readings.interconnect_series import MPI, PINGPONG, pattern_series
from oddnode.readings.fit import fit_latency_bandwidth
from oddnode.measure.estimate import MPI_START_SECONDS, Estimate, ping_seconds, rate_words, rounds_estimate
from oddnode.measure.pair.mpi_pingpong import mpi_ping_argv, parse_mpi_pingpong_run
from oddnode.readings.patterns import PairPlan, check_patterns, pair_label, pattern_pairs
from oddnode.measure.pair.pingpong import (
    DEFAULT_CONNECT_WAIT,
    DEFAULT_MESSAGE_SIZE,
    DEFAULT_SECONDS_PER_SIZE,
    DEFAULT_SIZES,
    DEFAULT_STREAM_SECONDS,
    parse_pingpong_run,
    ping_run_seconds,
    pingpong_ping_argv,
    pingpong_serve_argv,
    pingpong_stream_argv,
    stream_run_seconds,
)
from oddnode.core.model import Direction, LabelKind
from oddnode.parsers.base import ParsedOutput
from oddnode.measure.runner import (
    DEFAULT_REPETITIONS,
    CutSizes,
    RoundJobs,
    new_target_run,
    parsed_client_run,
    prepare,
    raw_outputs,
    raw_reference,
    run_round_batches,
    store_round,
    transport_trouble,
)
from oddnode.measure.steps import Step, option, StepContext, StepOutcome
from oddnode.store import ResultBatch, Store
from oddnode.reach.base import NodeResult, Target
from oddnode.core.units import canonical_unit

PAIRS_STAGE = "pairs"
# The TCP port every server of a round listens on (a node serves at most one
# client per round): below Linux's ephemeral range (32768-60999), so that no
# outgoing connection of the node holds it as its source port.
DEFAULT_PORT = 29_170
# The fit of a pair's times uses its sizes from this one up: below it the
# time is all latency and its slope is noise.
FIT_MIN_SIZE = 1024
# Seconds the kernel's build may take on every node; and what a round may
# take beyond its servers' wait and its clients' measurements (connecting,
# the runner's start, reporting back).
PREPARE_TIMEOUT = 360.0
ROUND_SLACK = 60.0
_US = canonical_unit("us")
_MB_PER_S = canonical_unit("MB/s")


@dataclass(frozen=True)
class PingPongOptions:
    """What each pair measures: message sizes (bytes), seconds per size,
    the servers' port and how long a client may take to connect."""

    sizes: tuple[int, ...] = option(tuple(DEFAULT_SIZES), help="Message sizes in bytes, comma-separated",
                                    check="sizes", shown_default="0, 1 B to 4 MiB by powers of two")
    seconds_per_size: float = option(DEFAULT_SECONDS_PER_SIZE, help="Seconds each message size is timed",
                                     check="seconds")
    port: int = option(DEFAULT_PORT, help="TCP port the servers listen on")
    connect_wait: float = DEFAULT_CONNECT_WAIT

    @property
    def run_seconds(self) -> float:
        """The longest a client's measurements may take (not its wait)."""
        return ping_run_seconds(self.sizes, self.seconds_per_size)

    @property
    def measure_seconds(self) -> float:
        """What a client's measurements take on a sound link: each size's seconds."""
        return len(self.sizes) * self.seconds_per_size


@dataclass(frozen=True)
class StreamOptions:
    """What each pair streams: message size (bytes), seconds, one way or
    both ways at once, the servers' port and the clients' connection wait."""

    message_size: int = option(DEFAULT_MESSAGE_SIZE, help="Bytes per write of each stream")
    seconds: float = option(DEFAULT_STREAM_SECONDS, help="Seconds each stream lasts", check="seconds")
    both: bool = option(False, help="Stream both ways at once (a pair's bandwidth is their sum)")
    port: int = option(DEFAULT_PORT, help="TCP port the servers listen on")
    connect_wait: float = DEFAULT_CONNECT_WAIT

    @property
    def run_seconds(self) -> float:
        """The longest a client's stream may take (not its wait)."""
        return stream_run_seconds(self.seconds, self.message_size)

    @property
    def measure_seconds(self) -> float:
        """What a client's stream takes: its seconds."""
        return self.seconds


@dataclass
class PairRunSummary:
    """What a pattern run stored: its run id, the plans of its repetitions
    (who paired with whom, who sat out), and per pair label how many
    repetitions ended in each outcome (ok, invalid, failed)."""

    run_id: int
    pattern: str
    plans: list[PairPlan] = field(default_factory=list)
    per_pair: dict[str, dict[str, int]] = field(default_factory=dict)
    cuts: CutSizes = field(default_factory=CutSizes)

    @property
    def notes(self) -> list[str]:
        """One line per repetition, saying who sat out when the count is odd,
        and one naming the sizes cut by their time."""
        return [plan.describe() for plan in self.plans if plan.idle] + self.cuts.notes(self.pattern)

    def to_json(self) -> dict:
        """The run as data: its id, pattern, notes, plans and per pair outcome counts."""
        return {"run_id": self.run_id, "pattern": self.pattern, "notes": self.notes,
                "plans": [plan.to_json() for plan in self.plans],
                "per_pair": {label: dict(counts) for label, counts in self.per_pair.items()}}


# The patterns the interconnect stage of a check runs: STAB's four, whose
# slow pairs together tell a weak node (common to all) from a weak uplink
# (slow only across groups).
CHECK_PATTERNS = ("sort", "cut", "fold", "shuffle")


# How one round records a pair: (batch, client, server, repetition, the
# round's node results, raw_ref) -> (outcome, why).
PairRecorder = Callable[[ResultBatch, str, str, int, dict[str, NodeResult], str], tuple[str, str | None]]


# The kernels a pattern run can use: the TCP one stores pingpong.sort, ...,
# the MPI one mpi.sort, ...
PAIR_KERNELS = ("tcp", "mpi")
# mpirun's start of the server's rank over ssh and the library's wire-up,
# beyond the kernel's own run.
MPI_LAUNCH_SECONDS = 60.0


# A network's name, as its series carry it (pingpong.sort@ib).
_NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
# What a host name or address may hold around the node's name: letters,
# digits, '.', '-', '_' and ':' (an IPv6 address).
_ADDRESS_TEXT = re.compile(r"[A-Za-z0-9._:-]*")
NODE_FIELD = "{node}"


@dataclass(frozen=True)
class Network:
    """A network of the site's besides the one node names reach (a second
    fabric, its IPoIB or Myrinet addresses): its name, and how a node's
    address on it is written from the node's name (``{node}-ib``,
    ``ib-{node}.cluster``), as /etc/hosts or DNS names the nodes there."""

    name: str
    template: str

    @classmethod
    def parse(cls, text: str) -> Network:
        """``NAME=TEMPLATE`` (``ib={node}-ib``); ValueError saying what is wrong."""
        name, sep, template = text.partition("=")
        if not sep or not _NETWORK_NAME.fullmatch(name):
            raise ValueError(f"a network is NAME=TEMPLATE (ib={NODE_FIELD}-ib), its name letters, digits, "
                             f"'-' and '_'; got {text!r}")
        around = template.split(NODE_FIELD)
        if len(around) != 2 or template.startswith("-") or not all(_ADDRESS_TEXT.fullmatch(part) for part in around):
            raise ValueError(f"network {name}'s address template must hold {NODE_FIELD} once, with letters, digits, "
                             f"'.', '-', '_' or ':' around it; got {template!r}")
        return cls(name, template)

    def address(self, node: str) -> str:
        """The node's host name or address on this network."""
        return self.template.replace(NODE_FIELD, node)


def pair_rounds(plan: PairPlan, serial: bool) -> list[list[tuple[str, str]]]:
    """Pairs that run together: all of them, or one at a time when asked
    or when pairs share a node (a user's pairs file)."""
    if serial or not plan.disjoint:
        return [[pair] for pair in plan.pairs]
    return [list(plan.pairs)]


def pattern_rounds(pattern: str, target: Target, repetitions: int, seed: int = 0, serial: bool = False,
                   pairs_file: Path | None = None) -> tuple[list[PairPlan], list[tuple[int, list[tuple[str, str]]]]]:
    """The plans of ``repetitions`` runs of ``pattern`` over the target's
    nodes, and their rounds of pairs as run_pair_rounds takes them."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    plans = [pattern_pairs(pattern, target.nodes, repetition, seed, pairs_file)
             for repetition in range(1, repetitions + 1)]
    return plans, [(plan.repetition, group) for plan in plans for group in pair_rounds(plan, serial)]


def _fit_rows(batch: ResultBatch, benchmark: str, label: str, parsed, repetition: int, raw_ref: str,
              extra: dict | None = None) -> None:
    """The pair's latency and bandwidth from the a + b*L line over its sizes."""
    points = [(m.parameters["bytes"], m.value) for m in parsed.measurements
              if m.metric.startswith("latency.") and m.parameters["bytes"] >= FIT_MIN_SIZE]
    if len(points) < 2:
        return
    try:
        fit = fit_latency_bandwidth([s for s, _ in points], [t for _, t in points])
    except ValueError:
        return
    # A poor fit (a protocol switch inside the range) is said in the
    # parameters, not made invalid: the times it rests on are sound, and
    # pairs are compared on the same line.
    parameters = {"min_size": fit.size_range[0], "max_size": fit.size_range[1], "poor_fit": fit.poor,
                  "max_relative_error": fit.max_relative_error, **({"fit_problem": fit.reason} if fit.reason else {}),
                  **(extra or {})}
    valid = parsed.valid
    # A line with no positive intercept says nothing of the latency (sizes all
    # large, or the first ones riding a shaper's burst): no latency row, rather
    # than an invalid one that would read as a failed accuracy check.
    if fit.latency_us > 0:
        batch.add(benchmark, label, fit.latency_us, metric="fit.latency", unit=_US, direction=Direction.LOWER,
                  label_kind=LabelKind.PAIR, repetition=repetition, valid=valid,
                  parameters=parameters, raw_ref=raw_ref)
    if fit.bandwidth_mb_s is not None:
        batch.add(benchmark, label, fit.bandwidth_mb_s, metric="fit.bandwidth", unit=_MB_PER_S,
                  direction=Direction.HIGHER, label_kind=LabelKind.PAIR, repetition=repetition, valid=valid,
                  parameters=parameters, raw_ref=raw_ref)


def _record_pair(batch: ResultBatch, benchmark: str, client: str, server: str, repetition: int,
                 results: dict[str, NodeResult], sizes: Sequence[int], raw_ref: str,
                 extra: dict | None = None, parse: Callable[[str, str], ParsedOutput] = parse_pingpong_run
                 ) -> tuple[str, str | None]:
    """Add one pair's rows; its outcome (ok, invalid, failed) and why."""
    label = pair_label(client, server)
    parsed, problem = parsed_client_run(results, client, server, parse, raw_ref)
    if parsed is None:
        for size in sizes:
            metrics = [("latency", _US, Direction.LOWER)] + ([("bandwidth", _MB_PER_S, Direction.HIGHER)] if size else [])
            for metric, unit, direction in metrics:
                batch.add(benchmark, label, None, metric=f"{metric}.{size}", unit=unit, direction=direction,
                          label_kind=LabelKind.PAIR, repetition=repetition, valid=False,
                          parameters={"error": problem, **(extra or {})}, raw_ref=raw_ref)
        return "failed", problem
    for m in parsed.measurements:
        batch.add(benchmark, label, m.value, metric=m.metric, unit=m.unit, direction=m.direction,
                  label_kind=LabelKind.PAIR, repetition=repetition, valid=m.valid,
                  parameters={**m.parameters, "client": client, "server": server, **(extra or {})},
                  raw_ref=raw_ref)
    _fit_rows(batch, benchmark, label, parsed, repetition, raw_ref, extra)
    if parsed.valid:
        return "ok", None
    return "invalid", "; ".join(parsed.problems)


def run_pair_rounds(
    store: Store,
    target: Target,
    run_id: int,
    benchmark: str,
    rounds: Sequence[tuple[int, Sequence[tuple[str, str]]]],
    *,
    client_argv: Callable[[str, str], list[str]],
    session_seconds: float,
    measure_seconds: float,
    record: PairRecorder,
    port: int,
    connect_wait: float,
    lead: float,
    per_pair: dict[str, dict[str, int]] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    serve: bool = True,
) -> float:
    """Run rounds of pairs, each round's pairs at once, storing each round in
    one transaction and calling ``on_progress(done, total)`` once the rounds
    sent together are stored; returns the lead for the next synchronized
    round.

    ``rounds`` are (repetition, pairs); in a pair the first node is the client,
    running ``client_argv(client, server)`` for about ``measure_seconds``,
    the second serves one session of at most ``session_seconds`` (unless not
    ``serve``: the client's command starts its partner itself, as mpirun
    does, and each round goes to the nodes alone; otherwise rounds go in
    batches, see measure.runner.BATCH_SECONDS).  ``record(batch, client,
    server, repetition, results, raw_ref)`` adds a pair's rows and returns
    its outcome (ok, invalid, failed) and why, counted in ``per_pair``.
    """
    # A client's argv by server (the TCP kernel's depends on the server
    # only), or by pair when the client starts its partner.
    commands_of: dict[str | tuple[str, str], list[str]] = {}

    def client_command(client: str, server: str) -> list[str]:
        key = server if serve else (client, server)
        if key not in commands_of:
            commands_of[key] = client_argv(client, server)
        return commands_of[key]

    def record_round(index: int, results: Mapping[str, NodeResult], late: Mapping[str, str]) -> None:
        repetition, group = rounds[index]
        batch = ResultBatch()
        statuses, raw = [], []
        for client, server in group:
            label = pair_label(client, server)
            raw_ref = raw_reference(benchmark, label, repetition)
            outcome, problem = record(batch, client, server, repetition, results, raw_ref)
            if per_pair is not None:
                counts = per_pair.setdefault(label, {"ok": 0, "invalid": 0, "failed": 0})
                counts[outcome] += 1
            where = f"repetition {repetition}, pair {label}"
            ran = (client, server) if serve else (client,)
            raw += raw_outputs(results, ran, label)
            statuses += transport_trouble(results, ran, where)
            if problem is not None and outcome == "invalid":
                statuses.append((client, "ok", f"{where}: {problem}"))
            if client in late:
                statuses.append((client, "ok", f"{where}: {late[client]}"))
        store_round(store, run_id, benchmark, batch, repetition, raw, statuses)

    # Servers wait for their client through its round's start and its
    # connection; clients have their wait after the start.
    return run_round_batches(
        target, len(rounds),
        lambda index, start, wait: _round_jobs(rounds[index][1], start, wait, client_command, port,
                                               session_seconds, serve),
        lambda index: [client for client, _ in rounds[index][1]], record_round,
        measure_seconds=measure_seconds, session_seconds=session_seconds, connect_wait=connect_wait,
        slack=ROUND_SLACK, lead=lead, batches=serve, on_progress=on_progress)


def _round_jobs(group: Sequence[tuple[str, str]], start: float, serve_wait: float,
                client_command: Callable[[str, str], list[str]], port: int, session_seconds: float,
                serve: bool) -> RoundJobs:
    """A round's jobs: each client held until the round's start; each
    server (unless the client starts its partner) as soon as its node can,
    waiting ``serve_wait`` for its client."""
    jobs: dict[str, tuple[float | None, list[str]]] = {}
    for client, server in group:
        jobs[client] = (start, client_command(client, server))
    if serve:
        server_argv = pingpong_serve_argv(port, serve_wait, session_seconds=session_seconds)
        jobs.update((server, (None, server_argv)) for _, server in group)
    return jobs


def ping_recorder(benchmark: str, sizes: Sequence[int], parameters: Callable[[int, str, str], dict] | None = None,
                  parse: Callable[[str, str], ParsedOutput] = parse_pingpong_run) -> PairRecorder:
    """The recorder of ping rounds: every size's latency and bandwidth and the
    pair's fit, with ``parameters(repetition, client, server)`` added to each
    row; ``parse`` reads the client's run (the TCP kernel's by default)."""
    def record(batch: ResultBatch, client: str, server: str, repetition: int, results: dict[str, NodeResult],
               raw_ref: str) -> tuple[str, str | None]:
        extra = parameters(repetition, client, server) if parameters is not None else {}
        return _record_pair(batch, benchmark, client, server, repetition, results, sizes, raw_ref, extra, parse)
    return record


def ping_client_argv(options: PingPongOptions, network: Network | None = None) -> Callable[[str, str], list[str]]:
    """The argv of a ping client against a server, by (client, server): to
    the server's name, or to its address on ``network``."""
    def argv(_: str, server: str) -> list[str]:
        host = network.address(server) if network is not None else server
        return pingpong_ping_argv(host, options.port, list(options.sizes), options.seconds_per_size,
                                  options.connect_wait)
    return argv


def mpi_client_argv(options: PingPongOptions, rsh_agent: str | None = None,
                    mpi_yield: bool = False) -> Callable[[str, str], list[str]]:
    """The argv, on the client, of the MPI kernel's two ranks: one there, one
    on the server (started by mpirun over ``rsh_agent``, ssh by default;
    ``mpi_yield``: idle ranks yield their CPU, for capped or shared CPUs)."""
    return lambda client, server: mpi_ping_argv(client, server, list(options.sizes), options.seconds_per_size,
                                                rsh_agent=rsh_agent, yield_when_idle=mpi_yield)


def stream_client_argv(options: StreamOptions) -> Callable[[str, str], list[str]]:
    """The argv of a stream client against a server, by (client, server)."""
    return lambda _, server: pingpong_stream_argv(server, options.port, options.message_size, options.seconds,
                                                  options.both, options.connect_wait)


def run_pairs(
    store: Store,
    target: Target,
    pattern: str,
    repetitions: int = DEFAULT_REPETITIONS,
    *,
    options: PingPongOptions = PingPongOptions(),
    seed: int = 0,
    serial: bool = False,
    pairs_file: Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    command: str = "oddnode pairs",
    kernel: str = "tcp",
    rsh_agent: str | None = None,
    mpi_yield: bool = False,
    network: Network | None = None,
) -> PairRunSummary:
    """Run ``pattern`` over the target's nodes ``repetitions`` times and store
    every pair's results, raw outputs and node troubles, one transaction
    per round of pairs; ``on_progress(done, total)`` after each round.
    ``kernel``: ``tcp``, our TCP ping-pong (series pingpong.<pattern>), or
    ``mpi``, our MPI one started by mpirun on the client (mpi.<pattern>;
    mpirun reaches the server over ``rsh_agent``; ``mpi_yield``: its idle
    ranks yield their CPU, for nodes whose CPUs are capped or shared).
    ``network``: the TCP client reaches each server at its address there,
    and the series is that network's (pingpong.<pattern>@<network>)."""
    if kernel not in PAIR_KERNELS:
        raise ValueError(f"the pair kernel is {' or '.join(PAIR_KERNELS)}, not {kernel!r}")
    if network is not None and kernel != "tcp":
        raise ValueError(f"--network {network.name} is for the TCP kernel: MPI chooses its own network "
                         "(Open MPI's btl_tcp_if_include or its UCX settings)")
    plans, rounds = pattern_rounds(pattern, target, repetitions, seed, serial, pairs_file)
    run_id = new_target_run(store, target, command)
    summary = PairRunSummary(run_id, pattern, plans)
    mpi = kernel == "mpi"
    if mpi:
        benchmark, client_argv = pattern_series(MPI, pattern), mpi_client_argv(options, rsh_agent, mpi_yield)
        # Every node builds the kernel: mpirun starts the server's rank from its build.
        build = client_argv(target.nodes[0], target.nodes[-1])
    else:
        benchmark = pattern_series(PINGPONG, pattern, network.name if network is not None else None)
        client_argv = ping_client_argv(options, network)
        # Both ends run one build of the kernel: building it for the server builds it.
        build = pingpong_serve_argv(options.port)
    lead = prepare(target, build, PREPARE_TIMEOUT)
    parse = summary.cuts.noting(parse_mpi_pingpong_run if mpi else parse_pingpong_run)
    record = ping_recorder(benchmark, list(options.sizes), parse=parse)
    run_pair_rounds(store, target, run_id, benchmark, rounds, client_argv=client_argv,
                    session_seconds=options.run_seconds + (MPI_LAUNCH_SECONDS if mpi else 0.0),
                    measure_seconds=options.measure_seconds, record=record, port=options.port,
                    connect_wait=options.connect_wait, lead=lead, per_pair=summary.per_pair, on_progress=on_progress,
                    serve=not mpi)
    return summary


@dataclass(frozen=True)
class PairsOptions(PingPongOptions):
    """The pairs step's pair patterns, and what each pair measures."""

    patterns: tuple[str, ...] = option(CHECK_PATTERNS, help="Pair patterns of the interconnect stage")
    network: str | None = option(
        None, help="Another network of the site's, NAME=TEMPLATE: each server reached at the host name the template "
                   "writes from its name ('ib={node}-ib'); the series are that network's (pingpong.sort@ib)",
        check="network", shown_default="the one node names reach")

    def __post_init__(self) -> None:
        check_patterns(self.patterns, "check's pair patterns")
        if self.network is not None:
            Network.parse(self.network)

    @property
    def over(self) -> Network | None:
        """The network the pairs measure, None for the one node names reach."""
        return Network.parse(self.network) if self.network is not None else None


class PairsStep(Step):
    """Ping-pong in each of the check's pair patterns, R times; each pattern
    is recorded with the check once it has finished, so a resumed check runs
    again only the one under way (an interrupted pattern's stored
    repetitions stay, as measurements of the same pairs)."""

    name = "pairs"
    stage = "interconnect"
    options = PairsOptions
    series = (PINGPONG, MPI)
    min_nodes = 2
    summary = "TCP ping-pong latency and bandwidth in STAB's pair patterns (sort, cut, fold, shuffle)"

    def estimate(self, options: PairsOptions, nodes: int, repetitions: int,
                 link_bytes_per_s: float | None = None) -> Estimate | None:
        return pairs_estimate(self.name, options, len(options.patterns), nodes, repetitions, link_bytes_per_s)

    def run(self, context: StepContext, options: PairsOptions) -> StepOutcome:
        return run_patterns(context, self.name, options.patterns, lambda pattern, step: run_pairs(
            context.store, context.target, pattern, context.repetitions, options=options,
            command=context.step_command(step), on_progress=context.progress(step), network=options.over))


def pairs_estimate(step: str, options: PingPongOptions, patterns: int, nodes: int, repetitions: int,
                   link_bytes_per_s: float | None = None, *, serial: bool = False, kernel: str = "tcp") -> Estimate:
    """How long ``patterns`` patterns of ping-pong take, ``repetitions``
    each, every pair of a pattern at once (``serial``: one at a time)."""
    pairs = nodes // 2
    rounds = patterns * repetitions * (pairs if serial else 1) if pairs else 0
    per_round = ping_seconds(options.sizes, options.seconds_per_size, link_bytes_per_s)
    launch = MPI_START_SECONDS if kernel == "mpi" else 0.0
    return rounds_estimate(step, rounds, per_round, launch,
                           f"{len(options.sizes)} sizes at most {options.seconds_per_size:g} s each, "
                           f"{rate_words(link_bytes_per_s)}", prepares=patterns)


def run_patterns(context: StepContext, name: str, patterns: Sequence[str],
                 run: Callable[[str, str], PairRunSummary]) -> StepOutcome:
    """A pair step's patterns one after the other, ``run(pattern, step)``
    each, every one recorded with the check once it has finished (as step
    ``name.pattern``): a resumed check runs again only the one under way."""
    notes = []
    wanted = context.repetitions
    for pattern in patterns:
        step = f"{name}.{pattern}"
        if not context.run_once(step):
            notes.append(f"{step}: finished by an earlier, interrupted invocation")
            continue
        context.observer.benchmark_started(step, 0, wanted)
        summary = run(pattern, step)
        context.record(step, summary.run_id)
        good = sum(counts["ok"] > 0 for counts in summary.per_pair.values())
        notes.append(f"{step}: {wanted} repetitions, {good} of {len(summary.per_pair)} pairs gave valid results")
        notes += list(dict.fromkeys(summary.notes))
    return StepOutcome(notes=notes)
