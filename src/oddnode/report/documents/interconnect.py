"""The documents of the interconnect commands: ``pairs``, ``bisection``,
``matrix`` and ``switchbench``'s chain, stream and alltoall."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, with_config
from typing_extensions import NotRequired, TypedDict

from oddnode.report.documents.shared import InterconnectDocument, NetworkRun, NumberOrNull, OutcomeCounts, RunEstimate

# The unit of every bandwidth the interconnect tables print (10^6 bytes per second).
MegabytesPerSecond = Literal["MB/s"]
# The pair patterns a run is planned by (oddnode.readings.patterns: PATTERNS and FILE_PATTERN).
PatternName = Literal["sort", "cut", "fold", "shuffle", "random", "file"]
# A slow matrix pair's verdict (oddnode.readings.interconnect_series: BAD_LINK, CONTENTION, NOT_RETESTED).
LinkVerdict = Literal["bad-link", "contention", "not-retested"]
# A bandwidth keyed by pair label (or a chain length), null where none was measured.
ValuesByLabel = dict[str, NumberOrNull]


# --- each command's runs, as its runner summarised them -------------------------------


class PairPlanEntry(TypedDict):
    """One repetition's (or round's) pairs, who sat out, its seed and pairs file."""

    repetition: int
    pairs: list[str]
    idle: list[str]
    seed: int | None
    source: Annotated[str | None, Field(description="the pairs file a file pattern read; null otherwise")]


@with_config({"extra": "forbid"})
class PatternRun(NetworkRun):
    """A pattern run of ``pairs`` (or of the check's interconnect stage)."""

    pattern: str
    plans: list[PairPlanEntry]


@with_config({"extra": "forbid"})
class BisectionFiguresEntry(TypedDict):
    pairs: int
    demonstrated: NumberOrNull
    single_pair: NumberOrNull
    full: NumberOrNull
    fraction: NumberOrNull


@with_config({"extra": "forbid"})
class BisectionRun(NetworkRun):
    """The cut pairs at once and each alone."""

    nodes: Annotated[str, Field(description="folded")]
    message_size: int
    seconds: float
    both: bool
    pairs: list[str]
    figures: BisectionFiguresEntry
    sums: Annotated[list[NumberOrNull], Field(description="the bandwidth demonstrated in each repetition")]
    concurrent: Annotated[ValuesByLabel, Field(description="each cut pair's best bandwidth, all at once")]
    alone: Annotated[ValuesByLabel, Field(description="each cut pair's best bandwidth alone")]


@with_config({"extra": "forbid"})
class MatrixRetestRound(TypedDict):
    level: int
    concurrency: int
    pairs: list[str]


@with_config({"extra": "forbid"})
class MatrixRun(NetworkRun):
    """Every ordered pair in rounds of disjoint pairs, the slow ones retested."""

    rounds: int
    metric: str
    limit: Annotated[NumberOrNull, Field(description="below it a pair is slow")]
    values: ValuesByLabel
    retests: list[MatrixRetestRound]
    retest_values: ValuesByLabel
    verdicts: dict[str, LinkVerdict]


@with_config({"extra": "forbid"})
class ChainPointEntry(TypedDict):
    length: int
    repetition: int
    nodes: list[str]
    end_to_end: NumberOrNull
    aggregate: NumberOrNull
    valid: bool
    problem: str | None


@with_config({"extra": "forbid"})
class ChainRun(NetworkRun):
    """Switchbench's daisy chain at every length."""

    saturation: Annotated[int | None, Field(description="the chain length where the aggregate stops growing")]
    best_aggregate: Annotated[ValuesByLabel, Field(description="chain length -> best aggregate bandwidth")]
    points: list[ChainPointEntry]
    message_size: int


@with_config({"extra": "forbid"})
class StreamRateEntry(TypedDict):
    pair: str
    client: str
    server: str
    repetition: int
    client_to_server: NumberOrNull
    server_to_client: NumberOrNull
    total: NumberOrNull
    valid: bool
    problem: str | None


@with_config({"extra": "forbid"})
class StreamRun(PatternRun):
    """Switchbench's pairwise streaming over one pattern."""

    rates: list[StreamRateEntry]
    message_size: int


@with_config({"extra": "forbid"})
class AlltoallPhaseEntry(TypedDict):
    phase: int
    min_bandwidth: NumberOrNull
    median_bandwidth: NumberOrNull
    slowest_receiver: str | None
    slowest_sender: str | None


@with_config({"extra": "forbid"})
class AlltoallRepetition(TypedDict):
    repetition: int
    total_seconds: NumberOrNull
    aggregate_bandwidth: NumberOrNull
    valid: bool
    problems: list[str]
    phases: list[AlltoallPhaseEntry]


@with_config({"extra": "forbid"})
class AlltoallRun(NetworkRun):
    """Switchbench's all-to-all phases."""

    nodes: list[str]
    message_size: int
    per_node: dict[str, OutcomeCounts]
    per_repetition: list[AlltoallRepetition]
    seed: int


class PatternSpread(TypedDict):
    """A quantity over a pattern's pairs at one message size."""

    min: NumberOrNull
    median: NumberOrNull
    mean: NumberOrNull
    max: NumberOrNull


class PatternSize(TypedDict):
    """One message size of a pattern: bandwidth and latency over its pairs."""

    size: Annotated[int, Field(ge=0, description="bytes")]
    n: Annotated[int, Field(ge=0, description="the pairs measured at this size")]
    bandwidth: Annotated[PatternSpread | None, Field(description="null where no pair has a bandwidth")]
    latency: Annotated[PatternSpread | None, Field(description="null where no pair has a latency")]


class PatternSlowPair(TypedDict):
    """One of a pattern's slowest pairs on its judged metric."""

    pair: str
    value: NumberOrNull
    percent_of_median: NumberOrNull


class PatternPairValues(TypedDict):
    """One pair's best latency and bandwidth by message size."""

    pair: str
    latency: Annotated[dict[str, NumberOrNull], Field(description="by message size in bytes (\"0\", \"65536\")")]
    bandwidth: Annotated[dict[str, NumberOrNull], Field(description="by message size in bytes (\"0\", \"65536\")")]


class PairPattern(TypedDict):
    """One pattern's pairs: each pair's latency and bandwidth per message size."""

    benchmark: Annotated[str, Field(
        description="pingpong.<pattern>[@<network>], mpi.<pattern> or a site's own pair series")]
    pattern: Annotated[str, Field(description="the pattern (sort, cut, ...); a site's own series' name whole")]
    network: Annotated[str | None, Field(
        description="the network of `pairs --network NAME=...` (pingpong.sort@NAME); null for the one node names "
                    "reach")]
    latency_unit: str
    bandwidth_unit: str
    sizes: list[PatternSize]
    fit_latency_median: Annotated[NumberOrNull, Field(description="the pairs' median fitted latency; null unfitted")]
    fit_bandwidth_median: Annotated[NumberOrNull, Field(
        description="the pairs' median fitted bandwidth; null unfitted")]
    slowest_metric: Annotated[str | None, Field(description="the metric the slowest pairs are judged by")]
    slowest: list[PatternSlowPair]
    pairs: list[PatternPairValues]


class Pairs(InterconnectDocument):
    """Pair patterns: latency and bandwidth of every pair"""

    runs: dict[str, PatternRun]

    patterns: list[PairPattern]
    estimate: NotRequired[RunEstimate]


class CutPair(TypedDict):
    """A pair across the cut: its bandwidth with every other pair at once and alone."""

    pair: str
    concurrent: NumberOrNull
    alone: NumberOrNull


class BisectionResult(TypedDict):
    """The bandwidth demonstrated across the cut against the full bisection."""

    nodes: Annotated[str, Field(description="folded")]
    message_size: int
    demonstrated: NumberOrNull
    full: NumberOrNull
    single_pair: NumberOrNull
    fraction: NumberOrNull
    pairs: int
    unit: MegabytesPerSecond
    sums: list[NumberOrNull]
    cut_pairs: list[CutPair]


class Bisection(InterconnectDocument):
    """Bisection bandwidth"""

    runs: dict[str, BisectionRun]

    bisection: BisectionResult


class MatrixResult(TypedDict):
    """Every ordered pair's results, rows and columns in the order of nodes."""

    nodes: list[str]
    bandwidth: list[list[NumberOrNull]]
    latency: Annotated[list[list[NumberOrNull]] | None, Field(description="null when no latency was measured")]
    bandwidth_metric: str
    bandwidth_unit: str
    latency_metric: str | None
    latency_unit: Annotated[str, Field(description="empty when no latency was measured")]
    limit: Annotated[NumberOrNull, Field(description="below it a pair is slow")]
    verdicts: Annotated[dict[str, LinkVerdict], Field(description="each slow pair's verdict")]
    retested: Annotated[dict[str, NumberOrNull], Field(description="each retested pair's best bandwidth retested")]


class Matrix(InterconnectDocument):
    """Every ordered pair's bandwidth and latency"""

    runs: dict[str, MatrixRun]

    matrix: Annotated[MatrixResult | None, Field(description="null when no pair gave a bandwidth")]


class ChainLength(TypedDict):
    """One chain length: its nodes, bandwidth summed over the hops and end to end."""

    length: int
    joined: Annotated[str, Field(description="the node this length added")]
    nodes: list[str]
    aggregate: NumberOrNull
    end_to_end: NumberOrNull
    gain_hops: Annotated[NumberOrNull, Field(description="the aggregate's gain over the previous length, in hops")]
    problem: Annotated[str | None, Field(description="why no repetition streamed; null when one did")]


class ChainResult(TypedDict):
    """The chains of growing length and where the switch saturates."""

    unit: MegabytesPerSecond
    hop_rate: NumberOrNull
    saturation: int | None
    lengths: list[ChainLength]


class SwitchbenchChain(InterconnectDocument):
    """Daisy chains of growing length"""

    runs: dict[str, ChainRun]
    chain: ChainResult


class StreamPair(TypedDict):
    """One pair's best repetition each way and both together; nulls and its problem when it failed."""

    pair: str
    client_to_server: NumberOrNull
    server_to_client: NumberOrNull
    total: NumberOrNull
    percent_of_median: NumberOrNull
    problem: str | None


class StreamPattern(TypedDict):
    """One pattern's streaming pairs."""

    pattern: PatternName
    unit: MegabytesPerSecond
    median_total: Annotated[NumberOrNull, Field(description="the pairs' median total; null without one")]
    pairs: Annotated[list[StreamPair], Field(description="slowest first, failed first of all")]


class SwitchbenchStream(InterconnectDocument):
    """Pairwise streaming per pattern"""

    runs: dict[str, StreamRun]
    streams: list[StreamPattern]


class AlltoallPhase(TypedDict):
    """One phase of the fastest complete repetition: the lowest and the median receive bandwidth."""

    phase: int
    min_bandwidth: NumberOrNull
    median_bandwidth: NumberOrNull
    slowest_receiver: Annotated[str, Field(description="the node that received at the lowest bandwidth")]
    slowest_sender: Annotated[str, Field(description="the node it received from")]


class AlltoallPhaseMinimum(TypedDict):
    """One phase's best minimum bandwidth over the valid repetitions."""

    phase: int
    min_bandwidth: NumberOrNull


class AlltoallResult(TypedDict):
    """The all-to-all: its phases, total time and aggregate bandwidth."""

    nodes: list[str]
    message_size: int
    unit: MegabytesPerSecond
    best_repetition: Annotated[int | None, Field(description="the fastest complete repetition; null without one")]
    total_seconds: NumberOrNull
    aggregate_bandwidth: NumberOrNull
    phases: list[AlltoallPhase]
    phase_min_bandwidth: list[AlltoallPhaseMinimum]
    charged_nodes: list[str]
    problems: list[str]


class SwitchbenchAlltoall(InterconnectDocument):
    """All-to-all phases"""

    runs: dict[str, AlltoallRun]

    alltoall: AlltoallResult
