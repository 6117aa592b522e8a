"""Switchbench's three network benchmarks, which load a switch the way
applications do and find where it stops keeping up.

* **Daisy chain** (``run_chain``): one TCP stream forwarded through a chain
  of the first k nodes of the list, for k = 2 ... N: ``stream`` on the first
  node, ``relay`` on the nodes between, ``serve`` on the last (the pingpong
  kernel's modes, ``oddnode.measure.pair.pingpong``).  Every hop of a chain
  carries the whole stream through the switch at once, so a chain of k nodes
  loads it with k-1 concurrent flows; its *aggregate* throughput is (k-1)
  times the end-to-end rate the last node counted.  On a switch that scales,
  the aggregate grows by one hop's worth with each node added; where it
  stops growing is the switch's limit (``chain_saturation``).  A drop at one
  k also points at the node that joined there.  The server's stamp checks
  and the client's byte count validate the data end to end, through every
  relay.
* **Pairwise streaming** (``run_streams``): sustained streams both ways at
  once (``stream --both``) between the pairs of a pair pattern
  (``oddnode.readings.patterns``), every pair at the same time (or one
  at a time, ``serial``): per-pair throughput, which the pair rules read
  like ping-pong's to name a weak node or uplink.
* **Congestion-controlled all-to-all** (``run_alltoall``): our
  ``alltoall`` kernel on every node, one rank each in list order.  In phase
  i = 1 ... N-1 rank r sends to rank (r+i) mod N while it receives from
  (r-i) mod N, with a barrier between phases (see ``kernels/alltoall.c``):
  the total time, the aggregate throughput, and per phase the minimum
  bandwidth over the ranks, whose dips show the permutations the switch
  cannot carry (a module boundary, an uplink).

Series (MB/s: 10^6 bytes per second, as every oddnode rate):

=====================  ==================================  ==========  ======
benchmark              metric                              label       unit
=====================  ==================================  ==========  ======
``chain``              ``bandwidth.end_to_end``            node set    MB/s
``chain``              ``bandwidth.aggregate``             node set    MB/s
``stream.<pattern>``   ``bandwidth.client_to_server``      pair        MB/s
``stream.<pattern>``   ``bandwidth.server_to_client``      pair        MB/s
``alltoall``           ``bandwidth.send``,                 node        MB/s
                       ``bandwidth.receive``
``alltoall``           ``bandwidth.min_phase.<i>``         node set    MB/s
``alltoall``           ``bandwidth.aggregate``             node set    MB/s
``alltoall``           ``time.total``                      node set    s
=====================  ==================================  ==========  ======

A chain's label is the folded set of its nodes (its order, the list's, is in
the parameters with its length).  A node's all-to-all bandwidth is its bytes
over the sum of its phase times.  Every result keeps its validity and a
reference to the raw output of every node involved.  A node that fails or
dies leaves its chain, pair or all-to-all invalid with the reason (and the
``suspects``: the nodes that failed first), its node status recorded, and
every result already obtained stored.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from oddnode.readings.interconnect_series import ALLTOALL as ALLTOALL_BENCHMARK
from oddnode.readings.interconnect_series import STREAM, pattern_series
from oddnode.measure.benchmarks import parse_kernel_run
from oddnode.measure.pair.pairs import (
    PREPARE_TIMEOUT,
    ROUND_SLACK,
    StreamOptions,
    pattern_rounds,
    run_pair_rounds,
    run_patterns,
    stream_client_argv,
)
from oddnode.measure.runner import (
    DEFAULT_REPETITIONS,
    RoundJobs,
    new_target_run,
    parsed_client_run,
    parsed_run,
    prepare,
    quote_detail,
    raw_outputs,
    raw_reference,
    run_round_batches,
    start_lead,
    store_round,
    transport_trouble,
    why_failed,
)
from oddnode.readings.patterns import PairPlan, check_patterns, pair_label
from oddnode.readings.switchbench import CHAIN_BENCHMARK, CHAIN_METRIC, chain_saturation
from oddnode.measure.pair.pingpong import (
    DEFAULT_CONNECT_WAIT,
    DEFAULT_IO_TIMEOUT,
    DEFAULT_MESSAGE_SIZE,
    DEFAULT_STREAM_SECONDS,
    SLOWEST_LINK_BYTES_PER_S,
    STREAM_DIRECTIONS,
    check_host,
    check_port,
    is_whole,
    parse_stream_run,
    partner_options,
    pingpong_relay_argv,
    pingpong_serve_argv,
    pingpong_stream_argv,
    stream_run_seconds,
)
from oddnode.reach.jobs import parse_runner_output, runner_argv, start_option, with_runner_options
from oddnode.parsers.kernel_output import number, read_kernel_output, whole
from oddnode.core.model import Direction, LabelKind
from oddnode.core.nodes import fold
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.measure.steps import Step, StepContext, StepOutcome, option
from oddnode.store import ResultBatch, Store
from oddnode.reach.base import NodeResult, NodeStatus, Target
from oddnode.core.units import canonical_unit

__all__ = [
    "ALLTOALL_BENCHMARK",
    "CHAIN_BENCHMARK",
    "DEFAULT_PORT",
    "AllToAllOptions",
    "AllToAllPhase",
    "AllToAllRepetition",
    "AllToAllRunSummary",
    "ChainOptions",
    "ChainPoint",
    "ChainRunSummary",
    "PhaseLine",
    "StreamOptions",
    "StreamPairRate",
    "StreamRunSummary",
    "alltoall_argv",
    "alltoall_phases",
    "alltoall_run_seconds",
    "chain_label",
    "chain_saturation",
    "parse_alltoall_output",
    "parse_alltoall_run",
    "run_alltoall",
    "run_chain",
    "run_streams",
    "stream_benchmark",
]

ALLTOALL_KERNEL = "alltoall"
# The TCP port every relay, server and rank listens on: below Linux's
# ephemeral range (32768-60999), beside the pair runner's 29170.
DEFAULT_PORT = 29_171
# Bytes each rank sends per all-to-all phase: 1 MiB, the alltoall kernel's
# default, about a millisecond per phase on a 10 Gbit/s link.
DEFAULT_ALLTOALL_MESSAGE = 1 << 20
DEFAULT_WARMUP_PASSES = 1
# The alltoall kernel's limits, checked here first so a typo fails at once.
MAX_RANKS = 4096
MAX_ALLTOALL_MESSAGE = 256 << 20
MAX_WARMUP_PASSES = 100
# The kernels' build and a round's margin, PREPARE_TIMEOUT and ROUND_SLACK,
# are the pair runner's.
# An all-to-all phase's cost beyond moving its bytes on the slowest link:
# the barrier's N-1 records at rank 0, a check and a fill of the message.
_PHASE_SLACK = 0.05
_MB_PER_S = canonical_unit("MB/s")
_SECONDS = canonical_unit("s")
# "rank 3 (" in an alltoall error: the rank it blames.
_BLAMED_RANK = re.compile(r"\brank (\d+) \(")


def stream_benchmark(pattern: str) -> str:
    return pattern_series(STREAM, pattern)


def chain_label(nodes: Sequence[str]) -> str:
    """A chain's result label: its nodes, folded (a node set)."""
    return fold(nodes)


