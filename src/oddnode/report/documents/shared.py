"""The parts the JSON documents share: a finding, a problem, a statistics
row, a run reference, and the enums they use. Each is a definition of its
own in the schema, which the documents refer to, never copy."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, with_config
from typing_extensions import NotRequired, TypeAliasType, TypedDict

Severity = TypeAliasType("Severity", Annotated[Literal["info", "warning", "error"], Field(
    description="info, warning or error; warning and above mean not ready")])
Direction = TypeAliasType("Direction", Annotated[Literal["higher", "lower"], Field(
    description="which way the metric improves")])
LabelKind = TypeAliasType("LabelKind", Annotated[Literal["node", "pair", "set"], Field(
    description="what a result's label names: a node, a pair of nodes or a node set")])
NumberOrNull = TypeAliasType("NumberOrNull", Annotated[float | None, Field(
    description="a number; null where it is undefined (NaN or infinite)")])
Outcome = TypeAliasType("Outcome", Annotated[Literal["ok", "invalid", "failed"], Field(
    description="a run's outcome: valid output, output its validation refused, or no output")])


@with_config({"extra": "forbid"})
class Finding(TypedDict):
    """A finding: a problem of a known kind, its evidence and its remedy."""

    kind: Annotated[str, Field(min_length=1, description="the finding's kind (docs/findings.md)")]
    severity: Severity
    subject: Annotated[str, Field(description="what it is about (a series, a fact, ...)")]
    nodes: Annotated[str, Field(description="the nodes it concerns, folded (cn-a[17-20])")]
    message: str
    evidence: Annotated[dict[str, Any], Field(
        description="the numbers behind the finding, open by design: each rule keeps its own keys "
                    "(docs/findings.md)")]
    remedy: Annotated[str, Field(description="what to do about it")]


Findings = TypeAliasType("Findings", Annotated[list[Finding], Field(description="the findings a command made")])


@with_config({"extra": "forbid"})
class Problem(TypedDict):
    """Findings grouped by their cause: the finding that explains the
    others and the symptoms it explains."""

    nodes: str
    severity: Severity
    summary: str
    cause: Annotated[list[Finding], Field(min_length=1)]
    symptoms: list[Finding]


class Description(TypedDict):
    """A series' description: its size, range, %variability, mean, median, std."""

    n: Annotated[int, Field(ge=0)]
    low: NumberOrNull
    high: NumberOrNull
    variability_pct: Annotated[NumberOrNull, Field(description="STAB's %variability: 100 × (high − low) / |low|")]
    mean: NumberOrNull
    median: NumberOrNull
    std: NumberOrNull


class StatisticsRow(Description):
    """one series: its name and its description (n, low, high, %variability, mean, median, std)"""

    benchmark: str
    metric: str
    unit: str
    direction: Direction


class OutcomeCounts(TypedDict):
    """How many runs ended each way."""

    ok: Annotated[int, Field(ge=0)]
    invalid: Annotated[int, Field(ge=0)]
    failed: Annotated[int, Field(ge=0)]


class RunReference(TypedDict):
    """The stored run a document comes from."""

    run_id: Annotated[int | None, Field(description="the run's id in the store; null when not stored")]


class NetworkRun(RunReference):
    """One interconnect run: its repetitions and each pair's outcomes."""

    repetitions: int
    per_pair: NotRequired[dict[str, OutcomeCounts]]
    notes: NotRequired[list[str]]


class EstimatedStep(TypedDict):
    """One step's estimated time and how it was reckoned."""

    step: str
    seconds: Annotated[float, Field(ge=0)]
    how: str


class RunEstimate(TypedDict):
    """A run's estimate from its plan, its --max-minutes budget, and where the budget stopped it."""

    steps: list[EstimatedStep]
    seconds: Annotated[float, Field(ge=0, description="the estimated steps together")]
    not_estimated: Annotated[list[str], Field(description="steps whose time is their nodes' (node benchmarks)")]
    max_minutes: Annotated[NumberOrNull, Field(description="--max-minutes, or null for no budget")]
    stopped: Annotated[str | None, Field(
        description="where the spent budget stopped the run (the rounds before are stored); null when it ran whole")]


class StoredRun(TypedDict):
    """A run as the store keeps it."""

    id: int
    started: str
    command: str
    source: str | None
    check_id: NotRequired[int | None]


SetFamily = Literal["sets", "scale"]
SetOrdering = Literal["sorted", "shuffled", "packed", "striped"]


