"""Which benchmarks each stage of a check runs, in STAB's order: memory
first (if it is ruled out, later anomalies cannot be blamed on it), then
the processor, then the disk, then the interconnect (ping-pong patterns and
bisection bandwidth, between pairs of nodes rather than on each node).

Benchmarks are named here and built from plain parameters, so that a check's
plan can be stored as JSON and rebuilt when the check is resumed.
"""

from __future__ import annotations

import importlib
from typing import Any

from oddnode.benchmarks import BenchmarkSpec

STAGES = ("memory", "compute", "disk", "interconnect")
INTERCONNECT = "interconnect"

# benchmark name -> (stage, "module:function" building its spec from keyword parameters)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "memory": ("memory", "oddnode.benchmarks.memory:memory_benchmark"),
    "dgemm": ("compute", "oddnode.benchmarks.compute:dgemm_benchmark"),
    "hpl": ("compute", "oddnode.benchmarks.compute:hpl_benchmark"),
    "disk": ("disk", "oddnode.benchmarks.disk:disk_benchmark"),
    # The interconnect's steps are not node benchmarks: "pairs" builds the
    # ping-pong options of its patterns, "bisection" the streams' options.
    "pairs": (INTERCONNECT, "oddnode.interconnect.pairs:pairs_step"),
    "bisection": (INTERCONNECT, "oddnode.interconnect.bisection:bisection_step"),
}
# Prefixes of the series the interconnect's runners store (pingpong.sort,
# bisection.cut, stream.shuffle, chain, alltoall).
INTERCONNECT_SERIES = ("pingpong", "mpi", "bisection", "stream", "chain", "alltoall")


class UnknownBenchmarkError(KeyError):
    def __str__(self) -> str:
        return f"no benchmark named {self.args[0]!r} (known: {', '.join(BENCHMARKS)})"


def stage_of(benchmark: str) -> str:
    """The stage of a benchmark named in the catalog."""
    try:
        return BENCHMARKS[benchmark][0]
    except KeyError:
        raise UnknownBenchmarkError(benchmark) from None


def benchmarks_of(stage: str) -> list[str]:
    return [name for name, (where, _) in BENCHMARKS.items() if where == stage]


def build(benchmark: str, parameters: dict[str, Any] | None = None) -> Any:
    """The spec of a catalog benchmark with the given parameters (for an
    interconnect step, the options it runs with)."""
    stage_of(benchmark)
    module, function = BENCHMARKS[benchmark][1].split(":")
    return getattr(importlib.import_module(module), function)(**(parameters or {}))


def series_stage(benchmark: str) -> str | None:
    """The stage a stored series belongs to: its benchmark name's prefix
    (``memory.triad``, ``compute.dgemm``, ``disk.seq_read``), if a stage's."""
    prefix = benchmark.split(".", 1)[0]
    if prefix in INTERCONNECT_SERIES:
        return INTERCONNECT
    return prefix if prefix in STAGES else None
