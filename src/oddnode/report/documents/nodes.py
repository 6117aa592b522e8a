"""The documents of the commands about nodes: ``inventory``, ``diagnose``,
``processes``, ``affinity``, ``numa``, ``model``, ``profile``, ``config
show`` and ``health``."""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from pydantic import Field, with_config
from typing_extensions import NotRequired, TypeAliasType, TypedDict

from oddnode.report.documents.shared import (Direction, Findings, HealthProblem, NumberOrNull, RunReference,
                                             SlurmAction)

FoldedNodes = Annotated[str, Field(description="the nodes, folded (cn-a[17-20])")]
CpuList = Annotated[str, Field(description="a CPU list, as the kernel writes it (0-7,16-23)")]


class Unanswered(TypedDict):
    """Why a node gave no answer."""

    status: Annotated[Literal["unreachable", "timeout", "failed"], Field(
        description="failed: it ran but gave no usable answer")]
    reason: str


class Inventory(TypedDict):
    """Every node's facts and the facts that differ"""

    version: int
    run_id: int | None
    transport: str
    nodes: Annotated[str, Field(description="the nodes asked, folded")]
    answered: Annotated[str, Field(description="the nodes that answered, folded")]
    facts: Annotated[dict[str, dict[str, str]], Field(
        description="each node's facts by name, as text (the probe reports every fact as text)")]
    differing: Annotated[dict[str, dict[str, FoldedNodes]], Field(
        description="the facts whose values differ between nodes: fact -> value -> the nodes holding it")]
    unanswered: dict[str, Unanswered]
    skipped: Annotated[dict[str, FoldedNodes], Field(description="what the probe skipped -> on which nodes")]
    findings: Findings


# "in" is a Python keyword: the functional form names the keys.
ExpectedConditions = TypedDict("ExpectedConditions", {
    "equals": NotRequired[str],
    "match": NotRequired[str],
    "regex": NotRequired[str],
    "in": NotRequired[list[str]],
    "min": NotRequired[float],
    "max": NotRequired[float],
    "tolerance": NotRequired[float],
})
ExpectedConditions.__doc__ = "An expectation's conditions as the file's options; numbers as numbers."


# "pass" is a Python keyword too.
FoundValue = TypedDict("FoundValue", {
    "value": Annotated[str, Field(description="the value; (not reported) where a node lacks the fact")],
    "nodes": FoldedNodes,
    "count": int,
    "pass": Annotated[bool, Field(description="the value meets the expectation")],
})
FoundValue.__doc__ = "A value found for an expectation's key, its nodes and whether it meets the expectation."


class ExpectationVerdict(TypedDict):
    """One expectation's verdict and the nodes that pass and fail it."""

    key: str
    scope: NotRequired[Annotated[str, Field(description="the node set of the file's section that holds it")]]
    expected: ExpectedConditions
    wanted: Annotated[str, Field(description="the conditions in words")]
    verdict: Literal["pass", "fail"]
    passed: str
    failed: str
    found: Annotated[list[FoundValue], Field(description="each value found, most nodes first")]
    source: NotRequired[str]
    line: NotRequired[int]


class Diagnose(TypedDict):
    """Every expectation's verdict per node"""

    version: int
    expectations: Annotated[str, Field(description="the expectations file")]
    nodes: str
    ok: bool
    checked: list[ExpectationVerdict]
    findings: Findings


class ProcessCommandCount(TypedDict):
    """One command's processes on one node over the interval."""

    executions: int
    cpu_seconds: float
    elapsed_seconds: Annotated[float, Field(description="their lifetimes added up (0 where /proc was sampled)")]
    bursts: Annotated[int, Field(description="the 5-second periods in which one started")]
    parents: Annotated[list[str], Field(description="the commands that started them, most first (? not known)")]


