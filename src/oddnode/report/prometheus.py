"""The verdict per node for Prometheus, in node_exporter's
textfile-collector format: the findings of an analysis of the store (and
those it last recorded), the newest result of every series, when a check
last ran on each node, when the analysis was made."""

from __future__ import annotations

import math
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from oddnode.core.atomic import write_atomically
from oddnode.store.exports import ExportError
from oddnode.core.model import Finding, LabelKind, Series, Severity
from oddnode.core.nodes import NodeNameError, expand, split_pair
from oddnode.core.order import natural_key
from oddnode.store import CHECK_SOURCE, Store

if TYPE_CHECKING:  # types only: the analysis is made by the caller
    from oddnode.judge.analysis import Analysis

PREFIX = "oddnode_"


@dataclass
class Family:
    """One metric family: its name (without the prefix), help, type and samples."""

    name: str
    help: str
    samples: list[tuple[dict[str, str], float]]
    type: str = "gauge"


def escape_label_value(value: str) -> str:
    """A label value as the exposition format quotes it: \\ " and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if value != int(value) or abs(value) >= 1e15 else str(int(value))


def render(families: Iterable[Family]) -> str:
    """The families as exposition text, each with its # HELP and # TYPE lines."""
    lines = []
    for family in families:
        name = PREFIX + family.name
        lines.append(f"# HELP {name} {family.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
        lines.append(f"# TYPE {name} {family.type}")
        for labels, value in family.samples:
            inside = ",".join(f'{key}="{escape_label_value(text)}"' for key, text in labels.items())
            lines.append(f"{name}{{{inside}}} {_format_value(value)}" if inside else f"{name} {_format_value(value)}")
    return "\n".join(lines) + "\n"


def finding_nodes(finding: Finding) -> list[str]:
    """The nodes a finding names (its folded node set expanded); none for a
    finding about the whole population."""
    if not finding.nodes.strip():
        return []
    try:
        return expand(finding.nodes)
    except NodeNameError:
        return []


def label_nodes(label: str, kind: LabelKind, known: set[str]) -> tuple[str, ...]:
    """The member nodes of a result label; none when a pair cannot be split."""
    if kind is LabelKind.NODE:
        return (label,)
    if kind is LabelKind.PAIR:
        return split_pair(label, known) or ()
    try:
        return tuple(expand(label))
    except NodeNameError:
        return ()


def verdict_families(series: Sequence[Series], findings: Sequence[Finding], checked: dict[str, datetime],
                     nodes: Iterable[str], written: float, analysed: float, judged: bool = True) -> list[Family]:
    """The metric families of a verdict, a pure function of what the store
    holds and what the analysis found.

    Every node gets a findings line for each (kind, severity) that some
    current finding has, 0 where it has none, so a series never vanishes
    when a node recovers.  A node is ok only when something judged it (a
    result of the newest runs names it, or a check ran on it) and no
    finding at warning or above names it: a node merely declared is not,
    nor any node when the analysis had nothing to judge (``judged`` false)."""
    known = set(nodes) | {str(label) for s in series if s.label_kind is LabelKind.NODE for label in s.labels}
    counts: Counter[tuple[str, str, str]] = Counter()
    worst: dict[str, int] = {}
    per_node: Counter[str] = Counter()
    for finding in findings:
        for node in dict.fromkeys(finding_nodes(finding)):
            counts[(node, finding.kind, finding.severity.value)] += 1
            per_node[node] += 1
            worst[node] = max(worst.get(node, -1), finding.severity.rank)
    known |= {node for node, _, _ in counts}
    results = []
    for s in series:
        for label, value in zip(s.labels, s.values):
            for node in label_nodes(str(label), s.label_kind, known):
                results.append((node, s.benchmark, s.metric, s.unit, str(label), s.label_kind.value, float(value)))
    seen = {row[0] for row in results} | set(checked)
    known |= seen
    judged_nodes = seen if judged else set()
    everyone = sorted(known, key=natural_key)
    pairs = sorted({(kind, severity) for _, kind, severity in counts},
                   key=lambda ks: (ks[0], Severity(ks[1]).rank))
    return [
        Family("findings", "Current findings that name the node, by kind and severity (an analysis made "
                           "when this file was written, and the latest recorded analysis or check).",
               [({"node": n, "kind": k, "severity": sev}, float(counts[(n, k, sev)]))
                for n in everyone for k, sev in pairs]),
        Family("node_findings", "Current findings of any kind and severity that name the node.",
               [({"node": n}, float(per_node[n])) for n in everyone]),
        Family("node_ok", "1 when a result or a check judged the node and no current finding at warning "
                          "or above names it, else 0.",
               [({"node": n}, 1.0 if n in judged_nodes and worst.get(n, -1) < Severity.WARNING.rank else 0.0)
                for n in everyone]),
        Family("result", "Best value of the newest run of each benchmark series, in its stored unit; "
                         "label is the stored label (the node, a pair or a node set), population its kind.",
               [({"node": n, "benchmark": b, "metric": m, "unit": u, "label": lab, "population": kind}, v)
                for n, b, m, u, lab, kind, v in sorted(results, key=lambda r: (natural_key(r[0]), r[1:5]))]),
        Family("last_check_timestamp_seconds", "Unix time when the latest check that ran on the node started.",
               [({"node": n}, checked[n].replace(tzinfo=timezone.utc).timestamp())
                for n in everyone if n in checked]),
        Family("analysis_timestamp_seconds", "Unix time of the analysis whose findings this file carries.",
               [({}, analysed)]),
        Family("textfile_written_timestamp_seconds", "Unix time when oddnode wrote this file.", [({}, written)]),
    ]


def _key(finding: Finding) -> tuple[str, str, str, str, str]:
    return finding.kind, finding.severity.value, finding.subject, finding.nodes, finding.message


def current_findings(analysis: Analysis, recorded: Sequence[Finding]) -> list[Finding]:
    """The analysis' findings, then those recorded last (a check's, an
    expectation's) that it did not make again: a node is judged by both."""
    made = {_key(f) for f in analysis.findings}
    return [*analysis.findings, *(f for f in recorded if _key(f) not in made)]


def prometheus_text(store: Store, analysis: Analysis, *, analysed: float | None = None,
                    written: float | None = None) -> str:
    """The verdict of ``analysis``, an analysis of ``store``'s dataset made
    at ``analysed`` (default: now), its series and node list as the
    analysis read them, as textfile-collector text; ExportError
    when the store holds no results, findings or checks."""
    series = analysis.dataset.series
    recorded = store.latest_findings()
    checked = store.latest_run_per_node(CHECK_SOURCE)
    if not series and not recorded and not checked:
        raise ExportError(f"nothing to export in {store.path}: no results, findings or checks "
                          "(run oddnode check or oddnode import first)")
    now = time.time()
    families = verdict_families(series, current_findings(analysis, recorded), checked,
                                analysis.dataset.declared_nodes, now if written is None else written,
                                now if analysed is None else analysed, analysis.judged)
    return render(families)


def write_textfile(text: str, path: os.PathLike[str] | str) -> None:
    """Write ``text`` to ``path`` as io.atomic does (a regular file in one
    rename, so node_exporter never reads half a file; a device or FIFO
    written through; anything else refused); ``-`` writes to stdout."""
    if os.fspath(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomically(path, text.encode("utf-8"))
