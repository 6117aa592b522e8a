"""Run a benchmark STAB's way: R repetitions, all nodes at once in each, every
run validated and stored, the best valid run per node analysed.

Each repetition is stored in its own transaction as soon as it ends, so an
interrupt (Ctrl-C, a lost allocation) keeps every finished repetition.  A node
that fails one repetition still runs the next ones: nothing it gave is lost,
and its troubles are kept per repetition in ``node_status``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from oddnode.check import Target
from oddnode.kernels import (
    MEMORY_KERNELS,
    default_elements,
    last_level_cache_bytes,
    memory_kernel_argv,
    parse_memory_output,
    parse_runner_output,
)
from oddnode.model import DEFAULT_METRIC, Direction, LabelKind
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.store import ResultBatch, Store
from oddnode.transport.base import NodeResult, NodeStatus
from oddnode.units import canonical_unit

MEMORY_STAGE = "memory"
DEFAULT_REPETITIONS = 5  # STAB's default: enough for a best-of that shrugs off one noisy run
DEFAULT_TIMEOUT = 600.0  # seconds one repetition may take on a node, build included
# How much of a bad output a node-status detail quotes.
DETAIL_CHARS = 500
# Configuration keys of a parsed run that are stored with each of its results:
# what the node really used (threads counted, affinity) and which build ran.
EFFECTIVE_KEYS = ("threads_counted", "proc_bind", "compiler", "cache_key", "cpu_model")
# Outcome counts kept per node in a RunSummary.
OUTCOMES = ("ok", "invalid", "failed", "unreachable", "timeout")

SeriesKey = tuple[str, str, str, Direction]  # benchmark, metric, unit, direction


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark as the runner sees it: the argv run on every node, and the
    parser of one node's stdout (text, source) -> ParsedOutput.

    ``series`` names the series the benchmark writes; a node whose output
    cannot be parsed gets a failed row in each (one row named after the
    benchmark when empty), so the failure is kept where the analysis looks.
    """

    name: str
    stage: str
    argv: list[str]
    parse: Callable[[str, str], ParsedOutput]
    series: tuple[SeriesKey, ...] = ()