class NodeProcesses(TypedDict):
    """The commands one node ran and how they were counted."""

    method: Annotated[Literal["acct", "pacct", "proc"], Field(
        description="oddnode's kernel accounting, the site's accounting file, or /proc sampled")]
    source: str
    start: Annotated[float, Field(description="the interval's start, seconds since the epoch")]
    seconds: NumberOrNull
    notes: list[str]
    missed_short_lived: bool
    commands: dict[str, ProcessCommandCount]


class ProcessAsymmetryRow(TypedDict):
    """One command on one node or group, against the rest."""

    unit: Annotated[str, Field(description="the node, or the group's name")]
    nodes: list[str]
    command: str
    executions: int
    per_node: float
    rate: Annotated[float, Field(description="executions per node and second")]
    rest_per_node: float
    ratio: Annotated[float | None, Field(description="per_node / rest_per_node; null when the rest never ran it")]
    cpu_seconds: float
    bursts: int
    rest_bursts: int
    p_value: float
    p_adjusted: Annotated[float, Field(description="p_value, Bonferroni-corrected over the table's tests")]
    parents: list[str]


class ProcessTable(TypedDict):
    """The commands' asymmetry between nodes, grouped one way."""

    grouped_by: Annotated[str | None, Field(
        description="the fact or topology file that made the groups; null: per node")]
    units: Annotated[dict[str, list[str]], Field(description="node or group -> its nodes")]
    tests: Annotated[int, Field(description="units x commands: the Bonferroni factor")]
    seconds: float
    least_p_adjusted: Annotated[float, Field(
        description="the smallest corrected p the interval allows; above alpha, the table cannot decide")]
    left_out: Annotated[dict[str, str], Field(description="node -> why it is not compared")]
    rows: Annotated[list[ProcessAsymmetryRow], Field(description="every command run on each unit, highest ratio first")]


class Processes(TypedDict):
    """Commands each node runs and their asymmetry"""

    run_id: int | None
    nodes: dict[str, NodeProcesses]
    unanswered: Annotated[dict[str, str], Field(description="node -> why it gave no counts")]
    tables: list[ProcessTable]
    findings: Findings


class AffinityCpu(TypedDict):
    """One online CPU: its socket, die, core, the core's CPUs and its NUMA node."""

    cpu: int
    package: int
    die: int | None
    core: Annotated[int, Field(description="core_id within the package")]
    siblings: CpuList
    numa: int | None


class AffinityNumaNode(TypedDict):
    """One NUMA node: its CPUs, its memory and its row of the distance table."""

    node: int
    cpus: CpuList
    memory_kb: int | None
    distances: list[int] | None


class AffinityTopology(TypedDict):
    """A node's CPUs and NUMA nodes, and where they were read."""

    source: Literal["sysfs", "hwloc"]
    hwloc: NotRequired[Annotated[Literal["agrees", "differs"], Field(
        description="whether hwloc's lstopo agreed with sysfs, where it was there to ask")]]
    cpus: list[AffinityCpu]
    numa_nodes: list[AffinityNumaNode]


class AffinitySelection(TypedDict):
    """The processes asked for: empty when none was."""

    pid: NotRequired[list[int]]
    command: NotRequired[str]
    slurm_job: NotRequired[str]


class AffinityThread(TypedDict):
    """A thread over the interval: its affinity, CPU time and the CPUs it ran on."""

    tid: int
    comm: str | None
    cpuset: str | None
    cpus_allowed: CpuList | None
    mems_allowed: CpuList | None
    cpu_seconds: float
    runs: Annotated[list[tuple[int, int]], Field(
        description="the CPUs it was running or runnable on, in order: [CPU, samples in a row]")]
    last_cpu: int | None


class ProcessThreads(TypedDict):
    """A process and where its threads ran."""

    pid: int
    comm: str | None
    ended: Annotated[bool, Field(description="it ended during the sampling")]
    cpuset: str | None
    cpuset_cpus: Annotated[str | None, Field(description="the CPUs its cgroup grants; null when unreadable")]
    cpus_allowed: CpuList | None
    mems_allowed: CpuList | None
    memory_kb: Annotated[dict[str, int], Field(description="NUMA node -> kB")]
    interleaved_kb: int
    threads: list[AffinityThread]


