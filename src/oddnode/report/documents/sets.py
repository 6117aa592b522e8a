"""The documents of the node-set commands (``sets``, ``scale``, ``sync``)
and of ``sweep``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from typing_extensions import NotRequired, TypeAliasType, TypedDict

from oddnode.report.documents.shared import Direction, Findings, SetRun, SetTables


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


class SyncNodes(TypedDict):
    """One operation's per-node waits in one ordering."""

    operation: Any
    ordering: Any
    series: Any
    nodes: Any


class SyncScaling(TypedDict):
    """One operation's time against the node count and the curve fitted to it."""

    operation: Any
    ordering: Any
    points: Any
    fit: Any


class SyncResult(TypedDict):
    """Who waits for whom, and how the waits scale."""

    nodes: list[SyncNodes]
    scaling: list[SyncScaling]


class Sync(TypedDict):
    """Synchronisation: who waits for whom"""

    kernel: str
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
