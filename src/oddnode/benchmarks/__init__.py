"""The benchmarks a check runs on every node, stage by stage.

A benchmark is what the runner needs to know: the argv run on every node
and the parser of one node's stdout.  Each stage (memory, compute, disk)
has its own module building its specs; the runner (``oddnode.runner``)
repeats them and stores everything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from oddnode.model import Direction
from oddnode.parsers.base import ParsedOutput

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