def _exit_problem(result: NodeResult | None, source: str) -> str | None:
    """Why a relay's or a server's run failed (they measure nothing a result
    needs: that they ran and exited 0 is all); None when it did."""
    if result is None or result.status is not NodeStatus.OK:
        return why_failed(result)
    try:
        report = parse_runner_output(source, result.stdout)
    except ParseError as error:
        return quote_detail(str(error))
    if report.returncode != 0:
        return quote_detail(f"pingpong kernel exited with status {report.returncode}: {report.stderr}")
    return None


# --- the daisy chain ----------------------------------------------------------------


@dataclass(frozen=True)
class ChainOptions:
    """What each chain streams: message size (bytes) and seconds; the port
    every node of a chain listens on; how long the first node may take to
    connect; the chain lengths to run (None: 2 to N)."""

    message_size: int = option(DEFAULT_MESSAGE_SIZE, help="Bytes per write of the stream")
    seconds: float = option(DEFAULT_STREAM_SECONDS, help="Seconds each chain streams", check="seconds")
    port: int = option(DEFAULT_PORT, help="TCP port every relay and the last node listen on")
    connect_wait: float = DEFAULT_CONNECT_WAIT
    lengths: tuple[int, ...] | None = option(None, help="Chain lengths k, comma-separated", check="lengths",
                                             shown_default="2 to N")

    @property
    def run_seconds(self) -> float:
        return stream_run_seconds(self.seconds, self.message_size)


@dataclass(frozen=True)
class ChainPoint:
    """One chain of one repetition: its nodes in stream order and the rate
    its last node counted (MB/s; None when the chain failed)."""

    length: int
    repetition: int
    nodes: tuple[str, ...]
    end_to_end: float | None
    valid: bool
    problem: str | None = None

    @property
    def aggregate(self) -> float | None:
        """What the switch carried: the stream once per hop, (k-1) hops."""
        return None if self.end_to_end is None else (self.length - 1) * self.end_to_end


@dataclass
class ChainRunSummary:
    """What a chain run stored: its run id and every chain it ran."""

    run_id: int
    points: list[ChainPoint] = field(default_factory=list)

    def best_aggregate(self) -> dict[int, float]:
        """Per chain length, the best aggregate over valid repetitions
        (STAB's best run: what the switch can do, not its bad moments)."""
        best: dict[int, float] = {}
        for point in self.points:
            if point.valid and point.aggregate is not None:
                best[point.length] = max(best.get(point.length, 0.0), point.aggregate)
        return dict(sorted(best.items()))

    def hop_rate(self) -> float | None:
        """MB/s of one hop: the shortest measured chain's best aggregate over its hops."""
        best = self.best_aggregate()
        return best[min(best)] / (min(best) - 1) if best else None

    def lengths(self) -> list[dict]:
        """Per chain length, in order: the nodes (the last one joined), the
        best end-to-end and aggregate throughput (MB/s; None when no
        repetition was valid, with the problem), and the aggregate's gain
        over the previous measured length in hops (None where there is none)."""
        best, hop = self.best_aggregate(), self.hop_rate()
        chains: dict[int, tuple[str, ...]] = {}
        problems: dict[int, str] = {}
        for point in self.points:
            chains.setdefault(point.length, point.nodes)
            if not point.valid and point.problem:
                problems.setdefault(point.length, point.problem)
        rows, previous = [], None
        for k in sorted(chains):
            aggregate = best.get(k)
            gain = (aggregate - best[previous]) / hop if aggregate is not None and previous is not None and hop else None
            rows.append({"length": k, "joined": chains[k][-1], "nodes": list(chains[k]),
                         "end_to_end": aggregate / (k - 1) if aggregate is not None else None,
                         "aggregate": aggregate, "gain_hops": gain,
                         "problem": None if aggregate is not None else problems.get(k, "no valid repetition")})
            if aggregate is not None:
                previous = k
        return rows

    @property
    def saturation(self) -> int | None:
        """The chain length where the switch stopped scaling (chain_saturation)."""
        return chain_saturation(self.best_aggregate())

    def to_json(self) -> dict:
        """The run as data: its id, every chain (MB/s), the best aggregate
        per length and where the switch stopped scaling."""
        return {"run_id": self.run_id, "saturation": self.saturation,
                "best_aggregate": {str(k): v for k, v in self.best_aggregate().items()},
                "points": [{"length": p.length, "repetition": p.repetition, "nodes": list(p.nodes),
                            "end_to_end": p.end_to_end, "aggregate": p.aggregate, "valid": p.valid,
                            "problem": p.problem} for p in self.points]}


def _chain_lengths(nodes: Sequence[str], lengths: Sequence[int] | None) -> list[int]:
    if lengths is None:
        return list(range(2, len(nodes) + 1))
    chosen = sorted(set(lengths))
    bad = [k for k in chosen if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= len(nodes)]
    if bad or not chosen:
        raise ValueError(f"chain lengths must be 2 to {len(nodes)} (the node count), got {list(lengths)}")
    return chosen


