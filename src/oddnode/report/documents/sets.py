"""The documents of the node-set commands (``sets``, ``scale``, ``sync``)
and of ``sweep``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypeAliasType, TypedDict

from oddnode.report.documents.shared import (Direction, Findings, LabelKind, NumberOrNull, RunEstimate, SetRun,
                                             SetTables)


class Sets(TypedDict):
    """Node sets per ordering"""

    runs: Annotated[dict[str, SetRun], Field(description="each ordering's run")]
    sets: SetTables
    findings: Findings
    estimate: NotRequired[RunEstimate]


class Scale(TypedDict):
    """Scaling curves of one set per node count"""

    runs: dict[str, SetRun]
    sets: SetTables
    findings: Findings
    estimate: NotRequired[RunEstimate]


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
    steady_excess_us: Annotated[NumberOrNull, Field(description="the excess wait it caused in at least half of "
                                                                "its set runs: the one judged")]
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


class SweepParameter(TypedDict):
    """One parameter of a sweep's grid, swept or fixed (one value)."""

    kind: Annotated[Literal["env", "option"], Field(description="an environment variable or a step option")]
    name: Annotated[str, Field(description="NAME or STEP.OPTION")]
    values: list[str]
    default: Annotated[int, Field(ge=0, description="the index of its default value")]


class SweepSetting(TypedDict):
    """One setting of a sweep: a value of every parameter."""

    setting: Annotated[str, Field(description="the values of the swept parameters; default when none is")]
    index: Annotated[int, Field(ge=0)]
    default: bool
    env: dict[str, str]
    options: dict[str, str]
    failed: Annotated[int, Field(ge=0, description="its results that were invalid or empty")]


class SweepMedian(TypedDict):
    """One setting's median at one size and the number of values behind it."""

    setting: str
    median: Annotated[NumberOrNull, Field(description="null without valid results")]
    n: Annotated[int, Field(ge=0)]


class SweepTest(TypedDict):
    """One setting against the default at one size."""

    p: NumberOrNull
    p_holm: Annotated[NumberOrNull, Field(description="null when Tarone's rule left the test out")]
    statistic: Annotated[NumberOrNull, Field(description="> 0: the setting's values rank above the default's")]
    method: str


class SweepRow(TypedDict):
    """One message size (or metric) of a series: every setting's median, the best and its test."""

    metric: str
    size: int | None
    settings: list[SweepMedian]
    best: str | None
    change: Annotated[NumberOrNull, Field(description="(best - default) / |default|")]
    p: NumberOrNull
    p_holm: NumberOrNull
    method: str | None
    significant: bool
    reason: Annotated[str | None, Field(description="why the best is not significant")]
    tests: Annotated[dict[str, SweepTest], Field(description="each non-default setting's test")]


class SweepSeries(TypedDict):
    """One series over the settings swept."""

    benchmark: str
    family: Annotated[str, Field(description="the metric's family: its name less the message size")]
    unit: str
    direction: Direction
    label_kind: LabelKind
    rows: list[SweepRow]


class SweepAnalysis(TypedDict):
    """The sweep's analysis: each series' rows per setting."""

    sweep_id: int
    step: str
    repetitions: int
    seed: int
    alpha: float
    min_effect: float
    started: Annotated[str | None, Field(description="ISO 8601")]
    parameters: list[SweepParameter]
    settings: list[SweepSetting]
    series: list[SweepSeries]


class SweepGrid(TypedDict):
    """A sweep's step and its parameters."""

    step: str
    parameters: list[SweepParameter]


class SweepTurn(TypedDict):
    """One setting's turn in one round."""

    setting: Annotated[int, Field(ge=0, description="the setting's index")]
    round: Annotated[int, Field(ge=1)]
    position: Annotated[int, Field(ge=1, description="its place in the round's order")]
    runs: Annotated[list[int], Field(description="the ids of the runs it stored")]
    notes: list[str]


class SweepRan(TypedDict):
    """What a sweep ran: its grid, rounds, seed and every turn in order."""

    sweep_id: int
    grid: SweepGrid
    repetitions: int
    seed: int
    turns: list[SweepTurn]


class Sweep(TypedDict):
    """A sweep of settings and its analysis"""

    format: str
    version: int
    analysis: SweepAnalysis
    run: NotRequired[Annotated[SweepRan, Field(description="the run just made; absent with --stored")]]


class StoredSweep(TypedDict):
    """A stored sweep, every value as text."""

    sweep: Annotated[str, Field(description="its id")]
    started: Annotated[str, Field(description="YYYY-MM-DD HH:MM; - when unknown")]
    step: str
    rounds: str
    runs: Annotated[str, Field(description="how many runs it stored")]
    command: str


SweepList = TypeAliasType("SweepList", Annotated[list[StoredSweep], Field(description="The stored sweeps")])
