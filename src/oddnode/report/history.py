"""``oddnode history NODE``: a node's results, facts and findings run by
run, as tables and as its JSON document."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from oddnode.core.model import Severity
from oddnode.readings.history import NodeHistory
from oddnode.report import documents
from oddnode.report.terminal import SEVERITY_STYLE, number
from oddnode.report.text import literal

HISTORY_JSON_VERSION = 1


def _when(started) -> str:
    return started.strftime("%Y-%m-%d %H:%M")


def _relative(change: float | None) -> str:
    return "-" if change is None else f"{change:+.1f}%"


def _severity(text: str) -> Text:
    """A stored severity, styled as the analysis styles it (a hand-written one plain)."""
    try:
        return Text(text, style=SEVERITY_STYLE[Severity(text)])
    except ValueError:
        return Text(text)


def history_tables(history: NodeHistory) -> list[Table]:
    """The node's results (a row per series and run), the facts that changed,
    and every recorded analysis with the findings that named the node."""
    tables = []
    if history.series:
        results = Table(title=f"Results of {history.node} run by run (vs the median now: of every node's newest)",
                        title_justify="left")
        for name, justify in (("series", "left"), ("run", "right"), ("started", "left"), ("command", "left"),
                              ("value", "right"), ("unit", "left"), ("vs median now", "right"), ("failed", "right")):
            results.add_column(name, justify=justify, overflow="fold")
        for series in history.series:
            for index, run in enumerate(series.runs):
                results.add_row(literal(series.name) if index == 0 else "", str(run.run_id), _when(run.started),
                                literal(run.command), number(run.value) if run.value is not None else "failed",
                                literal(series.unit), _relative(series.relative(run.value)),
                                str(run.failed) if run.failed else "")
        tables.append(results)
    if history.facts:
        facts = Table(title=f"Facts of {history.node} that changed", title_justify="left")
        for name in ("fact", "run", "started", "value"):
            facts.add_column(name, overflow="fold")
        for change in history.facts:
            for index, (run_id, started, value) in enumerate(change.values):
                facts.add_row(literal(change.key) if index == 0 else "", str(run_id), _when(started), literal(value))
        tables.append(facts)
    if history.analyses:
        named = Table(title=f"Recorded analyses and their findings naming {history.node}", title_justify="left")
        for name in ("run", "started", "command", "severity", "finding", "subject"):
            named.add_column(name, overflow="fold")
        by_run: dict[int, list] = {}
        for finding in history.findings:
            by_run.setdefault(finding.run_id, []).append(finding)
        for run_id, started, command in history.analyses:
            for index, finding in enumerate(by_run.get(run_id, [])):
                first = index == 0
                named.add_row(str(run_id) if first else "", _when(started) if first else "",
                              literal(command) if first else "", _severity(finding.severity),
                              literal(finding.kind), literal(finding.subject))
            if run_id not in by_run:
                named.add_row(str(run_id), _when(started), literal(command), Text("none", style="green"), "", "")
        tables.append(named)
    return tables


def history_json(history: NodeHistory) -> documents.History:
    """What ``history --json`` prints."""
    return {
        "version": HISTORY_JSON_VERSION,
        "node": history.node,
        "results": [{
            "benchmark": s.benchmark, "metric": s.metric, "unit": s.unit, "direction": s.direction.value,
            "median_now": s.median_now,
            "runs": [{"run": r.run_id, "started": r.started.isoformat(), "command": r.command, "value": r.value,
                      "valid": r.valid, "failed": r.failed, "vs_median_now_percent": s.relative(r.value)}
                     for r in s.runs],
        } for s in history.series],
        "facts": [{"key": change.key, "values": [{"run": run_id, "started": started.isoformat(), "value": value}
                                                 for run_id, started, value in change.values]}
                  for change in history.facts],
        "analyses": [{"run": run_id, "started": started.isoformat(), "command": command,
                      "findings": [{"kind": f.kind, "severity": f.severity, "subject": f.subject, "message": f.message}
                                   for f in history.findings if f.run_id == run_id]}
                     for run_id, started, command in history.analyses],
    }