def _chain_jobs(chain: Sequence[str], options: ChainOptions, wait: float, start_at: float) -> RoundJobs:
    """stream on the first node to the second, relays forwarding to the
    next, serve on the last; only the first is held until the round's
    start, the others listen as soon as they can and wait ``wait``."""
    session = options.run_seconds
    jobs: dict[str, tuple[float | None, list[str]]] = {
        chain[-1]: (None, pingpong_serve_argv(options.port, wait, session_seconds=session))}
    for position in range(1, len(chain) - 1):
        jobs[chain[position]] = (None, pingpong_relay_argv(options.port, chain[position + 1], options.port, wait,
                                                           session_seconds=session))
    jobs[chain[0]] = (start_at, pingpong_stream_argv(chain[1], options.port, options.message_size, options.seconds,
                                                     wait=options.connect_wait))
    return jobs


def _run_nodes(target: Target, repetitions: int, what: str) -> list[str]:
    """The target's nodes for ``what`` (a chain, an all-to-all), refused
    unless there are two at least and ``repetitions`` >= 1."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    nodes = list(target.nodes)
    if len(nodes) < 2:
        raise ValueError(f"{what} needs at least 2 nodes, got {len(nodes)}")
    return nodes


def _suspects(results: Mapping[str, NodeResult], nodes: Sequence[str], problems: Mapping[str, str],
              blamed: Collection[str] = ()) -> list[str]:
    """The nodes a failed run is laid at.  A dead node makes its partners
    fail after it, so the innocent fail too: the nodes the transport could
    not run on; else those the others' errors name (``blamed``); else every
    node that failed."""
    down = [node for node in nodes if node not in results or results[node].status is not NodeStatus.OK]
    return (down or [node for node in nodes if node in blamed]
            or [node for node in nodes if node in problems])


def _record_chain(batch: ResultBatch, chain: Sequence[str], repetition: int, results: Mapping[str, NodeResult],
                  options: ChainOptions, raw_ref: str) -> ChainPoint:
    """Add one chain's rows, from what its source counted (the sink's count,
    sent back); or, when it failed, invalid rows saying which node failed how."""
    label = chain_label(chain)
    source, sink = chain[0], chain[-1]
    parameters: dict[str, Any] = {"length": len(chain), "hops": len(chain) - 1, "nodes": ",".join(chain),
                                  "source": source, "sink": sink, "message_size": options.message_size,
                                  "seconds": options.seconds}
    rows = [("bandwidth.end_to_end", 1), (CHAIN_METRIC, len(chain) - 1)]
    parsed, problem = parsed_run(results.get(source), parse_stream_run, raw_ref)
    if parsed is not None:
        (measurement,) = [m for m in parsed.measurements if m.metric == "bandwidth.client_to_server"]
        detail = {**parameters, "bytes": measurement.parameters["bytes"],
                  "elapsed": measurement.parameters["seconds"]}
        if not parsed.valid:
            detail["problems"] = "; ".join(parsed.problems)
        for metric, hops in rows:
            batch.add(CHAIN_BENCHMARK, label, hops * measurement.value, metric=metric, unit=_MB_PER_S,
                      direction=Direction.HIGHER, label_kind=LabelKind.SET, repetition=repetition,
                      valid=measurement.valid, parameters=detail, raw_ref=raw_ref)
        return ChainPoint(len(chain), repetition, tuple(chain), measurement.value, measurement.valid,
                          None if parsed.valid else "; ".join(parsed.problems))
    problems = {source: str(problem)}
    for node in chain[1:]:
        other = _exit_problem(results.get(node), raw_ref)
        if other is not None:
            problems[node] = other
    why = "; ".join(f"{'source' if node == source else 'sink' if node == sink else 'relay'} {node}: {text}"
                    for node, text in problems.items())
    detail = {**parameters, "error": why, "suspects": fold(_suspects(results, chain, problems))}
    for metric, _ in rows:
        batch.add(CHAIN_BENCHMARK, label, None, metric=metric, unit=_MB_PER_S, direction=Direction.HIGHER,
                  label_kind=LabelKind.SET, repetition=repetition, valid=False, parameters=detail, raw_ref=raw_ref)
    return ChainPoint(len(chain), repetition, tuple(chain), None, False, why)


def run_chain(
    store: Store,
    target: Target,
    repetitions: int = DEFAULT_REPETITIONS,
    *,
    options: ChainOptions = ChainOptions(),
    on_progress: Callable[[int, int], None] | None = None,
    command: str = "oddnode switchbench chain",
) -> ChainRunSummary:
    """Stream through chains of the target's first k nodes, for every chain
    length of ``options``, ``repetitions`` times (each repetition runs every
    length, shortest first), one chain at a time; store each chain's
    end-to-end and aggregate throughput, raw outputs and node troubles, one
    transaction per chain; ``on_progress(done, total)`` after each."""
    nodes = _run_nodes(target, repetitions, "a chain")
    lengths = _chain_lengths(nodes, options.lengths)
    rounds = [(repetition, length) for repetition in range(1, repetitions + 1) for length in lengths]
    run_id = new_target_run(store, target, command)
    summary = ChainRunSummary(run_id)
    # Relays and servers run one build of the pingpong kernel, the source's too.
    lead = prepare(target, pingpong_serve_argv(options.port), PREPARE_TIMEOUT)

    def record(index: int, results: Mapping[str, NodeResult], late: Mapping[str, str]) -> None:
        repetition, length = rounds[index]
        chain = nodes[:length]
        label = chain_label(chain)
        batch = ResultBatch()
        point = _record_chain(batch, chain, repetition, results, options,
                              raw_reference(CHAIN_BENCHMARK, label, repetition))
        summary.points.append(point)
        where = f"repetition {repetition}, chain of {length}"
        statuses = transport_trouble(results, chain, where)
        if point.problem is not None and all(row[0] != chain[0] for row in statuses):
            statuses.append((chain[0], "ok", f"{where}: {point.problem}"))
        if chain[0] in late:
            statuses.append((chain[0], "ok", f"{where}: {late[chain[0]]}"))
        store_round(store, run_id, CHAIN_BENCHMARK, batch, repetition, raw_outputs(results, chain, label), statuses)

    # The chains go to the nodes in batches, as pair rounds do; relays and
    # the server listen at once and wait through the source's start and
    # connection.
    run_round_batches(target, len(rounds), lambda index, start, wait: _chain_jobs(
                          nodes[:rounds[index][1]], options, wait, start),
                      lambda index: nodes[:1], record, measure_seconds=options.seconds,
                      session_seconds=options.run_seconds, connect_wait=options.connect_wait, slack=ROUND_SLACK,
                      lead=lead, on_progress=on_progress)
    return summary


# --- pairwise streaming ---------------------------------------------------------------


@dataclass(frozen=True)
class StreamPairRate:
    """One pair's streams of one repetition, MB/s each way (None when failed)."""

    label: str
    client: str
    server: str
    repetition: int
    client_to_server: float | None
    server_to_client: float | None
    valid: bool
    problem: str | None = None

    @property
    def total(self) -> float | None:
        """Both directions together: what the pair's two links carried."""
        if self.client_to_server is None or self.server_to_client is None:
            return None
        return self.client_to_server + self.server_to_client