class NodeAffinity(TypedDict):
    """One node's topology and its processes."""

    affinity_version: int
    hostname: str
    topology: AffinityTopology
    selection: AffinitySelection
    processes: list[ProcessThreads]
    cpu_busy: Annotated[dict[str, float], Field(description="CPU -> share of the interval it was busy")]
    seconds: float
    samples: int
    notes: list[str]


class Affinity(TypedDict):
    """Where each process's threads ran"""

    nodes: dict[str, NodeAffinity]
    unanswered: dict[str, str]
    findings: Findings


class NumaLayout(TypedDict):
    """A node's NUMA nodes as the run found them."""

    numa: Annotated[bool, Field(description="false: the kernel shows no NUMA nodes, and the node is one, 0")]
    cpus: Annotated[dict[str, CpuList], Field(description="NUMA node -> the CPUs this process may use")]
    memory_mb: Annotated[dict[str, int], Field(description="NUMA node -> its memory, where this process may bind")]
    mpi: Annotated[bool, Field(description="mpicc and mpirun are on the node's PATH")]


class NodeOutcomes(TypedDict):
    """How many repetitions ended each way on one node."""

    ok: int
    invalid: int
    failed: int
    unreachable: int
    timeout: int
    unavailable: int


class NumaCell(TypedDict):
    """One cell of the matrices: its series, the nodes that have it and their outcomes."""

    series: str
    cpu_node: int
    mem_node: int
    nodes: list[str]
    outcomes: dict[str, NodeOutcomes]


class NumaRun(RunReference):
    """The NUMA run: its repetitions, each node's layout and the cells measured."""

    repetitions: int
    layouts: dict[str, NumaLayout]
    unanswered: dict[str, str]
    mpi_skipped: Annotated[dict[str, str], Field(description="nodes -> why the MPI ping-pong was not run there")]
    cells: list[NumaCell]


class NumaMatrix(TypedDict):
    """A matrix: rows the threads' NUMA nodes, columns the memory's (the second end's)."""

    rows: list[int]
    columns: list[int]
    matrix: Annotated[list[list[NumberOrNull]], Field(description="a list of rows, null where not measured")]
    local: NumberOrNull
    remote: NumberOrNull
    ratio: NumberOrNull


class NumaMeasure(TypedDict):
    """One measure's unit and direction, every node's matrix and the median one."""

    unit: str
    direction: Direction
    nodes: dict[str, NumaMatrix]
    median: NumaMatrix | None


class NumaMatrices(TypedDict):
    """Every measure's matrices, and the nodes with one NUMA node."""

    measures: Annotated[dict[str, NumaMeasure], Field(description="by measure (numa.triad:bandwidth)")]
    one_numa_node: list[str]


class Numa(TypedDict):
    """NUMA cells: every CPU node against every memory node"""

    run: NumaRun
    numa: NumaMatrices
    findings: Findings


SetKernel = Literal["alltoall", "allreduce", "bcast", "barrier", "sendrecv"]
SizeBucket = Annotated[int | None, Field(
    description="a power-of-two size bucket: k holds [2^k, 2^(k+1)) bytes, -1 is 0 bytes, null not recorded")]


class ModelPoint(TypedDict):
    """A benchmark of the set kernel at one message size."""

    kernel: SetKernel
    size: Annotated[int, Field(description="bytes (0 for a barrier)")]


class ModelCell(TypedDict):
    """A (call, size bucket) of the profile, summed over ranks, and the point that stands for it."""

    call: str
    bucket: SizeBucket
    bucket_label: str
    count: int
    calls_per_rank: float
    time: float
    bytes: int
    kernel: SetKernel | None
    size: int | None
    why_not: Annotated[str | None, Field(description="why it is not predicted; null: predictable")]


