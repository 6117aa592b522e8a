"""Run a pair pattern STAB's way: every pair of the pattern pings at once
(or one pair at a time, ``serial``), R repetitions, every pair's result
stored under its pair label, so that the analysis can find the node or the
group common to the slow pairs.

In each round of pairs the first node of a pair runs the ping-pong client
against its partner, which serves (``oddnode.interconnect.pingpong``); the
clients start together at one wall-clock moment, after the servers listen.
A pair whose client cannot reach its server is kept, invalid, with the
reason, and so is everything the other pairs measured.

Series: ``pingpong.<pattern>`` with ``latency.<bytes>`` (us) and
``bandwidth.<bytes>`` (MB/s) per pair, and the least-squares fit of each
pair's times, ``fit.latency`` and ``fit.bandwidth``, over its sizes from
FIT_MIN_SIZE up (``poor_fit`` in its parameters when the line misses a
size by more than the fit's tolerance).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oddnode.interconnect.fit import fit_latency_bandwidth
from oddnode.interconnect.patterns import PairPlan, pair_label, pattern_pairs
from oddnode.interconnect.pingpong import (
    DEFAULT_CONNECT_WAIT,
    DEFAULT_SECONDS_PER_SIZE,
    DEFAULT_SIZES,
    parse_pingpong_run,
    ping_run_seconds,
    pingpong_ping_argv,
    pingpong_serve_argv,
)
from oddnode.kernels import start_option, with_runner_options
from oddnode.model import Direction, LabelKind
from oddnode.parsers.base import ParseError
from oddnode.runner import DEFAULT_REPETITIONS, prepare, start_lead
from oddnode.store import ResultBatch, Store
from oddnode.transport.base import NodeResult, NodeStatus, Target
from oddnode.units import canonical_unit

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
# How much of a failing node's message a node-status detail quotes.
DETAIL_CHARS = 300
_US = canonical_unit("us")
_MB_PER_S = canonical_unit("MB/s")


@dataclass(frozen=True)
class PingPongOptions:
    """What each pair measures: message sizes (bytes), seconds per size,
    the servers' port and how long a client may take to connect."""

    sizes: tuple[int, ...] = tuple(DEFAULT_SIZES)
    seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE
    port: int = DEFAULT_PORT
    connect_wait: float = DEFAULT_CONNECT_WAIT

    @property
    def run_seconds(self) -> float:
        """The longest a client's measurements may take (not its wait)."""
        return ping_run_seconds(self.sizes, self.seconds_per_size)


@dataclass
class PairRunSummary:
    """What a pattern run stored: its run id, the plans of its repetitions
    (who paired with whom, who sat out), and per pair label how many
    repetitions ended in each outcome (ok, invalid, failed)."""

    run_id: int
    pattern: str
    plans: list[PairPlan] = field(default_factory=list)
    per_pair: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def notes(self) -> list[str]:
        """One line per repetition, saying who sat out when the count is odd."""
        return [plan.describe() for plan in self.plans if plan.idle]


def pattern_benchmark(pattern: str) -> str:
    return f"pingpong.{pattern}"


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "..."


def _why(result: NodeResult | None) -> str:
    """What went wrong with one end of a pair, in one line."""
    if result is None:
        return "the transport returned no result"
    if result.status is NodeStatus.OK:
        return "ok"
    detail = _quote(result.stderr) or f"exit status {result.exit_code}"
    return f"{result.status.value}: {detail}"


def _rounds(plan: PairPlan, serial: bool) -> list[list[tuple[str, str]]]:
    """Pairs that run together: all of them, or one at a time when asked
    or when pairs share a node (a user's pairs file)."""
    if serial or not plan.disjoint:
        return [[pair] for pair in plan.pairs]
    return [list(plan.pairs)]


def _fit_rows(batch: ResultBatch, benchmark: str, label: str, parsed, repetition: int, raw_ref: str) -> None:
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
                  "max_relative_error": fit.max_relative_error, **({"fit_problem": fit.reason} if fit.reason else {})}
    valid = parsed.valid
    batch.add(benchmark, label, fit.latency_us, metric="fit.latency", unit=_US, direction=Direction.LOWER,
              label_kind=LabelKind.PAIR, repetition=repetition, valid=valid and fit.latency_us > 0,
              parameters=parameters, raw_ref=raw_ref)
    if fit.bandwidth_mb_s is not None:
        batch.add(benchmark, label, fit.bandwidth_mb_s, metric="fit.bandwidth", unit=_MB_PER_S,
                  direction=Direction.HIGHER, label_kind=LabelKind.PAIR, repetition=repetition, valid=valid,
                  parameters=parameters, raw_ref=raw_ref)


