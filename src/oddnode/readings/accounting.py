"""The asymmetry-ratio table (NERSC seaborg's): per node or group of nodes
and command, its executions, the mean executions per node of the rest,
their ratio, and whether chance can explain it.

A pure reading of stored accounting (``Dataset.processes``), shared by the
``process-asymmetry`` finding and the report.

**The test.** Under "this node runs the command no more often than the
others", the node's events and the rest's are Poisson counts with one rate
per node-second, and given their total the node's share is binomial with
p = (node's seconds) / (all compared seconds): the exact conditional test
of two Poisson rates (Przyborowski and Wilenski).  The events are not the
executions but the *bursts*: the distinct 5-second periods of the clock in
which one started (pacct.BURST_SECONDS).  Processes come in bursts (a
login's shell start-up, an admin's few commands, a script), whose
executions are not independent events: counted one by one, a single script
on one node would look like an impossible excess; counted by period, it
is one or two draws, while a spawner that persists fills every period.
So the test needs intervals of several periods: a minute (12 periods)
tells a daemon on one node of 4 or more; groups pool their nodes' periods.
The price: a command the other nodes too start in every period saturates
the count, and is told apart by its ratio only.  P-values are corrected by
Bonferroni over every unit and command compared.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from oddnode.onnode.pacct import BURST_SECONDS
from oddnode.core.model import NodeProcesses
from oddnode.core.order import natural_key
from oddnode.stats.tails import binomial_sf

# A node (group) is asymmetric when a command runs at least this many times
# as often on it as per node on the rest: seaborg's fingerprint commands ran
# 13 to 28 times as often on the slow nodes; a factor of a few is what
# ordinary differences of role and load give (a node that serves more
# logins, a job's prologue).
ASYMMETRY_RATIO = 10.0
# The commands that stand out in the table and make up a warned node's
# fingerprint: three times the rest's rate (seaborg's table went down to
# ksh at 8.9; a fingerprint's lesser commands say where it comes from).
STAND_OUT_RATIO = 3.0
# The table leaves out commands run fewer times than this on the node:
# a handful of runs is one login or one cron job, whatever its ratio.
MIN_TABLE_EXECUTIONS = 10
# A warning needs the command to start at least this often per node on the
# warned node (executions per second): one started less often than every
# two seconds is a person at a shell or a periodic job, whose interruptions
# (a millisecond or so of a CPU each) are too rare to hold up a parallel
# job; a spawner worth finding starts several a second (the testbed's
# daemon: 50 of each of its commands).
MIN_RATE = 0.5
# A command started in at least this share of the 5-second periods of the
# interval on a node persisted through it: it was no burst.
PERSISTENT_SHARE = 0.5


@dataclass(frozen=True)
class AsymmetryRow:
    """One command on one node or group, against the rest."""

    unit: str  # the node, or the group's name
    nodes: tuple[str, ...]  # the unit's nodes
    command: str
    executions: int  # on the unit, all its nodes together
    per_node: float  # executions per node of the unit
    rate: float  # executions per node and second on the unit
    rest_per_node: float  # the rest's executions per node, over the unit's mean interval
    ratio: float  # per_node / rest_per_node; inf where the rest never ran it
    cpu_seconds: float  # CPU time of the unit's processes of the command
    bursts: int  # periods in which one started, added up over the unit's nodes
    rest_bursts: int
    p_value: float  # P(at least these bursts | the rest's rate)
    p_adjusted: float  # Bonferroni over every unit and command compared
    parents: tuple[str, ...] = ()  # the commands that started them on the unit's nodes, in first-seen order

    def to_json(self) -> dict[str, object]:
        return {"unit": self.unit, "nodes": list(self.nodes), "command": self.command,
                "executions": self.executions, "per_node": round(self.per_node, 3), "rate": round(self.rate, 4),
                "rest_per_node": round(self.rest_per_node, 3),
                "ratio": None if math.isinf(self.ratio) else round(self.ratio, 3),
                "cpu_seconds": round(self.cpu_seconds, 3), "bursts": self.bursts,
                "rest_bursts": self.rest_bursts, "p_value": self.p_value,
                "p_adjusted": self.p_adjusted, "parents": list(self.parents)}


@dataclass(frozen=True)
class AsymmetryTable:
    """Every command run on each unit, against the rest, highest ratio first."""

    rows: list[AsymmetryRow]
    units: dict[str, tuple[str, ...]]  # unit -> its nodes, in natural order
    tests: int  # units x commands: the Bonferroni factor
    seconds: float  # the mean interval of the compared nodes
    left_out: dict[str, str] = field(default_factory=dict)  # node -> why it is not compared
    grouped_by: str | None = None  # None: per node; else the fact or topology file that made the groups

    @property
    def per_group(self) -> bool:
        return self.grouped_by is not None

    def to_json(self) -> dict[str, object]:
        return {"grouped_by": self.grouped_by, "units": {u: list(n) for u, n in self.units.items()},
                "tests": self.tests, "seconds": round(self.seconds, 3), "least_p_adjusted": least_p_adjusted(self),
                "left_out": self.left_out, "rows": [row.to_json() for row in self.rows]}


def rate_ratio(executions: float, seconds: float, rest_executions: float, rest_seconds: float) -> float:
    """(executions / seconds) / (rest_executions / rest_seconds): inf where
    the rest never ran it, nan where neither did."""
    if rest_executions <= 0:
        return math.inf if executions > 0 else math.nan
    return (executions / seconds) / (rest_executions / rest_seconds)


def poisson_excess(events: int, seconds: float, rest_events: int, rest_seconds: float) -> float:
    """P(X >= events) for X ~ Binomial(events + rest_events, seconds / (seconds + rest_seconds)):
    the exact conditional test that the unit's Poisson rate exceeds the rest's."""
    if events <= 0:
        return 1.0
    share = seconds / (seconds + rest_seconds)
    return float(binomial_sf(events - 1, events + rest_events, share))


def poisson_excesses(tested: np.ndarray) -> np.ndarray:
    """poisson_excess of many rows at once: columns bursts, all bursts (the
    unit's and the rest's), the unit's share of the node-seconds."""
    bursts, total, share = tested.T
    return np.where(bursts > 0, binomial_sf(bursts - 1, total, share), 1.0)


