"""The documents of the interconnect commands: ``pairs``, ``bisection``,
``matrix`` and ``switchbench``'s chain, stream and alltoall."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from oddnode.report.documents.shared import InterconnectDocument, NumberOrNull


class PairPattern(TypedDict):
    """One pattern's pairs: each pair's latency and bandwidth per message size."""

    benchmark: Any
    pattern: Any
    sizes: Any
    pairs: Any


class Pairs(InterconnectDocument):
    """Pair patterns: latency and bandwidth of every pair"""

    patterns: list[PairPattern]


class CutPair(TypedDict):
    """A pair across the cut: its bandwidth with every other pair at once and alone."""

    pair: str
    concurrent: NumberOrNull
    alone: NumberOrNull


class BisectionResult(TypedDict):
    """The bandwidth demonstrated across the cut against the full bisection."""

    nodes: NotRequired[Annotated[str, Field(description="folded")]]
    message_size: NotRequired[int]
    demonstrated: NumberOrNull
    full: NumberOrNull
    single_pair: NumberOrNull
    fraction: NumberOrNull
    pairs: int
    unit: str
    sums: list[NumberOrNull]
    cut_pairs: list[CutPair]


class Bisection(InterconnectDocument):
    """Bisection bandwidth"""

    bisection: BisectionResult


class MatrixResult(TypedDict):
    """Every ordered pair's results, rows and columns in the order of nodes."""

    nodes: list[str]
    bandwidth: list[list[NumberOrNull]]
    latency: list[list[NumberOrNull]]
    bandwidth_metric: NotRequired[str]
    bandwidth_unit: NotRequired[str]
    latency_metric: NotRequired[str]
    latency_unit: NotRequired[str]
    limit: NotRequired[NumberOrNull]
    verdicts: dict[str, Any]
    retested: NotRequired[dict[str, Any]]


class Matrix(InterconnectDocument):
    """Every ordered pair's bandwidth and latency"""

    matrix: Annotated[MatrixResult | None, Field(description="null when no pair gave a bandwidth")]


class ChainLength(TypedDict):
    """One chain length: its nodes, bandwidth summed over the hops and end to end."""

    length: int
    nodes: list[str]
    aggregate: NumberOrNull
    end_to_end: NumberOrNull
    gain_hops: NotRequired[NumberOrNull]


class ChainResult(TypedDict):
    """The chains of growing length and where the switch saturates."""

    unit: Any
    hop_rate: NumberOrNull
    saturation: int | None
    lengths: list[ChainLength]


class SwitchbenchChain(InterconnectDocument):
    """Daisy chains of growing length"""

    chain: ChainResult


class StreamPattern(TypedDict):
    """One pattern's streaming pairs."""

    pattern: Any
    unit: Any
    median_total: NotRequired[NumberOrNull]
    pairs: Any


class SwitchbenchStream(InterconnectDocument):
    """Pairwise streaming per pattern"""

    streams: list[StreamPattern]


class AlltoallResult(TypedDict):
    """The all-to-all: its phases, total time and aggregate bandwidth."""

    nodes: list[str]
    message_size: int
    unit: Any
    best_repetition: NotRequired[int | None]
    total_seconds: NumberOrNull
    aggregate_bandwidth: NumberOrNull
    phases: list[dict[str, Any]]
    phase_min_bandwidth: NotRequired[list[dict[str, Any]]]
    charged_nodes: list[str]
    problems: NotRequired[list[str]]


class SwitchbenchAlltoall(InterconnectDocument):
    """All-to-all phases"""

    alltoall: AlltoallResult
