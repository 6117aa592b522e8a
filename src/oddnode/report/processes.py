"""The report of process accounting (``oddnode processes``): how each node
was accounted, seaborg's asymmetry-ratio table fitted to the terminal, and
the JSON of it all."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from oddnode.findings.process_asymmetry import suggested_seconds
from oddnode.readings.accounting import AsymmetryRow, AsymmetryTable, least_p_adjusted, stands_out
from oddnode.core.model import Finding, NodeProcesses
from oddnode.core.nodes import fold
from oddnode.core.order import natural_key
from oddnode.report.terminal import probability, table_width
from oddnode.report.text import literal

if TYPE_CHECKING:
    from oddnode.report import documents

# Rows the table shows by default; the rest are counted in its caption.
TOP = 20
ONLY_HERE = "only here"
_COMMAND = "command"
_EXECUTIONS = "executions"
_PER_NODE = "per node"
_REST = "rest per node"
_RATIO = "ratio"
_CPU = "CPU s"
_P = "p"
_PARENTS = "started by"
# A narrow terminal loses these first, least wanted first.
LEFT_OUT_FIRST = (_PARENTS, _CPU, _P, _PER_NODE)
_LEFT = {"node", "group", _COMMAND, _PARENTS}

METHODS = {
    "acct": "kernel accounting, oddnode's own (acct(2) on for the interval, then off)",
    "pacct": "the site's accounting file {source} (accounting left as it was)",
    "proc": "/proc sampled, kernel accounting being unavailable: short-lived commands are missed",
}

READING = ("ratio: executions per node here over executions per node on the rest (same interval); p: the chance, "
           "were the rates equal, of starts in as many 5-second periods, Bonferroni-corrected over {tests} "
           "comparisons.")


def method_lines(reports: Mapping[str, NodeProcesses]) -> list[str]:
    """How each node's processes were counted, nodes folded by method and source."""
    by_way: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node, report in reports.items():
        by_way[report.method, report.source].append(node)
    lines = []
    for (method, source), nodes in sorted(by_way.items(), key=lambda item: natural_key(fold(item[1]))):
        lines.append(f"{fold(nodes)}: {METHODS.get(method, method).format(source=source)}")
    return lines


def note_lines(reports: Mapping[str, NodeProcesses]) -> list[str]:
    """The collectors' notes other than the method's own, each once with its nodes folded."""
    nodes_by_note: dict[str, list[str]] = defaultdict(list)
    for node, report in reports.items():
        for note in report.notes:
            nodes_by_note[note].append(node)
    return [f"{fold(nodes)}: {note}" for note, nodes in nodes_by_note.items()]


def unanswered_lines(reasons: Mapping[str, str], unreachable: Mapping[str, object]) -> list[str]:
    """The nodes that gave no counts, folded by why."""
    by_reason: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node, reason in reasons.items():
        by_reason["unreachable" if node in unreachable else "failed", reason].append(node)
    return [f"[red]{label}:[/] {literal(fold(nodes))}: {literal(reason)}"
            for (label, reason), nodes in sorted(by_reason.items(), key=lambda item: natural_key(fold(item[1])))]


def _count(value: float) -> str:
    return f"{value:.0f}" if value >= 100 or value == int(value) else f"{value:.3g}"


def ratio_cell(ratio: float) -> str:
    return ONLY_HERE if math.isinf(ratio) else f"{ratio:.3g}"


def _cells(row: AsymmetryRow, unit_column: str) -> dict[str, str]:
    return {unit_column: row.unit, _COMMAND: row.command, _EXECUTIONS: str(row.executions),
            _PER_NODE: _count(row.per_node), _REST: _count(row.rest_per_node), _RATIO: ratio_cell(row.ratio),
            _CPU: f"{row.cpu_seconds:.2f}", _P: probability(row.p_adjusted),
            _PARENTS: ", ".join(row.parents) or "-"}


def _columns(table: AsymmetryTable) -> tuple[str, list[str]]:
    """A table's unit column (node or group) and all its columns, in order."""
    unit_column = "group" if table.per_group else "node"
    return unit_column, [unit_column, _COMMAND, _EXECUTIONS, *([_PER_NODE] if table.per_group else []), _REST,
                         _RATIO, _CPU, _P, _PARENTS]


def shown_rows(table: AsymmetryTable, show_all: bool = False) -> list[AsymmetryRow]:
    """The rows the table shows: those that stand out (all with ``show_all``)."""
    return list(table.rows) if show_all else [row for row in table.rows if stands_out(row)]