def _record_pair(batch: ResultBatch, benchmark: str, client: str, server: str, repetition: int,
                 results: dict[str, NodeResult], sizes: Sequence[int], raw_ref: str) -> tuple[str, str | None]:
    """Add one pair's rows; its outcome (ok, invalid, failed) and why."""
    label = pair_label(client, server)
    ping, serve = results.get(client), results.get(server)
    problem = None
    if ping is None or ping.status is not NodeStatus.OK:
        problem = f"client {client}: {_why(ping)}"
    else:
        try:
            parsed = parse_pingpong_run(ping.stdout, raw_ref)
        except ParseError as error:
            problem = f"client {client}: {_quote(str(error))}"
    if problem is not None:
        if serve is None or serve.status is not NodeStatus.OK:
            problem += f"; server {server}: {_why(serve)}"
        for size in sizes:
            metrics = [("latency", _US, Direction.LOWER)] + ([("bandwidth", _MB_PER_S, Direction.HIGHER)] if size else [])
            for metric, unit, direction in metrics:
                batch.add(benchmark, label, None, metric=f"{metric}.{size}", unit=unit, direction=direction,
                          label_kind=LabelKind.PAIR, repetition=repetition, valid=False,
                          parameters={"error": problem}, raw_ref=raw_ref)
        return "failed", problem
    for m in parsed.measurements:
        batch.add(benchmark, label, m.value, metric=m.metric, unit=m.unit, direction=m.direction,
                  label_kind=LabelKind.PAIR, repetition=repetition, valid=m.valid,
                  parameters={**m.parameters, "client": client, "server": server}, raw_ref=raw_ref)
    _fit_rows(batch, benchmark, label, parsed, repetition, raw_ref)
    if parsed.valid:
        return "ok", None
    return "invalid", "; ".join(parsed.problems)


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
) -> PairRunSummary:
    """Run ``pattern`` over the target's nodes ``repetitions`` times and store
    every pair's results, raw outputs and node troubles, one transaction
    per round of pairs; ``on_progress(done, total)`` after each round."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    plans = [pattern_pairs(pattern, target.nodes, repetition, seed, pairs_file)
             for repetition in range(1, repetitions + 1)]
    rounds = [(plan.repetition, group) for plan in plans for group in _rounds(plan, serial)]
    with store.transaction():
        run_id = store.new_run(command, source=f"{target.transport.name}:{target.nodeset}")
    benchmark = pattern_benchmark(pattern)
    summary = PairRunSummary(run_id, pattern, plans)
    sizes = list(options.sizes)
    # Servers wait for their client through the clients' common start and
    # connection; clients have their wait after the start.
    client_argv: dict[str, list[str]] = {}
    # Both ends run one build of the kernel: building it for the server builds it.
    lead = prepare(target, pingpong_serve_argv(options.port), PREPARE_TIMEOUT)
    for done, (repetition, group) in enumerate(rounds, start=1):
        serve_wait = lead + options.connect_wait
        serve = pingpong_serve_argv(options.port, serve_wait, session_seconds=options.run_seconds)
        sent = time.time()
        commands = {}
        for client, server in group:
            if server not in client_argv:
                client_argv[server] = pingpong_ping_argv(server, options.port, sizes, options.seconds_per_size,
                                                         options.connect_wait)
            commands[client] = with_runner_options(client_argv[server], start_option(sent + lead))
            commands[server] = serve
        timeout = serve_wait + options.run_seconds + ROUND_SLACK
        results = target.transport.run_each(commands, timeout=timeout)
        lead = start_lead({c: results[c] for c, _ in group if c in results}, sent)
        batch = ResultBatch()
        statuses, raw = [], []
        for client, server in group:
            label = pair_label(client, server)
            raw_ref = f"raw:{benchmark}:{label}:{repetition}"
            outcome, problem = _record_pair(batch, benchmark, client, server, repetition, results, sizes, raw_ref)
            counts = summary.per_pair.setdefault(label, {"ok": 0, "invalid": 0, "failed": 0})
            counts[outcome] += 1
            for node in (client, server):
                result = results.get(node)
                raw.append((f"{label}@{node}", result.stdout if result else "", result.stderr if result else ""))
                if result is None or result.status is not NodeStatus.OK:
                    statuses.append((node, result.status.value if result else "unreachable",
                                     f"repetition {repetition}, pair {label}: {_why(result)}"))
            if problem is not None and outcome == "invalid":
                statuses.append((client, "ok", f"repetition {repetition}, pair {label}: {problem}"))
        with store.transaction():
            store.add_results(run_id, batch)
            for label, stdout, stderr in raw:
                store.add_raw_output(run_id, benchmark, label, repetition, stdout, stderr)
            store.add_node_status(run_id, benchmark, statuses)
        if on_progress is not None:
            on_progress(done, len(rounds))
    return summary
