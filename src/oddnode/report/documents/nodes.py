"""The documents of the commands about nodes: ``inventory``, ``diagnose``,
``processes``, ``affinity``, ``numa``, ``model``, ``profile``, ``config
show`` and ``health``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, with_config
from typing_extensions import NotRequired, TypeAliasType, TypedDict

from oddnode.report.documents.shared import Findings, HealthProblem, NumberOrNull, RunReference, SlurmAction


class Unanswered(TypedDict):
    """Why a node gave no answer."""

    status: str
    reason: str


class Inventory(TypedDict):
    """Every node's facts and the facts that differ"""

    version: int
    run_id: int | None
    transport: str
    nodes: Annotated[str, Field(description="the nodes asked, folded")]
    answered: Annotated[str, Field(description="the nodes that answered, folded")]
    facts: Annotated[dict[str, dict[str, str | float | None]], Field(description="each node's facts by name")]
    differing: Annotated[dict[str, dict[str, Any]], Field(description="the facts whose values differ between nodes")]
    unanswered: dict[str, Unanswered]
    skipped: dict[str, Any]
    findings: Findings


class ExpectationVerdict(TypedDict):
    """One expectation's verdict and the nodes that pass and fail it."""

    key: str
    verdict: str
    passed: str
    failed: str


class Diagnose(TypedDict):
    """Every expectation's verdict per node"""

    version: int
    expectations: Annotated[str, Field(description="the expectations file")]
    nodes: str
    ok: bool
    checked: list[ExpectationVerdict]
    findings: Findings


class NodeProcesses(TypedDict):
    """The commands one node ran and how they were counted."""

    method: str
    seconds: NumberOrNull
    commands: dict[str, Any]


class ProcessTable(TypedDict):
    """The commands' asymmetry between nodes, grouped one way."""

    grouped_by: Any
    rows: Any


class Processes(TypedDict):
    """Commands each node runs and their asymmetry"""

    run_id: int | None
    nodes: dict[str, NodeProcesses]
    unanswered: dict[str, str | dict[str, Any]]
    tables: list[ProcessTable]
    findings: Findings


class ProcessThreads(TypedDict):
    """A process and where its threads ran."""

    pid: int
    comm: str
    threads: list[Any]


class NodeAffinity(TypedDict):
    """One node's topology and its processes."""

    hostname: str
    topology: dict[str, Any]
    processes: list[ProcessThreads]


class Affinity(TypedDict):
    """Where each process's threads ran"""

    nodes: dict[str, NodeAffinity]
    unanswered: dict[str, str]
    findings: Findings


class NumaRun(RunReference):
    """The NUMA run: its repetitions, each node's layout and the cells measured."""

    repetitions: int
    layouts: dict[str, Any]
    unanswered: dict[str, str]
    cells: list[Any]


class Numa(TypedDict):
    """NUMA cells: every CPU node against every memory node"""

    run: NumaRun
    numa: dict[str, Any]
    findings: Findings


class ModelSelection(TypedDict):
    """The profile's ranks and hosts, and the points the model is fitted to."""

    ranks: int
    hosts: list[str]
    points: list[Any]


class Placement(TypedDict):
    """A candidate placement: its nodes, the time predicted and the times measured."""

    name: str
    aliases: NotRequired[list[str]]
    members: list[str]
    groups: NotRequired[list[str]]
    predictions_s: dict[str, NumberOrNull]
    measured_s: dict[str, dict[str, NumberOrNull]]


class Model(TypedDict):
    """A profiled job's time predicted on candidate placements"""

    profile_id: int | None
    run_id: int | None
    selection: ModelSelection
    placements: list[Placement]
    best: str | None
    notes: list[str]
    problems: list[Any]
    findings: Findings
    factor: NotRequired[NumberOrNull]
    medians_s: NotRequired[dict[str, NumberOrNull]]


class ProfileRank(TypedDict):
    """A rank and its host (null when the profile does not say)."""

    rank: int
    host: str | None
    wall: NotRequired[NumberOrNull]
    mpi_time: NotRequired[NumberOrNull]
    compute_time: NotRequired[NumberOrNull]
    cpu: NotRequired[NumberOrNull]
    calls: NotRequired[list[dict[str, Any]]]


class Profile(TypedDict):
    """One stored MPI profile"""

    id: int
    tool: str
    source: str
    command: str | None
    notes: list[str]
    skipped: NotRequired[dict[str, Any]]
    ranks: list[ProfileRank]
    time_by_call: Annotated[dict[str, float], Field(description="the time in each MPI call")]
    histogram: list[Any]
    imbalance: NotRequired[NumberOrNull]
    communication_share: NotRequired[NumberOrNull]
    mpi_total: NotRequired[NumberOrNull]
    mean_cpu: NotRequired[NumberOrNull]


class StoredProfile(TypedDict):
    """A stored profile."""

    id: int
    tool: str
    source: str
    command: NotRequired[str | None]
    created: NotRequired[str]
    ranks: int
    hosts: NotRequired[int]
    run_id: NotRequired[int | None]


ProfileList = TypeAliasType("ProfileList", Annotated[list[StoredProfile], Field(description="The stored profiles")])


@with_config({"extra": "forbid"})
class Setting(TypedDict):
    """A setting's value and where it comes from."""

    value: Any
    origin: str


class Settings(TypedDict):
    """Every setting the configuration holds."""

    store: Setting
    ssh_config: Setting
    user: Setting
    connect_timeout: Setting
    fanout: Setting
    transport: Setting
    topology: Setting
    expectations: Setting


class ClushConf(TypedDict):
    """What ClusterShell's clush.conf sets, and the files read."""

    files: list[str]
    fanout: NotRequired[int | None]
    connect_timeout: NotRequired[float | None]
    ssh_user: NotRequired[str | None]
    ssh_path: NotRequired[str | None]
    ssh_options: NotRequired[str | None]


class Config(TypedDict):
    """The effective configuration defaults and where each comes from"""

    files: Annotated[list[str], Field(description="the configuration files read")]
    settings: Settings
    clush_conf: ClushConf


@with_config({"extra": "forbid"})
class HealthCheck(TypedDict):
    """One check of the node: its status, what it found and its data."""

    name: Literal["facts", "memory", "address"]
    status: Literal["ok", "problem", "skipped", "failed"]
    detail: str
    seconds: float
    problems: list[HealthProblem]
    data: dict[str, Any]


@with_config({"extra": "forbid"})
class Health(TypedDict):
    """One node's health check: its checks, problems and what was done to Slurm"""

    node: str
    healthy: bool
    seconds: float
    slurm_state: Annotated[str | None, Field(description="the node's state in Slurm; null without Slurm")]
    slurm_reason: str | None
    checks: list[HealthCheck]
    problems: list[HealthProblem]
    actions: list[SlurmAction]