@dataclass
class StreamRunSummary:
    """What a streaming run stored: its run id, the plans of its
    repetitions, per pair label how many repetitions ended in each outcome
    (ok, invalid, failed), and every pair's rates."""

    run_id: int
    pattern: str
    plans: list[PairPlan] = field(default_factory=list)
    per_pair: dict[str, dict[str, int]] = field(default_factory=dict)
    rates: list[StreamPairRate] = field(default_factory=list)

    @property
    def notes(self) -> list[str]:
        """One line per repetition, saying who sat out when the count is odd."""
        return [plan.describe() for plan in self.plans if plan.idle]

    def best_per_pair(self) -> dict[str, float]:
        """Per pair label, the best total over its valid repetitions."""
        best: dict[str, float] = {}
        for rate in self.rates:
            if rate.valid and rate.total is not None:
                best[rate.label] = max(best.get(rate.label, 0.0), rate.total)
        return best

    def best_directions(self) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
        """Per pair label its best repetition's rates (client to server,
        server to client; the best by total), and the first problem of each
        pair that had one."""
        best: dict[str, tuple[float, float]] = {}
        problems: dict[str, str] = {}
        for rate in self.rates:
            if rate.valid and rate.total is not None:
                if rate.label not in best or rate.total > sum(best[rate.label]):
                    best[rate.label] = (rate.client_to_server or 0.0, rate.server_to_client or 0.0)
            elif rate.problem:
                problems.setdefault(rate.label, rate.problem)
        return best, problems

    def to_json(self) -> dict:
        """The run as data: its id, pattern, notes, plans, per pair outcome
        counts and every pair's rates of every repetition (MB/s)."""
        return {"run_id": self.run_id, "pattern": self.pattern, "notes": self.notes,
                "plans": [plan.to_json() for plan in self.plans],
                "per_pair": {label: dict(counts) for label, counts in self.per_pair.items()},
                "rates": [{"pair": r.label, "client": r.client, "server": r.server, "repetition": r.repetition,
                           "client_to_server": r.client_to_server, "server_to_client": r.server_to_client,
                           "total": r.total, "valid": r.valid, "problem": r.problem} for r in self.rates]}


def _record_streams(batch: ResultBatch, benchmark: str, client: str, server: str, repetition: int,
                    results: Mapping[str, NodeResult], raw_ref: str) -> StreamPairRate:
    """Add one pair's rows (two directions, None when the pair failed); its rates."""
    label = pair_label(client, server)
    parsed, problem = parsed_client_run(results, client, server, parse_stream_run, raw_ref)
    if parsed is None:
        for direction in STREAM_DIRECTIONS:
            batch.add(benchmark, label, None, metric=f"bandwidth.{direction}", unit=_MB_PER_S,
                      direction=Direction.HIGHER, label_kind=LabelKind.PAIR, repetition=repetition, valid=False,
                      parameters={"error": problem, "client": client, "server": server}, raw_ref=raw_ref)
        return StreamPairRate(label, client, server, repetition, None, None, False, problem)
    rates: dict[str, float] = {}
    for m in parsed.measurements:
        rates[m.parameters["direction"]] = m.value
        batch.add(benchmark, label, m.value, metric=m.metric, unit=m.unit, direction=m.direction,
                  label_kind=LabelKind.PAIR, repetition=repetition, valid=m.valid,
                  parameters={**m.parameters, "client": client, "server": server}, raw_ref=raw_ref)
    return StreamPairRate(label, client, server, repetition, rates.get("client_to_server"),
                          rates.get("server_to_client"), parsed.valid,
                          None if parsed.valid else "; ".join(parsed.problems))


def run_streams(
    store: Store,
    target: Target,
    pattern: str,
    repetitions: int = DEFAULT_REPETITIONS,
    *,
    options: StreamOptions = StreamOptions(port=DEFAULT_PORT),
    seed: int = 0,
    serial: bool = False,
    pairs_file: Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    command: str = "oddnode switchbench stream",
) -> StreamRunSummary:
    """Stream both ways at once (whatever ``options.both`` says: that is
    Switchbench's pairwise streaming) between the pairs of ``pattern`` over
    the target's nodes, all pairs at once (``serial``: one at a time),
    ``repetitions`` times; store every pair's rates, raw outputs and node
    troubles, one transaction per round of pairs; ``on_progress(done,
    total)`` after each."""
    plans, rounds = pattern_rounds(pattern, target, repetitions, seed, serial, pairs_file)
    run_id = new_target_run(store, target, command)
    benchmark = stream_benchmark(pattern)
    summary = StreamRunSummary(run_id, pattern, plans)

    def record(batch: ResultBatch, client: str, server: str, repetition: int, results: dict[str, NodeResult],
               raw_ref: str) -> tuple[str, str | None]:
        rate = _record_streams(batch, benchmark, client, server, repetition, results, raw_ref)
        summary.rates.append(rate)
        outcome = "failed" if rate.client_to_server is None else "ok" if rate.valid else "invalid"
        return outcome, rate.problem

    # Both ends run one build of the kernel: building it for the server builds it.
    lead = prepare(target, pingpong_serve_argv(options.port), PREPARE_TIMEOUT)
    client_argv = stream_client_argv(replace(options, both=True))
    run_pair_rounds(store, target, run_id, benchmark, rounds, client_argv=client_argv,
                    session_seconds=options.run_seconds, measure_seconds=options.measure_seconds, record=record,
                    port=options.port, connect_wait=options.connect_wait, lead=lead, per_pair=summary.per_pair,
                    on_progress=on_progress)
    return summary


