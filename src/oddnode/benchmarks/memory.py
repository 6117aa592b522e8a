"""The memory stage: our own kernel's copy, scale, add and triad bandwidths."""

from __future__ import annotations

from dataclasses import dataclass

from oddnode.benchmarks import BenchmarkSpec, parse_kernel_run
from oddnode.kernels import (
    MEMORY_KERNELS,
    default_elements,
    last_level_cache_bytes,
    memory_kernel_argv,
    parse_memory_output,
)
from oddnode.model import Direction
from oddnode.parsers.base import ParsedOutput
from oddnode.steps import NodeBenchmark, register_step
from oddnode.units import canonical_unit

MEMORY_STAGE = "memory"


def _parse_memory_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report, then the memory kernel's stdout inside it."""
    return parse_kernel_run(text, source, "memory", parse_memory_output)


@dataclass(frozen=True)
class MemoryOptions:
    """The memory kernel's options.

    ``elements`` defaults to what the last-level cache of THIS machine needs
    (each array >= 4x the LLC, see default_elements); nodes with a larger
    cache need more, so on a mixed cluster pass the size for the largest LLC.
    ``threads`` None keeps each node's OMP_NUM_THREADS (all cores by default).
    ``min_loop_seconds`` > 0 makes each timed loop last about that long.
    """

    elements: int | None = None
    ntimes: int = 10  # timed iterations, the first discarded
    threads: int | None = None
    min_loop_seconds: float = 0.0


@register_step
class MemoryStep(NodeBenchmark):
    """The memory kernel's copy, scale, add and triad bandwidths on every node."""

    name = "memory"
    stage = MEMORY_STAGE
    options = MemoryOptions
    series = ("memory",)
    summary = "copy, scale, add and triad bandwidth (oddnode's STREAM kernel)"

    def spec(self, options: MemoryOptions) -> BenchmarkSpec:
        elements = options.elements
        if elements is None:
            elements = default_elements(last_level_cache_bytes())
        unit = canonical_unit("MB/s")  # the kernel's MB is 10^6 bytes
        return BenchmarkSpec(
            name=self.name,
            stage=self.stage,
            argv=memory_kernel_argv(elements, options.ntimes, options.threads,
                                    min_loop_seconds=options.min_loop_seconds),
            parse=_parse_memory_run,
            series=tuple((f"memory.{kernel}", "bandwidth", unit, Direction.HIGHER) for kernel in MEMORY_KERNELS),
            synchronized=True,
        )


def memory_benchmark(*args, **options) -> BenchmarkSpec:
    """The memory kernel as a benchmark, with MemoryOptions' fields."""
    return MemoryStep().spec(MemoryOptions(*args, **options))