def _fit(columns: Sequence[str], rows: Sequence[Mapping[str, str]],
         width: int | None) -> tuple[list[str], dict[str, int], list[str]]:
    """Columns shown, their widths and those left out for ``width``
    characters (None: all at full width); the names fold last."""
    def natural(column: str) -> int:
        return max([len(column), *(len(row[column]) for row in rows)])

    shown = list(columns)
    left_out: list[str] = []
    for column in LEFT_OUT_FIRST:
        if width is None or table_width([natural(c) for c in shown]) <= width:
            break
        if column in shown:
            shown.remove(column)
            left_out.append(column)
    widths = {c: natural(c) for c in shown}
    if width is not None:
        numbers = table_width([widths[c] for c in shown if c not in _LEFT])
        room = width - numbers - 6  # two name columns: 3 characters of rule and padding each
        unit, command = shown[0], _COMMAND
        if widths[unit] + widths[command] > room:
            widths[command] = max(len(command), min(widths[command], room // 2))
            widths[unit] = max(len(unit), room - widths[command])
    return shown, widths, left_out


def asymmetry_view(table: AsymmetryTable, width: int | None = None, show_all: bool = False,
                   top: int | None = TOP) -> Table | None:
    """Seaborg's asymmetry-ratio table: per node (or group) and command, its
    executions, the rest's per node, the ratio, highest first; only the
    commands that stand out (``show_all``: every one), at most ``top``
    rows; fitted to ``width`` (None: every column).  None when there is
    nothing to compare."""
    if len(table.units) < 2:
        return None
    unit_column, columns = _columns(table)
    chosen = shown_rows(table, show_all)
    hidden = len(chosen) - top if top and len(chosen) > top else 0
    rows = [_cells(row, unit_column) for row in (chosen[:top] if hidden else chosen)]
    shown, widths, left_out = _fit(columns, rows, width)
    per = f"grouped by {table.grouped_by}, " if table.per_group else ""
    title = (f"Asymmetry ratios ({per}{len(table.units)} {unit_column}s, {table.seconds:.3g} s): "
             f"{'every command' if show_all else 'the commands that stand out'}")
    caption = [READING.format(tests=table.tests)]
    if hidden:
        caption.append(f"{hidden} more rows; --all --top 0 shows every row.")
    if left_out:
        caption.append(f"{', '.join(left_out)} left out to fit {width} columns; --wide shows them.")
    out = Table(title=literal(title), title_justify="left", caption=literal(" ".join(caption)), caption_justify="left")
    for column in shown:
        out.add_column(column, justify="left" if column in _LEFT else "right", min_width=widths[column],
                       max_width=widths[column], overflow="fold")
    for row in rows:
        out.add_row(*(Text(row[column]) for column in shown))  # names as they are: no markup in a comm
    return out


def nothing_stands_out(table: AsymmetryTable) -> str:
    if len(table.units) < 2:
        what = "groups" if table.per_group else "nodes"
        return f"Fewer than two {what} to compare: no asymmetry ratios."
    where = "group" if table.per_group else "node"
    return f"No command runs markedly more often on one {where} than on the rest."


def undecided_line(table: AsymmetryTable, alpha: float) -> str | None:
    """What a table whose interval is too short to decide says, or None."""
    least = least_p_adjusted(table)
    if least <= alpha:
        return None
    return (f"These {table.seconds:.3g} s cannot decide: the least p they allow is {least:.2g} (Bonferroni over "
            f"{table.tests} tests), above alpha {alpha:g}, so no command could be shown to run more often on one "
            f"{'group' if table.per_group else 'node'}; --seconds {suggested_seconds(table, alpha)} or more can.")


def processes_section(analysis) -> dict[str, object] | None:
    """The HTML report's "Processes" section: how to read it and, per
    asymmetry table of the stored accounting (every node, then every group
    of the topology), the rows that stand out, highest ratio first, with
    the units the findings name marked; None without accounting of two
    nodes or more."""
    from oddnode.findings.process_asymmetry import KIND
    from oddnode.readings.accounting import stored_tables

    tables = stored_tables(analysis.dataset.processes, analysis.dataset.topology)
    if not tables:
        return None
    named = {f.evidence.get("unit") for f in analysis.findings if f.kind == KIND}
    out = []
    for table in tables:
        unit_column, columns = _columns(table)
        rows = [_cells(row, unit_column) for row in shown_rows(table)[:TOP]]
        per = f"grouped by {table.grouped_by}, " if table.per_group else ""
        out.append({"title": f"Asymmetry ratios ({per}{len(table.units)} {unit_column}s, {table.seconds:.3g} s, "
                             f"{table.tests} comparisons)",
                    "columns": columns, "rows": [[row[c] for c in columns] for row in rows],
                    "flagged": sorted(unit for unit in named if unit in table.units),
                    "nothing": nothing_stands_out(table) if not rows else ""})
    return {"reading": READING.format(tests="the table's"), "tables": out}


def processes_json(reports: Mapping[str, NodeProcesses], reasons: Mapping[str, str], tables: Sequence[AsymmetryTable],
                   findings: Sequence[Finding], run_id: int | None = None) -> documents.Processes:
    """The run, its tables and findings as JSON data (formats.md#processes-json)."""
    return {
        "run_id": run_id,
        "nodes": {node: {"method": r.method, "source": r.source, "start": r.start, "seconds": r.seconds,
                         "notes": list(r.notes), "missed_short_lived": r.method == "proc",
                         "commands": {c: {"executions": n.executions, "cpu_seconds": n.cpu_seconds,
                                          "elapsed_seconds": n.elapsed_seconds, "bursts": n.bursts,
                                          "parents": list(n.parents)}
                                      for c, n in sorted(r.commands.items())}}
                  for node, r in sorted(reports.items(), key=lambda item: natural_key(item[0]))},
        "unanswered": dict(sorted(reasons.items(), key=lambda item: natural_key(item[0]))),
        "tables": [table.to_json() for table in tables],
        "findings": [f.to_json() for f in findings],
    }
