"""The memory stage: our own kernel's copy, scale, add and triad bandwidths."""

from __future__ import annotations

from oddnode.benchmarks import BenchmarkSpec
from oddnode.kernels import (
    MEMORY_KERNELS,
    default_elements,
    last_level_cache_bytes,
    memory_kernel_argv,
    parse_memory_output,
    parse_runner_output,
)
from oddnode.model import Direction
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.units import canonical_unit

MEMORY_STAGE = "memory"
# How much of a failing kernel's stderr a parse error quotes.
DETAIL_CHARS = 500


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