# --- the all-to-all: argv and parser -------------------------------------------------------


def _rank_address(host: str, port: int) -> str:
    """HOST:PORT, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def alltoall_run_seconds(ranks: int, message_size: int = DEFAULT_ALLTOALL_MESSAGE,
                         warmup_passes: int = DEFAULT_WARMUP_PASSES) -> float:
    """An upper bound of an all-to-all's seconds once its mesh is built, on
    links no slower than SLOWEST_LINK_BYTES_PER_S: every pass runs N-1
    phases, each moving one message out and one in (full duplex)."""
    phases = (warmup_passes + 1) * max(ranks - 1, 1)
    return phases * (message_size / SLOWEST_LINK_BYTES_PER_S + _PHASE_SLACK) + 1.0


def alltoall_argv(
    rank: int,
    addresses: Sequence[tuple[str, int]],
    message_size: int = DEFAULT_ALLTOALL_MESSAGE,
    seed: int = 0,
    warmup_passes: int = DEFAULT_WARMUP_PASSES,
    wait: float = DEFAULT_CONNECT_WAIT,
    *,
    io_timeout: int = DEFAULT_IO_TIMEOUT,
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    timeout: float | None = None,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that runs rank ``rank`` of an all-to-all over ``addresses``
    ((host, port) in rank order; this rank listens on its entry's port),
    every rank connected within ``wait`` seconds.  The runner's ``timeout``
    defaults to the wait, alltoall_run_seconds, io_timeout and a margin."""
    addresses = list(addresses)
    if not 2 <= len(addresses) <= MAX_RANKS:
        raise ValueError(f"an all-to-all needs 2 to {MAX_RANKS} ranks, got {len(addresses)}")
    for host, port in addresses:
        check_host(host)
        check_port(port)
    if len(set(addresses)) != len(addresses):
        raise ValueError("two ranks have the same address: give each rank its own host or port")
    if not is_whole(rank, 0, len(addresses) - 1):
        raise ValueError(f"rank must be 0 to {len(addresses) - 1}, got {rank!r}")
    if not is_whole(message_size, 1, MAX_ALLTOALL_MESSAGE):
        raise ValueError(f"message_size must be whole bytes 1-{MAX_ALLTOALL_MESSAGE}, got {message_size!r}")
    if not is_whole(seed, 0, 2**64 - 1):
        raise ValueError(f"seed must be a whole number 0 to 2^64-1, got {seed!r}")
    if not is_whole(warmup_passes, 0, MAX_WARMUP_PASSES):
        raise ValueError(f"warmup_passes must be 0 to {MAX_WARMUP_PASSES}, got {warmup_passes!r}")
    waits, timeout = partner_options(wait, io_timeout,
                                     alltoall_run_seconds(len(addresses), message_size, warmup_passes), timeout,
                                     slack=ROUND_SLACK)
    args = ["-r", str(rank), "-R", ",".join(_rank_address(host, port) for host, port in addresses),
            "-s", str(message_size), "-S", str(seed), "-W", str(warmup_passes), *waits]
    return runner_argv(ALLTOALL_KERNEL, args, cflags=cflags, defines=defines, timeout=timeout,
                       interpreter=interpreter)


@dataclass(frozen=True)
class PhaseLine:
    """One rank's account of one phase: whom it sent to and received from,
    bytes, seconds and MB/s each way."""

    phase: int
    to_rank: int
    from_rank: int
    bytes_sent: int
    send_seconds: float
    send_MBps: float
    bytes_received: int
    receive_seconds: float
    receive_MBps: float


_ALLTOALL_INT_KEYS = {
    "protocol", "rank", "ranks", "port", "message_size", "phases", "warmup_passes", "seed", "io_timeout_seconds",
    "timer_granularity_ns", "connect_attempts", "messages_checked", "corrupt_phase",
}
_ALLTOALL_FLOAT_KEYS = {"connect_wait_seconds", "mesh_seconds"}
_KEY_VALUE = re.compile(r"(\w+)=(\S+)")


