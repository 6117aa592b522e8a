"""The benchmarks a check runs on every node, stage by stage.

A benchmark is what the runner needs to know: the argv run on every node
and the parser of one node's stdout.  Each stage (memory, compute, disk)
has its own module building its specs; the runner (``oddnode.measure.runner``)
repeats them and stores everything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from oddnode.reach.jobs import parse_runner_output
from oddnode.core.model import Direction
from oddnode.parsers.base import ParsedOutput, ParseError

SeriesKey = tuple[str, str, str, Direction]  # benchmark, metric, unit, direction
# How much of a failing kernel's stderr a parse error quotes.
DETAIL_CHARS = 500


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark as the runner sees it: the argv run on every node, and the
    parser of one node's stdout (text, source) -> ParsedOutput.

    ``series`` names the series the benchmark writes; a node whose output
    cannot be parsed gets a failed row in each (one row named after the
    benchmark when empty), so the failure is kept where the analysis looks.
    ``synchronized``: ``argv`` runs the node runner, which can build first
    and then start every node of a repetition at the same moment.
    """

    name: str
    stage: str
    argv: list[str]
    parse: Callable[[str, str], ParsedOutput]
    series: tuple[SeriesKey, ...] = ()
    synchronized: bool = False


def parse_kernel_run(
    text: str, source: str, kernel: str, parse_kernel: Callable[[str, str], ParsedOutput]
) -> ParsedOutput:
    """The node runner's JSON report of one of our kernels, then the kernel's
    stdout inside it read by ``parse_kernel``; the build facts go into the
    configuration, and a failing exit status makes the run invalid."""
    report = parse_runner_output(source, text)
    try:
        parsed = parse_kernel(report.stdout, source)
    except ParseError as problem:
        if report.returncode != 0:
            stderr = report.stderr.strip()[:DETAIL_CHARS]
            raise ParseError(
                source, None, f"{kernel} kernel exited with status {report.returncode}: {stderr or problem.detail}"
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
    problems = parsed.problems + [f"{kernel} kernel exited with status {report.returncode}"]
    measurements = [replace(m, valid=False) for m in parsed.measurements]
    return ParsedOutput(parsed.tool, measurements, False, problems, configuration)
