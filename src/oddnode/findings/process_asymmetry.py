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
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from oddnode.readings.accounting import (
    ASYMMETRY_RATIO,
    STAND_OUT_RATIO,
    AsymmetryRow,
    AsymmetryTable,
    asymmetric_units,
    asymmetry_table,
)
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.model import Dataset, Finding, Severity
from oddnode.core.nodes import fold
from oddnode.onnode.pacct import UNKNOWN_PARENT

KIND = "process-asymmetry"
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


def asymmetry_findings(table: AsymmetryTable, alpha: float) -> list[Finding]:
    """A finding for every node or group with a fingerprint (see the module)."""
    return [_finding(table, unit, rows, alpha) for unit, rows in asymmetric_units(table, alpha).items()]


def process_asymmetry_findings(dataset: Dataset, sensitivity: Sensitivity,
                               groups: Mapping[str, str] | None = None,
                               grouped_by: str | None = None) -> list[Finding]:
    """The findings of the stored accounting, per node or per group."""
    if len(dataset.processes) < 2:
        return []
    return asymmetry_findings(asymmetry_table(dataset.processes, groups, grouped_by), sensitivity.alpha)


@rule(KIND)
def process_asymmetry(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Nodes whose commands run far more often than on the others (per node)."""
    return process_asymmetry_findings(dataset, sensitivity)


def fingerprint_commands(finding: Finding) -> list[str]:
    """The commands of a process-asymmetry finding's fingerprint."""
    return [str(entry.get("command")) for entry in finding.evidence.get("fingerprint", []) if entry.get("command")]