def parse_alltoall_output(text: str, source: str) -> ParsedOutput:
    """Parse one rank's run of our alltoall kernel: its send and receive
    bandwidth over all phases (``alltoall``, ``bandwidth.send`` and
    ``bandwidth.receive``), every phase line (``configuration["phase_lines"]``,
    PhaseLine values), its total time and its check of the data received;
    ParseError if the output is not ours or is cut short."""
    output = read_kernel_output(text, source, ALLTOALL_KERNEL, int_keys=_ALLTOALL_INT_KEYS,
                                float_keys=_ALLTOALL_FLOAT_KEYS)
    configuration = output.configuration
    for key in ("rank", "ranks", "message_size"):
        if key not in configuration:
            raise ParseError(source, None, f"alltoall kernel header lacks {key!r}")
    rank, ranks, size = configuration["rank"], configuration["ranks"], configuration["message_size"]
    if not 0 <= rank < ranks:
        raise ParseError(source, output.header_lines["rank"], f"rank {rank} of {ranks} ranks")
    phases: dict[int, PhaseLine] = {}
    total: tuple[float, int, int] | None = None
    problems: list[str] = []
    validated = False
    for lineno, line in output.lines:
        words = line.split()
        if words[0] == "phase":
            if len(words) != 10:
                raise ParseError(source, lineno, f"a phase line has 10 fields, found {len(words)}: {line[:80]!r}")
            phase, to_rank, from_rank, sent, received = (whole(words[i], source, lineno) for i in (1, 2, 3, 4, 7))
            send_s, send_rate, receive_s, receive_rate = (number(words[i], source, lineno) for i in (5, 6, 8, 9))
            if not 1 <= phase < ranks or phase in phases:
                raise ParseError(source, lineno, f"phase {phase} repeated or outside 1-{ranks - 1}")
            if to_rank != (rank + phase) % ranks or from_rank != (rank - phase) % ranks:
                raise ParseError(source, lineno, f"phase {phase} of rank {rank} goes to {to_rank} and comes from "
                                                 f"{from_rank}, not {(rank + phase) % ranks} and "
                                                 f"{(rank - phase) % ranks}")
            if sent != size or received != size or send_s <= 0 or receive_s <= 0:
                raise ParseError(source, lineno, f"implausible phase line: {line!r}")
            phases[phase] = PhaseLine(phase, to_rank, from_rank, sent, send_s, send_rate, received, receive_s,
                                      receive_rate)
        elif words[0] == "total":
            if len(words) != 4:
                raise ParseError(source, lineno, f"a total line has 4 fields, found {len(words)}: {line[:80]!r}")
            seconds = number(words[1], source, lineno)
            if seconds <= 0:
                raise ParseError(source, lineno, f"implausible total line: {line!r}")
            total = (seconds, whole(words[2], source, lineno), whole(words[3], source, lineno))
        elif line == "validation ok":
            validated = True
        elif words[:2] == ["validation", "failed"]:
            validated = True
            evidence = dict(_KEY_VALUE.findall(line))
            configuration["validation_failed"] = line[len("validation failed"):].strip()
            bad, _, checked = evidence.get("bad", "?").partition("/")
            problems.append(
                f"data check failed: {bad} of {checked or '?'} messages received differed from what was sent; "
                f"the first in phase {evidence.get('phase', '?')} from rank {evidence.get('from', '?')}, byte "
                f"offset {evidence.get('offset', '?')}: expected {evidence.get('expected', '?')}, got "
                f"{evidence.get('got', '?')} (data corrupted or misrouted between the nodes)")
        else:
            raise ParseError(source, lineno, f"unexpected line in alltoall kernel output: {line[:80]!r}")
    missing = [phase for phase in range(1, ranks) if phase not in phases]
    if missing:
        raise ParseError(source, output.line_count, "truncated alltoall kernel output: no line for phase "
                                                    + ", ".join(map(str, missing[:10])))
    if total is None:
        raise ParseError(source, output.line_count, "truncated alltoall kernel output: no total line")
    if not validated:
        raise ParseError(source, output.line_count, "truncated alltoall kernel output: no validation line")
    if output.warnings:
        configuration["warnings"] = output.warnings
    lines = [phases[phase] for phase in range(1, ranks)]
    configuration["phase_lines"] = lines
    configuration["total_seconds"] = total[0]
    valid = not problems
    common = {"rank": rank, "ranks": ranks, "message_size": size, "total_seconds": total[0]}
    measurements = [
        Measurement(ALLTOALL_BENCHMARK, 1e-6 * sum(line.bytes_sent for line in lines)
                    / sum(line.send_seconds for line in lines), _MB_PER_S, Direction.HIGHER,
                    metric="bandwidth.send", valid=valid,
                    parameters={**common, "min_phase_MBps": min(line.send_MBps for line in lines)}),
        Measurement(ALLTOALL_BENCHMARK, 1e-6 * sum(line.bytes_received for line in lines)
                    / sum(line.receive_seconds for line in lines), _MB_PER_S, Direction.HIGHER,
                    metric="bandwidth.receive", valid=valid,
                    parameters={**common, "min_phase_MBps": min(line.receive_MBps for line in lines)}),
    ]
    return ParsedOutput(tool="oddnode-alltoall", measurements=measurements, valid=valid, problems=problems,
                        configuration=configuration)


def parse_alltoall_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a rank's run, then the kernel's stdout."""
    return parse_kernel_run(text, source, ALLTOALL_KERNEL, parse_alltoall_output)


# --- the all-to-all: the run ----------------------------------------------------------


@dataclass(frozen=True)
class AllToAllOptions:
    """What the all-to-all moves: bytes per rank and phase, untimed passes
    first; the port every rank listens on; how long the mesh may take to
    build; how long any rank may stall."""

    message_size: int = option(DEFAULT_ALLTOALL_MESSAGE, help="Bytes each node sends per phase")
    warmup_passes: int = option(DEFAULT_WARMUP_PASSES, help="Untimed passes through every phase first")
    port: int = option(DEFAULT_PORT, help="TCP port every node listens on")
    connect_wait: float = DEFAULT_CONNECT_WAIT
    io_timeout: int = DEFAULT_IO_TIMEOUT


@dataclass(frozen=True)
class AllToAllPhase:
    """One phase over all ranks: the lowest receive bandwidth (MB/s), the
    flow that had it, and the median over the ranks."""

    phase: int
    min_bandwidth: float
    median_bandwidth: float
    slowest_receiver: str
    slowest_sender: str


@dataclass
class AllToAllRepetition:
    """One all-to-all: its phases, the slowest rank's total time (s), the
    aggregate throughput (MB/s: every byte received over that time), and
    whether every rank ran and checked its data; empty phases and None when
    some rank gave nothing."""

    repetition: int
    phases: list[AllToAllPhase]
    total_seconds: float | None
    aggregate_bandwidth: float | None
    valid: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class AllToAllRunSummary:
    """What an all-to-all run stored: run id, the ranks' nodes in rank
    order, the message size, every repetition, and per node how many
    repetitions ended in each outcome (ok, invalid, failed)."""

    run_id: int
    nodes: list[str]
    message_size: int
    repetitions: list[AllToAllRepetition] = field(default_factory=list)
    per_node: dict[str, dict[str, int]] = field(default_factory=dict)

    def phase_min_bandwidth(self) -> dict[int, float]:
        """Per phase, the best over valid repetitions of its minimum
        bandwidth: the plot of phase against minimum bandwidth."""
        best: dict[int, float] = {}
        for repetition in self.repetitions:
            if repetition.valid:
                for phase in repetition.phases:
                    best[phase.phase] = max(best.get(phase.phase, 0.0), phase.min_bandwidth)
        return dict(sorted(best.items()))

    def best(self) -> AllToAllRepetition | None:
        """The valid repetition with the shortest total time, if any."""
        valid = [r for r in self.repetitions if r.valid and r.total_seconds is not None]
        return min(valid, key=lambda r: r.total_seconds or 0.0) if valid else None

    def to_json(self) -> dict:
        """The run as data: its id, ranks' nodes, message size (bytes), each
        repetition with its phases (MB/s, s) and per node outcome counts."""
        return {"run_id": self.run_id, "nodes": list(self.nodes), "message_size": self.message_size,
                "per_node": {node: dict(counts) for node, counts in self.per_node.items()},
                "per_repetition": [{"repetition": r.repetition, "total_seconds": r.total_seconds,
                                 "aggregate_bandwidth": r.aggregate_bandwidth, "valid": r.valid,
                                 "problems": list(r.problems),
                                 "phases": [{"phase": p.phase, "min_bandwidth": p.min_bandwidth,
                                             "median_bandwidth": p.median_bandwidth,
                                             "slowest_receiver": p.slowest_receiver,
                                             "slowest_sender": p.slowest_sender} for p in r.phases]}
                                for r in self.repetitions]}


def alltoall_phases(nodes: Sequence[str], lines: Mapping[str, Sequence[PhaseLine]],
                    totals: Mapping[str, float]) -> tuple[list[AllToAllPhase], float, float]:
    """Per phase the minimum and median receive bandwidth over the ranks
    (``nodes`` in rank order, each with its phase lines and total), the
    slowest rank's total time, and the aggregate: every byte received over
    that time (MB/s)."""
    phases = []
    for index in range(len(nodes) - 1):
        per_rank = [(lines[node][index].receive_MBps, rank) for rank, node in enumerate(nodes)]
        low, receiver = min(per_rank)
        phase = lines[nodes[receiver]][index]
        phases.append(AllToAllPhase(phase.phase, low, statistics.median(rate for rate, _ in per_rank),
                                    nodes[receiver], nodes[phase.from_rank]))
    total = max(totals[node] for node in nodes)
    received = sum(line.bytes_received for node in nodes for line in lines[node])
    return phases, total, 1e-6 * received / total


def _blamed(stderr: str, nodes: Sequence[str], own: int) -> set[str]:
    """The nodes a failing rank's error names (``rank 2 (...)``), not itself."""
    ranks = {int(match.group(1)) for match in _BLAMED_RANK.finditer(stderr)}
    return {nodes[rank] for rank in ranks if rank != own and 0 <= rank < len(nodes)}


