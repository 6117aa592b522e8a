"""process-asymmetry: a node (or group of nodes) on which commands run far
more often than on the others: seaborg's fingerprint.

On NERSC's seaborg, a management subsystem spawned lssrc, spget, odmget,
basename, ksh and sed 13 to 28 times as often on some nodes as on the
others.  Serial benchmarks saw nothing; synchronising parallel codes lost
time in proportion to their concurrency, since every interruption of one
rank holds up all the others.  Process accounting counts per command,
compared between nodes, named the commands and so the subsystem.

The judgement is the asymmetry-ratio table's (oddnode.readings.accounting):
a node warns when a command runs there at least ASYMMETRY_RATIO times as
often as per node on the rest and the excess of distinct seconds in which
it started cannot be chance (exact Poisson rate test, Bonferroni over
nodes x commands, at the sensitivity's alpha).  The finding names the node
and its fingerprint: every command at STAND_OUT_RATIO or more that chance
cannot explain, with its ratio.

An interval too short for any command on any node to be significant (its
least corrected p above alpha) cannot decide: where a command already runs
at the warning's ratio and rate, an info finding (UNDECIDED_KIND) says so,
with the least p the interval allows and the interval that would decide,
instead of a silence that reads as health.
"""

from __future__ import annotations

import math

from oddnode.readings.accounting import (
    ASYMMETRY_RATIO,
    MIN_TABLE_EXECUTIONS,
    STAND_OUT_RATIO,
    AsymmetryRow,
    AsymmetryTable,
    asymmetric_units,
    far_more_often,
    least_p_adjusted,
    seconds_to_decide,
    stored_tables,
)
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.model import Dataset, Finding, Severity
from oddnode.core.nodes import expand, fold
from oddnode.onnode.pacct import UNKNOWN_PARENT

KIND = "process-asymmetry"
UNDECIDED_KIND = "process-asymmetry-undecided"
SUBJECT = "processes"
# How many of the fingerprint's commands a message spells out; the evidence keeps them all.
SHOWN_COMMANDS = 6

REMEDY = ("Find what spawns {commands} on {where} (the parents the message names, ps -ef --forest, cron jobs and "
          "systemd timers, monitoring and management agents) and stop it or make it run as on the other nodes. "
          "Frequent short processes interrupt whatever runs beside them: serial benchmarks hardly notice, but "
          "parallel jobs that synchronise lose time in proportion to their concurrency.")


def ratio_text(row: AsymmetryRow) -> str:
    """'sed 50×' (times the rest's rate), or 'sed (only here)'."""
    return f"{row.command} (only here)" if math.isinf(row.ratio) else f"{row.command} {row.ratio:.3g}×"


def _finding(table: AsymmetryTable, unit: str, rows: list[AsymmetryRow], alpha: float) -> Finding:
    nodes = table.units[unit]
    folded = fold(nodes)
    if table.per_group:
        where = f"group {unit} ({folded}, grouped by {table.grouped_by})"
        others = "the other groups' nodes"
    else:
        where, others = unit, "the other nodes"
    shown = first_few([ratio_text(row) for row in rows], SHOWN_COMMANDS)
    seconds = table.seconds
    message = (f"{where} runs commands far more often than {others} (executions per node over {seconds:.3g} s, "
               f"times theirs): {shown}")
    parents = _known_parents(rows)
    if parents:
        message += f"; started by {first_few(parents, SHOWN_COMMANDS)}"
    commands = ", ".join(row.command for row in rows[:SHOWN_COMMANDS])
    return Finding(
        kind=KIND,
        severity=Severity.WARNING,
        subject=SUBJECT,
        nodes=folded,
        message=message,
        evidence={
            "unit": unit, "grouped_by": table.grouped_by, "units_compared": len(table.units),
            "seconds": round(seconds, 3), "tests": table.tests, "alpha": alpha, "ratio_limit": ASYMMETRY_RATIO,
            "stand_out_ratio": STAND_OUT_RATIO,
            "fingerprint": [{key: value for key, value in row.to_json().items() if key not in ("unit", "nodes")}
                            for row in rows],
        },
        remedy=REMEDY.format(commands=commands, where=folded),
    )