def _parse_memory_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report, then the memory kernel's stdout inside it;
    the build facts go into the configuration."""
    report = parse_runner_output(source, text)
    try:
        parsed = parse_memory_output(report.stdout, source)
    except ParseError as problem:
        if report.returncode != 0:
            stderr = report.stderr.strip()[:DETAIL_CHARS]
            raise ParseError(
                source, None, f"memory kernel exited with status {report.returncode}: {stderr or problem.detail}"
            ) from None
        raise
    configuration = dict(parsed.configuration)
    configuration.update(
        compiler=report.compiler,
        cache_key=report.cache_key,
        cpu_model=report.cpu_model,
        built=report.built,
        build_seconds=report.build_seconds,
        flags=report.flags,
    )
    if report.returncode == 0:
        return ParsedOutput(parsed.tool, parsed.measurements, parsed.valid, parsed.problems, configuration)
    # Complete output but a failing exit status: keep the numbers, trust none.
    problems = parsed.problems + [f"memory kernel exited with status {report.returncode}"]
    measurements = [
        Measurement(m.benchmark, m.value, m.unit, m.direction, m.metric, False, m.parameters)
        for m in parsed.measurements
    ]
    return ParsedOutput(parsed.tool, measurements, False, problems, configuration)


def memory_benchmark(elements: int | None = None, ntimes: int = 10, threads: int | None = None) -> BenchmarkSpec:
    """The memory kernel (copy, scale, add, triad bandwidths) as a benchmark.

    ``elements`` defaults to what the last-level cache of THIS machine needs
    (each array >= 4x the LLC, see default_elements); nodes with a larger
    cache need more, so on a mixed cluster pass the size for the largest LLC.
    ``threads`` None keeps each node's OMP_NUM_THREADS (all cores by default).
    """
    if elements is None:
        elements = default_elements(last_level_cache_bytes())
    unit = canonical_unit("MB/s")  # the kernel's MB is 10^6 bytes
    return BenchmarkSpec(
        name="memory",
        stage=MEMORY_STAGE,
        argv=memory_kernel_argv(elements, ntimes, threads),
        parse=_parse_memory_run,
        series=tuple((f"memory.{kernel}", "bandwidth", unit, Direction.HIGHER) for kernel in MEMORY_KERNELS),
    )


@dataclass
class RunSummary:
    """What a benchmark run stored: its run id, the repetitions done, and per
    node how many repetitions ended in each outcome (see OUTCOMES)."""

    run_id: int
    repetitions: int
    per_node: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class _NodeOutcome:
    status: str  # a node_status status: ok, failed, unreachable, timeout
    outcome: str  # one of OUTCOMES
    detail: str | None


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "..."


def _failed_rows(batch: ResultBatch, spec: BenchmarkSpec, node: str, repetition: int,
                 reason: str, raw_ref: str) -> None:
    """A run that gave no numbers still leaves a row (value NULL, invalid)."""
    series = spec.series or ((spec.name, DEFAULT_METRIC, "", Direction.HIGHER),)
    for benchmark, metric, unit, direction in series:
        batch.add(benchmark, node, None, metric=metric, unit=unit, direction=direction,
                  label_kind=LabelKind.NODE, repetition=repetition, valid=False,
                  parameters={"error": reason}, raw_ref=raw_ref)


def _record_node(batch: ResultBatch, spec: BenchmarkSpec, result: NodeResult, repetition: int) -> _NodeOutcome:
    """Add one node's rows for one repetition and say how it fared."""
    node = result.node
    raw_ref = f"raw:{spec.stage}:{node}:{repetition}"
    if result.status in (NodeStatus.UNREACHABLE, NodeStatus.TIMEOUT):
        detail = f"repetition {repetition}: {_quote(result.stderr) or result.status.value}"
        return _NodeOutcome(result.status.value, result.status.value, detail)
    if result.status is NodeStatus.FAILED:
        reason = f"exited with status {result.exit_code}: {_quote(result.stderr) or 'no message'}"
        _failed_rows(batch, spec, node, repetition, reason, raw_ref)
        return _NodeOutcome("failed", "failed", f"repetition {repetition}: {reason}")
    try:
        parsed = spec.parse(result.stdout, raw_ref)
    except ParseError as problem:
        reason = _quote(str(problem))
        _failed_rows(batch, spec, node, repetition, reason, raw_ref)
        return _NodeOutcome("failed", "failed", f"repetition {repetition}: {reason}")
    effective = {key: parsed.configuration[key] for key in EFFECTIVE_KEYS if key in parsed.configuration}
    for m in parsed.measurements:
        batch.add(m.benchmark, node, m.value, metric=m.metric, unit=m.unit, direction=m.direction,
                  label_kind=LabelKind.NODE, repetition=repetition, valid=parsed.valid and m.valid,
                  parameters={**m.parameters, **effective}, raw_ref=raw_ref)
    if parsed.valid:
        return _NodeOutcome("ok", "ok", None)
    # It answered and its numbers are stored (invalid); the analysis reports
    # them as accuracy failures, so the node itself counts as reachable.
    return _NodeOutcome("ok", "invalid", f"repetition {repetition}: {'; '.join(parsed.problems)}")


def run_benchmark(
    store: Store,
    target: Target,
    spec: BenchmarkSpec,
    repetitions: int = DEFAULT_REPETITIONS,
    timeout: float = DEFAULT_TIMEOUT,
    on_progress: Callable[[int, int], None] | None = None,
    command: str = "oddnode run",
) -> RunSummary:
    """Run ``spec`` ``repetitions`` times on every node of ``target`` at once,
    storing each repetition (results, raw outputs, node status) in one
    transaction; ``on_progress(done, total)`` after each one is stored."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    with store.transaction():
        run_id = store.new_run(command, source=f"{target.transport.name}:{target.nodeset}")
    summary = RunSummary(run_id, 0, {node: dict.fromkeys(OUTCOMES, 0) for node in target.nodes})
    for repetition in range(1, repetitions + 1):
        results = target.transport.run(target.nodes, spec.argv, timeout=timeout)
        batch = ResultBatch()
        statuses: list[tuple[str, str, str | None]] = []
        raw: list[tuple[str, str, str]] = []
        for node in target.nodes:
            result = results.get(node) or NodeResult(
                node, NodeStatus.UNREACHABLE, "", "the transport returned no result for this node", None, 0.0
            )
            outcome = _record_node(batch, spec, result, repetition)
            statuses.append((node, outcome.status, outcome.detail))
            raw.append((node, result.stdout, result.stderr))
            summary.per_node[node][outcome.outcome] += 1
        with store.transaction():
            store.add_results(run_id, batch)
            for node, stdout, stderr in raw:
                store.add_raw_output(run_id, spec.stage, node, repetition, stdout, stderr)
            store.add_node_status(run_id, spec.stage, statuses)
        summary.repetitions = repetition
        if on_progress is not None:
            on_progress(repetition, repetitions)
    return summary

