"""The documents of the node-set commands (``sets``, ``scale``, ``sync``)
and of ``sweep``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypeAliasType, TypedDict

from oddnode.report.documents.shared import Direction, Findings, LabelKind, NumberOrNull, SetRun, SetTables


class Sets(TypedDict):
    """Node sets per ordering"""

    runs: Annotated[dict[str, SetRun], Field(description="each ordering's run")]
    sets: SetTables
    findings: Findings


class Scale(TypedDict):
    """Scaling curves of one set per node count"""

    runs: dict[str, SetRun]
    sets: SetTables
    findings: Findings


class SyncNodeAccount(TypedDict):
    """One node over every set run it was in."""

    node: str
    set_runs: Annotated[int, Field(ge=0)]
    iterations: Annotated[int, Field(ge=0)]
    last: Annotated[int, Field(ge=0, description="iterations it arrived last in")]
    expected_last: Annotated[NumberOrNull, Field(description="iterations it would be last in by chance")]
    last_pct: NumberOrNull
    chance_pct: NumberOrNull
    ratio: Annotated[NumberOrNull, Field(description="last over expected_last")]
    extra_wait_us: Annotated[NumberOrNull, Field(description="per iteration, what it made the others wait")]
    excess_wait_us: Annotated[NumberOrNull, Field(description="extra_wait_us beyond its set-mates' median")]
    excess_floor_us: Annotated[NumberOrNull, Field(description="the excess wait that matters for it")]
    time_us: NumberOrNull
    compute_us: NumberOrNull
    efficiency_pct: NumberOrNull
    dispersion: Annotated[NumberOrNull, Field(description="of the other ranks' last counts: 1 is binomial")]
    p: Annotated[NumberOrNull, Field(description="the one-sided chance of being last this often or more")]


class SyncNodes(TypedDict):
    """One operation's per-node waits in one ordering."""

    operation: Annotated[Literal["allreduce", "barrier"], Field(description="the collective")]
    ordering: str
    series: Annotated[str, Field(description="the per-rank series: sync.<operation>.<ordering>")]
    dispersion: Annotated[NumberOrNull, Field(description="of every rank's last counts: 1 is binomial")]
    nodes: Annotated[list[SyncNodeAccount], Field(description="in natural order")]


class SyncPoint(TypedDict):
    """The set runs of one node count: their medians and the line's value."""

    ranks: Annotated[int, Field(ge=1)]
    runs: Annotated[int, Field(ge=0)]
    time_us: NumberOrNull
    fitted_us: NumberOrNull
    error: Annotated[NumberOrNull, Field(description="(fitted - observed) / observed")]
    efficiency_pct: NumberOrNull
    wait_us: NumberOrNull
    extra_wait_us: NumberOrNull


class SyncLine(TypedDict):
    """time = a + b·ranks, least squares over every set run."""

    a_us: NumberOrNull
    b_us_per_rank: NumberOrNull
    runs: Annotated[int, Field(ge=0)]


class SyncExtrapolation(TypedDict):
    """The line's time per iteration at a larger node count (--extrapolate)."""

    ranks: int
    time_us: NumberOrNull
    compute_us: NumberOrNull
    efficiency_pct: NumberOrNull
    slowdown: Annotated[NumberOrNull, Field(description="time over the observed time at the smallest node count")]


class SyncScaling(TypedDict):
    """One operation's time against the node count and the curve fitted to it."""

    operation: Annotated[str, Field(description="the collective, as its series sync.<operation> names it")]
    ordering: str
    compute_us: Annotated[NumberOrNull, Field(description="the median compute per iteration")]
    points: Annotated[list[SyncPoint], Field(description="by node count")]
    fit: Annotated[SyncLine | None, Field(description="null with a single node count")]
    extrapolation: NotRequired[SyncExtrapolation]


class SyncResult(TypedDict):
    """Who waits for whom, and how the waits scale."""

    nodes: list[SyncNodes]
    scaling: list[SyncScaling]


class Sync(TypedDict):
    """Synchronisation: who waits for whom"""

    kernel: Literal["mpi_sync", "tcp_sync"]
    runs: dict[str, SetRun]
    sync: SyncResult
    findings: Findings


class SweepSeries(TypedDict):
    """One series over the settings swept."""

    benchmark: str
    unit: str
    direction: Direction
    rows: list[Any]


class SweepAnalysis(TypedDict):
    """The sweep's analysis: each series' rows per setting."""

    sweep_id: int
    step: str
    repetitions: NotRequired[int]
    seed: NotRequired[int | None]
    alpha: NotRequired[float]
    min_effect: NotRequired[float]
    started: NotRequired[Annotated[str | None, Field(description="ISO 8601")]]
    parameters: NotRequired[list[dict[str, Any]]]
    settings: list[Any]
    series: list[SweepSeries]


class Sweep(TypedDict):
    """A sweep of settings and its analysis"""

    format: str
    version: int
    analysis: SweepAnalysis
    run: NotRequired[Annotated[dict[str, Any] | None, Field(description="the run just made; null with --stored")]]


class StoredSweep(TypedDict):
    """A stored sweep."""

    sweep: Any
    started: Any
    step: Any
    rounds: Any
    runs: Any
    command: Any


SweepList = TypeAliasType("SweepList", Annotated[list[StoredSweep], Field(description="The stored sweeps")])
