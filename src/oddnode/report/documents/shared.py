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
    evidence: Annotated[dict[str, Any], Field(description="free-form: the numbers behind the finding")]
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


class StoredRun(TypedDict):
    """A run as the store keeps it."""

    id: int
    started: str
    command: str
    source: str | None
    check_id: NotRequired[int | None]


class SetTables(TypedDict):
    """The tables of the node-set results (docs/formats.md)."""

    ordering_table: list[Any]
    failed_members: list[Any]
    member_correlations: list[Any]
    scaling_curves: list[Any]
    scaling: list[Any]
    placed_sets: list[Any]


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
    """What every interconnect command's document holds: the command, its runs and the findings."""

    command: str
    runs: dict[str, NetworkRun]
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