def _record_alltoall(batch: ResultBatch, nodes: Sequence[str], repetition: int, results: Mapping[str, NodeResult],
                     options: AllToAllOptions, raw_ref: str, set_label: str
                     ) -> tuple[AllToAllRepetition, dict[str, str], dict[str, str]]:
    """Add one all-to-all's rows; the repetition, each node's outcome (ok,
    invalid, failed) and what went wrong on each node where something did."""
    parsed: dict[str, ParsedOutput] = {}
    problems: dict[str, str] = {}
    blamed: set[str] = set()
    for rank, node in enumerate(nodes):
        output, problem = parsed_run(results.get(node), parse_alltoall_run, f"{raw_ref}@{node}")
        if output is not None:
            parsed[node] = output
        else:
            problems[node] = str(problem)
            blamed |= _blamed(problems[node], nodes, rank)
    outcomes = {node: "failed" for node in problems}
    common = {"ranks": len(nodes), "message_size": options.message_size, "warmup_passes": options.warmup_passes}
    for rank, node in enumerate(nodes):
        if node in parsed:
            outcomes[node] = "ok" if parsed[node].valid else "invalid"
            for m in parsed[node].measurements:
                batch.add(ALLTOALL_BENCHMARK, node, m.value, metric=m.metric, unit=m.unit, direction=m.direction,
                          label_kind=LabelKind.NODE, repetition=repetition, valid=m.valid,
                          parameters={**m.parameters, **common}, raw_ref=raw_ref)
    # A rank that failed only because another did is not charged with a
    # failure of its own (see _suspects).
    suspects = _suspects(results, nodes, problems, blamed)
    for node in suspects:
        for metric in ("bandwidth.send", "bandwidth.receive"):
            batch.add(ALLTOALL_BENCHMARK, node, None, metric=metric, unit=_MB_PER_S, direction=Direction.HIGHER,
                      label_kind=LabelKind.NODE, repetition=repetition, valid=False,
                      parameters={**common, "error": problems.get(node, "named by the other ranks' errors")},
                      raw_ref=raw_ref)
    set_rows = [(f"bandwidth.min_phase.{phase}", _MB_PER_S, Direction.HIGHER) for phase in range(1, len(nodes))]
    set_rows += [("bandwidth.aggregate", _MB_PER_S, Direction.HIGHER), ("time.total", _SECONDS, Direction.LOWER)]
    if problems:
        why = "; ".join(f"{node}: {text}" for node, text in problems.items())
        for metric, unit, direction in set_rows:
            batch.add(ALLTOALL_BENCHMARK, set_label, None, metric=metric, unit=unit, direction=direction,
                      label_kind=LabelKind.SET, repetition=repetition, valid=False,
                      parameters={**common, "error": why, "suspects": fold(suspects)}, raw_ref=raw_ref)
        return (AllToAllRepetition(repetition, [], None, None, False, [f"{node}: {text}" for node, text in
                                                                      problems.items()]), outcomes, problems)
    phases, total, aggregate = alltoall_phases(
        nodes, {node: parsed[node].configuration["phase_lines"] for node in nodes},
        {node: parsed[node].configuration["total_seconds"] for node in nodes})
    invalid = [f"{node}: {problem}" for node in nodes for problem in parsed[node].problems]
    valid = not invalid
    extra = {"problems": "; ".join(invalid)} if invalid else {}
    for phase in phases:
        batch.add(ALLTOALL_BENCHMARK, set_label, phase.min_bandwidth, metric=f"bandwidth.min_phase.{phase.phase}",
                  unit=_MB_PER_S, direction=Direction.HIGHER, label_kind=LabelKind.SET, repetition=repetition,
                  valid=valid, raw_ref=raw_ref,
                  parameters={**common, **extra, "phase": phase.phase, "median_MBps": phase.median_bandwidth,
                              "slowest_receiver": phase.slowest_receiver, "slowest_sender": phase.slowest_sender})
    for metric, value, unit, direction in (("bandwidth.aggregate", aggregate, _MB_PER_S, Direction.HIGHER),
                                           ("time.total", total, _SECONDS, Direction.LOWER)):
        batch.add(ALLTOALL_BENCHMARK, set_label, value, metric=metric, unit=unit, direction=direction,
                  label_kind=LabelKind.SET, repetition=repetition, valid=valid, raw_ref=raw_ref,
                  parameters={**common, **extra})
    notes = {node: "; ".join(parsed[node].problems) for node in nodes if parsed[node].problems}
    return AllToAllRepetition(repetition, phases, total, aggregate, valid, invalid), outcomes, notes


