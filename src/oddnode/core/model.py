"""The values every layer exchanges: results, facts, findings and the dataset
the analysis reads.  Plain data, no behaviour that touches nodes or files."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from oddnode.core.order import natural_key

if TYPE_CHECKING:
    from oddnode.report import documents


class Direction(str, enum.Enum):
    """Which way a metric improves."""

    HIGHER = "higher"
    LOWER = "lower"


class Severity(str, enum.Enum):
    """How much a finding matters; ``warning`` and above mean "not ready"."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


class LabelKind(str, enum.Enum):
    """What a result's label names: one node, a pair, or a set of nodes."""

    NODE = "node"
    PAIR = "pair"
    SET = "set"


@dataclass(frozen=True)
class Series:
    """One population to judge: the best result of every label for one
    benchmark metric, sorted by label."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    label_kind: LabelKind
    labels: np.ndarray  # object array of str, sorted
    values: np.ndarray  # float64, aligned with labels
    repetitions: np.ndarray  # int64: valid repetitions behind each best value
    # float64, aligned with labels: the relative spread of each label's valid
    # repetitions, (max - min) / max(|max|, |min|); NaN where fewer than two.  None
    # when the source kept only one value per label (plot files).
    spread: np.ndarray | None = None

    @property
    def name(self) -> str:
        """The subject used in findings and reports."""
        return self.benchmark if self.metric == DEFAULT_METRIC else f"{self.benchmark}:{self.metric}"

    @property
    def higher_is_better(self) -> bool:
        return self.direction is Direction.HIGHER

    def __len__(self) -> int:
        return len(self.values)


DEFAULT_METRIC = "value"


@dataclass(frozen=True)
class Failure:
    """One run that failed its accuracy check (or failed to run)."""

    benchmark: str
    label: str
    label_kind: LabelKind
    repetition: int | None
    members: tuple[str, ...]  # nodes the label names


@dataclass(frozen=True)
class SetRuns:
    """Every valid repetition of one series of node sets (of its newest
    run): the set rules read how sets varied from one repetition to the
    next, which a set's best value hides.  Arrays aligned, one entry per
    set and repetition, in label then repetition order."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    labels: np.ndarray  # object array of str: folded node sets
    repetitions: np.ndarray  # int64; -1 where the source kept none
    values: np.ndarray  # float64

    @property
    def name(self) -> str:
        return self.benchmark if self.metric == DEFAULT_METRIC else f"{self.benchmark}:{self.metric}"

    @property
    def higher_is_better(self) -> bool:
        return self.direction is Direction.HIGHER

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class NodeStage:
    """A node that did not answer in a stage: unreachable, timeout or failed."""

    stage: str
    status: str
    detail: str


@dataclass(frozen=True)
class CommandCount:
    """One command's processes on one node over an accounting interval."""

    executions: int  # processes that ran it (accounting: that ended in the interval)
    cpu_seconds: float  # their user + system CPU time
    elapsed_seconds: float  # their wall-clock lifetimes added up (0 where /proc was sampled)
    bursts: int  # distinct 5-second periods of the clock in which one started: a burst counts once
    parents: tuple[str, ...] = ()  # the commands that started them, most first ("?": not known)


@dataclass(frozen=True)
class NodeProcesses:
    """One node's process accounting over an interval (``oddnode processes``)."""

    node: str
    seconds: float  # length of the interval
    method: str  # acct (our accounting), pacct (the site's file), proc (/proc sampled)
    commands: dict[str, CommandCount]
    source: str = ""  # the accounting file read, acct(2), or /proc
    notes: tuple[str, ...] = ()
    start: float = 0.0  # the interval's start, seconds since the epoch


# Node series whose rules read more of each repetition than its value: the
# store loads their parameters into Dataset.details.
DETAILED_SERIES = ("noise.lost_fraction",)
# The Dataset's details under which each node's affinity sampler report
# lies (node -> [its JSON]): `oddnode affinity` puts them there, and the
# store from the newest report of each node.
AFFINITY_DETAILS = "affinity.samples"


@dataclass
class Dataset:
    """Everything the findings read, loaded from the store in one go."""

    series: list[Series] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    facts: dict[str, dict[str, str]] = field(default_factory=dict)  # key -> node -> value
    topology: dict[str, str] = field(default_factory=dict)  # node -> group
    benchmarks_with_results: set[tuple[str, str]] = field(default_factory=set)
    node_trouble: dict[str, NodeStage] = field(default_factory=dict)  # node -> what went wrong
    # The cluster's node list: every node a run or import was given (-w, a
    # host file, a topology, a STAB ``nodes`` file), even one that left no
    # trace; in the order first declared.  Empty when none was recorded.
    declared_nodes: list[str] = field(default_factory=list)
    # Every valid repetition of each series of node sets (label kind set).
    set_runs: list[SetRuns] = field(default_factory=list)
    # Node -> its process accounting, from the latest ``oddnode processes`` run.
    processes: dict[str, NodeProcesses] = field(default_factory=dict)
    # The parameters of every valid repetition of the series in
    # DETAILED_SERIES, from each one's newest run: series name -> label ->
    # one dict per repetition (the noise step's period and detours).
    details: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)

    def by_name(self, name: str) -> Series:
        for s in self.series:
            if s.name == name or s.benchmark == name:
                return s
        raise KeyError(self._unknown(name))

    def select(self, name: str) -> list[Series]:
        """The series a name picks: one series by its name (``benchmark:metric``),
        every metric of a benchmark (``pingpong.cut``: a row per message size,
        as STAB's ``anal spp cut``), or those under a metric prefix
        (``pingpong.cut:bandwidth``); metrics in natural order (sizes as numbers)."""
        benchmark, _, prefix = name.partition(":")
        # A benchmark whose own name holds a colon (a site's, or a URL) is
        # picked whole before the name is split.
        exact = [s for s in self.series if s.name == name] or [s for s in self.series if s.benchmark == name]
        chosen = exact or [
            s for s in self.series
            if s.benchmark == benchmark and (not prefix or s.metric.startswith(prefix + "."))
        ]
        if not chosen:
            raise KeyError(self._unknown(name))
        return sorted(chosen, key=lambda s: natural_key(s.metric))

    def _unknown(self, name: str) -> str:
        known = ", ".join(sorted({s.benchmark for s in self.series})) or "none"
        return f"no benchmark named {name!r} in the store (benchmarks: {known})"

    def inventory_nodes(self) -> set[str]:
        nodes: set[str] = set()
        for per_node in self.facts.values():
            nodes.update(per_node)
        return nodes


@dataclass
class Finding:
    """A typed judgement with the numbers that justify it and what to do."""

    kind: str
    severity: Severity
    subject: str
    nodes: str  # folded node set, e.g. node[001-084]
    message: str
    evidence: dict[str, Any]
    remedy: str

    def to_json(self) -> documents.Finding:
        return {
            "kind": self.kind,
            "severity": self.severity.value,
            "subject": self.subject,
            "nodes": self.nodes,
            "message": self.message,
            "evidence": self.evidence,
            "remedy": self.remedy,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Finding":
        return cls(
            kind=data["kind"],
            severity=Severity(data["severity"]),
            subject=data["subject"],
            nodes=data["nodes"],
            message=data.get("message", ""),
            evidence=data.get("evidence", {}),
            remedy=data.get("remedy", ""),
        )
