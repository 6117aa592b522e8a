"""One node's results, facts and findings run by run: what ``oddnode
history NODE`` shows of a node before and after its repair."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from oddnode.core.model import DEFAULT_METRIC, Direction

__all__ = ["FactChange", "NodeFinding", "NodeHistory", "SeriesRun", "SeriesHistory"]


@dataclass(frozen=True)
class SeriesRun:
    """The node's result of one series in one run: its best valid value
    (None when every repetition failed) and how many repetitions were valid
    and failed."""

    run_id: int
    started: datetime
    command: str
    value: float | None
    valid: int
    failed: int


@dataclass(frozen=True)
class SeriesHistory:
    """A series the node has results of, run by run (oldest first), with the
    cluster's median now: of every node's newest result."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    median_now: float | None
    runs: tuple[SeriesRun, ...]

    @property
    def name(self) -> str:
        return self.benchmark if self.metric == DEFAULT_METRIC else f"{self.benchmark}:{self.metric}"

    def relative(self, value: float | None) -> float | None:
        """``value`` against the median now, in % (+ better, - worse)."""
        if value is None or not self.median_now:
            return None
        change = (value - self.median_now) / abs(self.median_now) * 100
        return change if self.direction is Direction.HIGHER else -change


@dataclass(frozen=True)
class FactChange:
    """A fact of the node whose value changed between its inventories: each
    value with the run that first reported it."""

    key: str
    values: tuple[tuple[int, datetime, str], ...]


@dataclass(frozen=True)
class NodeFinding:
    """A recorded finding that names the node, with the analysis that made it."""

    run_id: int
    started: datetime
    kind: str
    severity: str
    subject: str
    message: str


@dataclass(frozen=True)
class NodeHistory:
    node: str
    series: tuple[SeriesHistory, ...]
    facts: tuple[FactChange, ...]
    findings: tuple[NodeFinding, ...]
    # Every recorded analysis (run, started, command), with or without a
    # finding of the node: its command says whether it judged a part (-w, -x).
    analyses: tuple[tuple[int, datetime, str], ...]

    @property
    def empty(self) -> bool:
        return not (self.series or self.facts or self.findings)


def fact_changes(rows: list[tuple[str, int, datetime, str]]) -> tuple[FactChange, ...]:
    """The facts whose value changed, from (key, run, started, value) rows in
    key and run order: each value kept where it first appears in a run."""
    by_key: dict[str, list[tuple[int, datetime, str]]] = {}
    for key, run_id, started, value in rows:
        values = by_key.setdefault(key, [])
        if not values or values[-1][2] != value:
            values.append((run_id, started, value))
    return tuple(FactChange(key, tuple(values)) for key, values in by_key.items() if len(values) > 1)