def run_alltoall(
    store: Store,
    target: Target,
    repetitions: int = DEFAULT_REPETITIONS,
    *,
    options: AllToAllOptions = AllToAllOptions(),
    seed: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
    command: str = "oddnode switchbench alltoall",
) -> AllToAllRunSummary:
    """Run the all-to-all over every node of the target (ranks in list
    order, all started at one moment) ``repetitions`` times, each with its
    own data seed drawn from ``seed``; store per node its send and receive
    bandwidth, per repetition the minimum bandwidth of every phase, the
    total time and the aggregate, with raw outputs and node troubles, one
    transaction per repetition; ``on_progress(done, total)`` after each."""
    nodes = _run_nodes(target, repetitions, "an all-to-all")
    addresses = [(node, options.port) for node in nodes]
    set_label = fold(nodes)
    run_id = new_target_run(store, target, command)
    summary = AllToAllRunSummary(run_id, nodes, options.message_size,
                                 per_node={node: {"ok": 0, "invalid": 0, "failed": 0} for node in nodes})
    lead = prepare(target, alltoall_argv(0, addresses, options.message_size), PREPARE_TIMEOUT)
    run_seconds = alltoall_run_seconds(len(nodes), options.message_size, options.warmup_passes)
    for repetition in range(1, repetitions + 1):
        # Each repetition its own pattern: a message left over from another
        # one can never pass the receiver's check.
        data_seed = (seed * 1_000_003 + repetition) % 2**64
        sent = time.time()
        start = start_option(sent + lead)
        commands = {
            node: with_runner_options(alltoall_argv(rank, addresses, options.message_size, data_seed,
                                                    options.warmup_passes, options.connect_wait,
                                                    io_timeout=options.io_timeout), start)
            for rank, node in enumerate(nodes)
        }
        timeout = lead + options.connect_wait + run_seconds + options.io_timeout + ROUND_SLACK
        results = target.transport.run_each(commands, timeout=timeout)
        lead = start_lead(results, sent)
        batch = ResultBatch()
        raw_ref = raw_reference(ALLTOALL_BENCHMARK, set_label, repetition)
        outcome, outcomes, notes = _record_alltoall(batch, nodes, repetition, results, options, raw_ref,
                                                    set_label)
        summary.repetitions.append(outcome)
        for node, result in outcomes.items():
            summary.per_node[node][result] += 1
        where = f"repetition {repetition}, all-to-all of {len(nodes)}"
        statuses = transport_trouble(results, nodes, where)
        troubled = {row[0] for row in statuses}
        statuses += [(node, "ok", f"{where}: {text}") for node, text in notes.items() if node not in troubled]
        store_round(store, run_id, ALLTOALL_BENCHMARK, batch, repetition, raw_outputs(results, nodes, set_label),
                    statuses)
        if on_progress is not None:
            on_progress(repetition, repetitions)
    return summary


# -- as steps of a check's interconnect stage ------------------------------------------


class ChainStep(Step):
    """Switchbench's daisy chain: where the switch stops scaling."""

    name = "chain"
    stage = "interconnect"
    options = ChainOptions
    series = (CHAIN_BENCHMARK,)
    default = False
    min_nodes = 2
    summary = "Switchbench's daisy chain: aggregate throughput against chain length"

    def run(self, context: StepContext, options: ChainOptions) -> StepOutcome:
        if not context.run_once(self.name):
            return self.already_done()
        wanted = context.repetitions
        context.observer.benchmark_started(self.name, 0, wanted)
        summary = run_chain(context.store, context.target, wanted, options=options,
                            command=context.step_command(self.name), on_progress=context.progress(self.name, wanted))
        context.record(self.name, summary.run_id)
        saturation = summary.saturation
        return StepOutcome(notes=[f"{self.name}: {len(summary.best_aggregate())} chain lengths, "
                                  + (f"the switch stopped scaling at {saturation} nodes" if saturation
                                     else "the aggregate kept scaling")])


@dataclass(frozen=True)
class StreamsOptions(StreamOptions):
    """Switchbench's pairwise streaming: its pair patterns, and the streams."""

    patterns: tuple[str, ...] = ("sort", "shuffle")
    port: int = option(DEFAULT_PORT, help="TCP port the servers listen on")

    def __post_init__(self) -> None:
        check_patterns(self.patterns, "streams' pair patterns")


class StreamsStep(Step):
    """Switchbench's pairwise streaming: every pair of a pattern streaming
    both ways at once."""

    name = "streams"
    stage = "interconnect"
    options = StreamsOptions
    series = (STREAM,)
    default = False
    min_nodes = 2
    summary = "Switchbench's pairwise streaming, both ways at once, in pair patterns"

    def run(self, context: StepContext, options: StreamsOptions) -> StepOutcome:
        return run_patterns(context, self.name, options.patterns, lambda pattern, step: run_streams(
            context.store, context.target, pattern, context.repetitions, options=options,
            command=context.step_command(step), on_progress=context.progress(step)))


class AllToAllStep(Step):
    """Switchbench's all-to-all: every node exchanging with every other."""

    name = "alltoall"
    stage = "interconnect"
    options = AllToAllOptions
    series = (ALLTOALL_BENCHMARK,)
    default = False
    min_nodes = 2
    summary = "Switchbench's all-to-all exchange over every node"

    def run(self, context: StepContext, options: AllToAllOptions) -> StepOutcome:
        if not context.run_once(self.name):
            return self.already_done()
        wanted = context.repetitions
        context.observer.benchmark_started(self.name, 0, wanted)
        summary = run_alltoall(context.store, context.target, wanted, options=options,
                               command=context.step_command(self.name), on_progress=context.progress(self.name))
        context.record(self.name, summary.run_id)
        best = summary.best()
        if best is None:
            return StepOutcome(notes=[f"{self.name}: no repetition in which every rank finished"])
        aggregate = f", aggregate {best.aggregate_bandwidth:.4g} MB/s" if best.aggregate_bandwidth else ""
        return StepOutcome(notes=[f"{self.name}: best of {wanted} over {len(summary.nodes)} nodes: "
                                  f"{best.total_seconds:.3g} s{aggregate}"])