class SetOrderingRow(TypedDict):
    """One set benchmark metric: the description of every repetition of
    every set of each ordering (null where the ordering was not measured;
    packed and striped only where measured)."""

    family: SetFamily
    benchmark: str
    metric: str
    unit: str
    direction: Direction
    sorted: Description | None
    shuffled: Description | None
    packed: NotRequired[Description]
    striped: NotRequired[Description]
    variability_ratio: Annotated[float | None, Field(
        description="shuffled's %variability over sorted's; null without both or with a sorted one of 0")]
    striped_variability_ratio: NotRequired[Annotated[float | None, Field(
        description="striped's %variability over packed's, where either was measured")]]


class FailedSetMembers(TypedDict):
    """The nodes of one benchmark's failed set runs, by how many of them each node is in."""

    family: SetFamily
    benchmark: str
    runs: Annotated[int, Field(ge=0, description="failed set runs, each counted once whatever its metrics")]
    counts: Annotated[dict[str, int], Field(description="node -> the failed set runs it was in, most first")]


class MemberCorrelation(TypedDict):
    """A set series correlated with the worst of each set's members in a node series."""

    set_series: str
    node_series: str
    x: Annotated[str, Field(description="the node series, as the worst member's value")]
    y: Annotated[str, Field(description="the set series")]
    n: Annotated[int, Field(ge=0, description="the sets both have")]
    pearson_r: NumberOrNull
    pearson_p: NumberOrNull
    spearman_r: NumberOrNull
    spearman_p: NumberOrNull
    slope: NumberOrNull
    intercept: NumberOrNull


class SetCurvePoint(TypedDict):
    """The repetitions of a scale curve at one node count."""

    nodes: Annotated[int, Field(ge=1)]
    median: float
    min: float
    max: float
    n: Annotated[int, Field(ge=1)]


class SetScalingCurve(TypedDict):
    """One scale benchmark metric in one ordering: its repetitions per node count."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    ordering: SetOrdering
    points: list[SetCurvePoint]


class SetScalingPoint(TypedDict):
    """One node count: the sorted and the shuffled median and how fast shuffled runs against sorted."""

    nodes: Annotated[int, Field(ge=1)]
    sorted: Annotated[float | None, Field(description="null where not measured")]
    shuffled: Annotated[float | None, Field(description="null where not measured")]
    ratio: Annotated[float | None, Field(
        description="shuffled's speed over sorted's (for a time, sorted over shuffled); null without both")]


class SetScalingTable(TypedDict):
    """One scale benchmark's judged metric: sorted against shuffled per node count."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    loss_ratio: Annotated[float, Field(description="the scaling-loss rule's bound on the ratio")]
    points: list[SetScalingPoint]


class PlacedSet(TypedDict):
    """One packed or striped set, the topology groups its members hang from, and its runs of one metric."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    ordering: Literal["packed", "striped"]
    set: Annotated[str, Field(description="the node set, folded")]
    groups: Annotated[list[str], Field(
        description="in the order of their first member; (ungrouped) for nodes not in the topology; "
                    "none without a stored topology")]
    runs: Annotated[int, Field(ge=1)]
    median: float
    min: float
    max: float


class SetTables(TypedDict):
    """The tables of the node-set results (docs/formats.md)."""

    ordering_table: list[SetOrderingRow]
    failed_members: list[FailedSetMembers]
    member_correlations: Annotated[list[MemberCorrelation], Field(description="strongest |Spearman rho| first")]
    scaling_curves: list[SetScalingCurve]
    scaling: list[SetScalingTable]
    placed_sets: list[PlacedSet]


class SeriesReference(TypedDict):
    """Which population a result is about: its names, unit, direction and size."""

    name: str
    benchmark: str
    metric: str
    unit: str
    direction: Direction
    label_kind: LabelKind
    n: Annotated[int, Field(ge=0)]


class SetRepetition(TypedDict):
    """One repetition of a set run."""

    repetition: Annotated[int, Field(ge=1)]
    set: Annotated[str, Field(description="the node set, folded")]
    outcome: Outcome
    why: str | None


class SetRun(RunReference):
    """one ordering's set runs: each repetition's set and its outcome"""

    family: str
    ordering: str
    notes: list[str]
    runs: list[SetRepetition]


class InterconnectDocument(TypedDict):
    """What every interconnect command's document holds besides its runs
    (each command types its own): the command and the findings."""

    command: str
    findings: Findings


@with_config({"extra": "forbid"})
class HealthProblem(TypedDict):
    """A problem a health check found, and the finding it makes (if any)."""

    check: str
    reason: str
    message: str
    finding: Finding | None


@with_config({"extra": "forbid"})
class SlurmAction(TypedDict):
    """What was done, or would be done, to a node in Slurm."""

    node: str
    action: Literal["drain", "resume", "leave"]
    command: str | None
    why: str
    done: bool
    error: str | None