def asymmetry_table(processes: Mapping[str, NodeProcesses], groups: Mapping[str, str] | None = None,
                    grouped_by: str | None = None) -> AsymmetryTable:
    """The table of every node (or, with ``groups``: node -> group, every
    group) against the others.  Nodes with no interval, or in no group,
    are left out and named."""
    left_out = {node: "no accounting interval" for node, p in processes.items() if not p.seconds > 0}
    usable = {node: p for node, p in processes.items() if node not in left_out}
    members: dict[str, list[str]] = defaultdict(list)
    for node in sorted(usable, key=natural_key):
        if groups is None:
            members[node].append(node)
        elif node in groups:
            members[str(groups[node])].append(node)
        else:
            left_out[node] = "in no group"
    units = {unit: tuple(members[unit]) for unit in sorted(members, key=natural_key)}
    compared = [node for nodes in units.values() for node in nodes]
    seconds = sum(usable[n].seconds for n in compared) / len(compared) if compared else 0.0
    if len(units) < 2:
        return AsymmetryTable([], units, 0, seconds, left_out, grouped_by)
    commands = sorted({c for node in compared for c in usable[node].commands})
    tests = len(units) * len(commands)
    total_seconds = sum(usable[n].seconds for n in compared)
    found = []  # the rows' fields, their p-values computed at once below
    tested = []  # (bursts, all bursts, share) of each row
    for command in commands:
        counts = {n: usable[n].commands.get(command) for n in compared}
        all_executions = sum(c.executions for c in counts.values() if c)
        all_bursts = sum(c.bursts for c in counts.values() if c)
        for unit, nodes in units.items():
            mine = [counts[n] for n in nodes if counts[n] is not None]
            executions = sum(c.executions for c in mine)
            if executions <= 0:
                continue
            bursts = sum(c.bursts for c in mine)
            unit_seconds = sum(usable[n].seconds for n in nodes)
            rest_seconds = total_seconds - unit_seconds
            rest_executions = all_executions - executions
            found.append(dict(
                unit=unit, nodes=nodes, command=command, executions=executions, per_node=executions / len(nodes),
                rate=executions / unit_seconds,
                rest_per_node=rest_executions / rest_seconds * unit_seconds / len(nodes),
                ratio=rate_ratio(executions, unit_seconds, rest_executions, rest_seconds),
                cpu_seconds=sum(c.cpu_seconds for c in mine), bursts=bursts, rest_bursts=all_bursts - bursts,
                parents=tuple(dict.fromkeys(parent for c in mine for parent in c.parents))))
            tested.append((bursts, all_bursts, unit_seconds / total_seconds))
    p_values = poisson_excesses(np.array(tested, dtype=np.float64).reshape(-1, 3))
    rows = [AsymmetryRow(**fields, p_value=float(p), p_adjusted=min(1.0, float(p) * tests))
            for fields, p in zip(found, p_values)]
    rows.sort(key=lambda r: (-r.ratio, -r.executions, natural_key(r.unit), r.command))
    return AsymmetryTable(rows, units, tests, seconds, left_out, grouped_by)


def significant(row: AsymmetryRow, alpha: float) -> bool:
    """Chance cannot explain the unit's excess, at family-wise level alpha."""
    return row.p_adjusted <= alpha