def _known_parents(rows: list[AsymmetryRow]) -> list[str]:
    """The parents of a fingerprint's commands that are not in it themselves
    (sed started by sh started by cron: cron), known ones only."""
    commands = {row.command for row in rows}
    return list(dict.fromkeys(parent for row in rows for parent in row.parents
                              if parent not in commands and parent != UNKNOWN_PARENT))


def suggested_seconds(table: AsymmetryTable, alpha: float) -> int:
    """The interval that would decide, rounded up to whole 10 s."""
    return max(10, math.ceil(seconds_to_decide(table, alpha) / 10) * 10)


def _undecided(table: AsymmetryTable, alpha: float) -> Finding | None:
    """The info finding of a table whose interval cannot decide, where some
    command already runs at the warning's ratio and rate; None otherwise."""
    least = least_p_adjusted(table)
    if least <= alpha:
        return None
    rows = [row for row in table.rows if far_more_often(row) and row.executions >= MIN_TABLE_EXECUTIONS]
    if not rows:
        return None
    units = list(dict.fromkeys(row.unit for row in rows))
    nodes = fold([node for unit in units for node in table.units[unit]])
    seconds, needed = table.seconds, suggested_seconds(table, alpha)
    shown = first_few([f"{row.unit}: {ratio_text(row)}" for row in rows], SHOWN_COMMANDS)
    return Finding(
        kind=UNDECIDED_KIND,
        severity=Severity.INFO,
        subject=SUBJECT,
        nodes=nodes,
        message=(f"{seconds:.3g} s of accounting cannot tell a spawner from chance: {shown} run far more often "
                 f"than on the other {'groups' if table.per_group else 'nodes'}, but the least p these "
                 f"{seconds:.3g} s allow is {least:.2g} (Bonferroni over {table.tests} tests), above alpha "
                 f"{alpha:g}; {needed} s or more can decide"),
        evidence={"grouped_by": table.grouped_by, "units_compared": len(table.units), "seconds": round(seconds, 3),
                  "tests": table.tests, "alpha": alpha, "least_p": least, "seconds_to_decide": needed,
                  "rows": [row.to_json() for row in rows]},
        remedy=f"Account for longer on the same nodes and judge again: oddnode processes --seconds {needed} "
               "(or more).",
    )


def asymmetry_findings(table: AsymmetryTable, alpha: float) -> list[Finding]:
    """A finding for every node or group with a fingerprint (see the module),
    or the one that says the interval cannot decide."""
    undecided = _undecided(table, alpha)
    if undecided is not None:
        return [undecided]
    return [_finding(table, unit, rows, alpha) for unit, rows in asymmetric_units(table, alpha).items()]


def _explained_by_nodes(group: Finding, node_findings: list[Finding]) -> bool:
    """Whether a group's fingerprint is that of a node of the group already
    named: one node's daemon lifts its group's rate too, and says it alone."""
    if group.kind != KIND:
        return False
    commands = {row["command"] for row in group.evidence["fingerprint"]}
    members = set(expand(group.nodes))
    return any(f.kind == KIND and f.nodes in members
               and commands <= {row["command"] for row in f.evidence["fingerprint"]} for f in node_findings)


def process_asymmetry_findings(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """The findings of the stored accounting: per node and, with a topology,
    per group, a group whose fingerprint is one named node's left to that
    node's finding."""
    tables = stored_tables(dataset.processes, dataset.topology)
    if not tables:
        return []
    by_node = asymmetry_findings(tables[0], sensitivity.alpha)
    if len(tables) == 1:
        return by_node
    by_group = asymmetry_findings(tables[1], sensitivity.alpha)
    # One "cannot decide" says it: the nodes' interval is the groups'.
    undecided = any(f.kind == UNDECIDED_KIND for f in by_node)
    return by_node + [f for f in by_group if not _explained_by_nodes(f, by_node)
                      and not (undecided and f.kind == UNDECIDED_KIND)]


@rule(KIND, kinds=(KIND, UNDECIDED_KIND))
def process_asymmetry(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Nodes, and with a topology groups of nodes (a rack's or a switch's:
    an agent that runs on all of them), whose commands run far more often
    than on the others."""
    return process_asymmetry_findings(dataset, sensitivity)


def fingerprint_commands(finding: Finding) -> list[str]:
    """The commands of a process-asymmetry finding's fingerprint."""
    return [str(entry.get("command")) for entry in finding.evidence.get("fingerprint", []) if entry.get("command")]