class ModelSelection(TypedDict):
    """The profile's ranks and hosts, and the points the model is fitted to."""

    ranks: int
    hosts: list[str]
    mpi_time_per_rank: float
    coverage: Annotated[float, Field(description="the share of the time in MPI the chosen cells hold")]
    profiled_time_per_rank: float
    points: list[ModelPoint]
    chosen: list[ModelCell]
    left: list[ModelCell]


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
    problems: Annotated[list[str], Field(description="the set runs that failed or were invalid, with why")]
    findings: Findings
    factor: NotRequired[NumberOrNull]
    medians_s: NotRequired[dict[str, NumberOrNull]]


class ProfileCalls(TypedDict):
    """One MPI call at one message-size bucket: its count, times and bytes."""

    call: str
    bucket: SizeBucket
    size_min: int | None
    size_max: int | None
    count: int
    time: float
    max_time: Annotated[float, Field(description="the longest single call")]
    bytes: int


class ProfileRank(TypedDict):
    """A rank and its host (null when the profile does not say)."""

    rank: int
    host: str | None
    wall: NotRequired[NumberOrNull]
    mpi_time: NotRequired[NumberOrNull]
    compute_time: NotRequired[NumberOrNull]
    cpu: NotRequired[NumberOrNull]
    calls: NotRequired[list[ProfileCalls]]


class Profile(TypedDict):
    """One stored MPI profile"""

    id: int
    tool: str
    source: str
    command: str | None
    notes: list[str]
    skipped: NotRequired[Annotated[dict[str, int], Field(description="records not read, by kind")]]
    ranks: list[ProfileRank]
    time_by_call: Annotated[dict[str, float], Field(description="the time in each MPI call")]
    histogram: Annotated[list[ProfileCalls], Field(description="the call x size cells, summed over ranks")]
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

SettingValue = TypeVar("SettingValue")


@with_config({"extra": "forbid"})
class Setting(TypedDict, Generic[SettingValue]):
    """A setting's value and where it comes from."""

    value: SettingValue
    origin: str


class Settings(TypedDict):
    """Every setting the configuration holds; a path is absolute, null where none is set."""

    store: Setting[str]
    ssh_config: Setting[str | None]
    user: Setting[str | None]
    connect_timeout: Setting[float]
    fanout: Setting[int]
    transport: Setting[Literal["local", "ssh", "slurm"] | None]
    topology: Setting[str | None]
    expectations: Setting[str | None]


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
class FactsCheckData(TypedDict):
    """What the facts check saw: the expectations checked and the facts read."""

    checked: int
    facts: int


@with_config({"extra": "forbid"})
class MemoryCheckData(TypedDict):
    """What the memory check saw: the triad bandwidth against the baseline's."""

    triad: Annotated[float | None, Field(description="null when the kernel reported none")]
    minimum: float
    median: float
    unit: str
    elements: int | None
    iterations: Annotated[int | None, Field(description="timed iterations run, fewer than asked when the time "
                                                        "budget cut the run; null when the kernel did not say")]


@with_config({"extra": "forbid"})
class AddressCheckData(TypedDict):
    """What the address check saw: the node's address, its interface and the round trip."""

    address: str
    interface: NotRequired[Annotated[str | None, Field(description="null when `ip` could not say")]]
    operstate: NotRequired[str | None]
    round_trip_us: NotRequired[float]


@with_config({"extra": "forbid"})
class NothingSeen(TypedDict):
    """Nothing: the check was skipped or failed before it saw anything."""


@with_config({"extra": "forbid"})
class HealthCheck(TypedDict):
    """One check of the node: its status, what it found and its data."""

    name: Literal["facts", "memory", "address"]
    status: Literal["ok", "problem", "skipped", "failed"]
    detail: str
    seconds: float
    problems: list[HealthProblem]
    data: FactsCheckData | MemoryCheckData | AddressCheckData | NothingSeen


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