def stands_out(row: AsymmetryRow) -> bool:
    """Worth a line of the table: several times the rest's rate, run more than a handful of times."""
    return row.ratio >= STAND_OUT_RATIO and row.executions >= MIN_TABLE_EXECUTIONS


def persistent(row: AsymmetryRow) -> bool:
    """Started in PERSISTENT_SHARE of the periods of the interval or more, per node of the unit."""
    periods = row.per_node / row.rate / BURST_SECONDS  # per node: its interval in periods
    return row.bursts / len(row.nodes) >= PERSISTENT_SHARE * max(1.0, periods)


def fingerprint(table: AsymmetryTable, unit: str, alpha: float) -> list[AsymmetryRow]:
    """The commands that stand out on a unit already shown asymmetric,
    highest ratio first: each unlikely by chance on its own (its p before
    the correction at most alpha), or at the warning's ratio and rate
    through most of the interval.  The correction guards the question "is
    any unit asymmetric"; once one is, its other commands are read as one
    fingerprint, among them common ones (sed, sh) whose background on the
    rest saturates their bursts and weakens their own test over a short
    interval."""
    return [row for row in table.rows if row.unit == unit and stands_out(row) and (
        row.p_value <= alpha or (row.ratio >= ASYMMETRY_RATIO and row.rate >= MIN_RATE and persistent(row)))]


def far_more_often(row: AsymmetryRow) -> bool:
    """ASYMMETRY_RATIO times the rest's rate or more, at MIN_RATE or more: a
    warning's size, whether or not chance can explain it."""
    return row.ratio >= ASYMMETRY_RATIO and row.rate >= MIN_RATE


def asymmetric(row: AsymmetryRow, alpha: float) -> bool:
    """Far more often than the rest (far_more_often), and not chance."""
    return far_more_often(row) and significant(row, alpha)


def most_periods(seconds: float) -> int:
    """The most BURST_SECONDS periods of the clock an interval of
    ``seconds`` can touch (it need not start on a period's edge)."""
    return math.ceil(seconds / BURST_SECONDS) + 1 if seconds > 0 else 0


def least_p_adjusted(table: AsymmetryTable) -> float:
    """The smallest corrected p the table's interval allows: that of a
    command started in every period on one unit and never on the rest,
    (the unit's share of the node-seconds) ** (its periods) times the
    tests.  Above alpha, no row can be significant whatever ran: the
    interval is too short to decide."""
    if not table.tests:
        return 1.0
    compared = sum(len(nodes) for nodes in table.units.values())
    periods = most_periods(table.seconds)
    least = min((len(nodes) / compared) ** (len(nodes) * periods) for nodes in table.units.values())
    return min(1.0, least * table.tests)


def seconds_to_decide(table: AsymmetryTable, alpha: float) -> float:
    """The shortest interval per node, in whole BURST_SECONDS periods, whose
    least corrected p (least_p_adjusted) is at most ``alpha`` with the same
    units and tests; 0 for a table without tests."""
    if not table.tests:
        return 0.0
    compared = sum(len(nodes) for nodes in table.units.values())
    # share ** (n * k) * tests <= alpha  <=>  k >= log(alpha / tests) / (n * log(share)), for share < 1
    periods = min(math.log(alpha / table.tests) / (len(nodes) * math.log(len(nodes) / compared))
                  for nodes in table.units.values())
    return max(1, math.ceil(periods) - 1) * BURST_SECONDS


def asymmetric_units(table: AsymmetryTable, alpha: float) -> dict[str, list[AsymmetryRow]]:
    """Unit -> its fingerprint, for every unit with an asymmetric command."""
    warned = {row.unit for row in table.rows if asymmetric(row, alpha)}
    return {unit: fingerprint(table, unit, alpha) for unit in sorted(warned, key=natural_key)}


# What the groups of a store's topology are called in a group table and its findings.
TOPOLOGY_GROUPS = "topology"


def stored_tables(processes: Mapping[str, NodeProcesses], topology: Mapping[str, str] | None = None,
                  ) -> list[AsymmetryTable]:
    """The asymmetry tables of stored accounting: every node against the
    others and, with a topology, every group against the others; none with
    fewer than two nodes accounted."""
    if len(processes) < 2:
        return []
    tables = [asymmetry_table(processes)]
    if topology:
        tables.append(asymmetry_table(processes, topology, TOPOLOGY_GROUPS))
    return tables


def groups_from_fact(facts: Mapping[str, Mapping[str, str]], key: str,
                     nodes: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Node -> its value of an inventory fact (the groups), and the nodes
    without it; KeyError naming the fact when no node has it."""
    values = facts.get(key)
    if not values:
        known = ", ".join(sorted(facts)[:12]) or "none: run oddnode inventory first"
        raise KeyError(f"no node has the inventory fact {key!r} in the store (facts: {known})")
    chosen = list(nodes)
    return {n: values[n] for n in chosen if n in values}, [n for n in chosen if n not in values]
