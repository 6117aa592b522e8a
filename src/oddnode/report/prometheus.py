"""The verdict per node for Prometheus, in node_exporter's
textfile-collector format, written by prometheus_client: the findings of
an analysis of the store (and those it last recorded), the newest result
of every series in its dimension's base unit, when a check last ran on
each node, when the analysis was made."""

from __future__ import annotations

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
from oddnode.core.units import UnknownUnitError, base_scale, rounded
from oddnode.store import CHECK_SOURCE, Store

if TYPE_CHECKING:  # types only: the analysis is made by the caller
    from oddnode.judge.analysis import Analysis

PREFIX = "oddnode_"

# A result's dimension -> the base unit its metric's name ends in, as
# Prometheus' naming conventions want (seconds, bytes, ratios 0-1); a
# dimension not listed (a count, no unit) gives a metric without a unit.
UNIT_SUFFIXES = {
    "bandwidth": "bytes_per_second",
    "time": "seconds",
    "size": "bytes",
    "flops": "flops_per_second",
    "operations": "operations_per_second",
    "updates": "updates_per_second",
    "io": "io_operations_per_second",
    "messages": "messages_per_second",
    "events": "events_per_second",
    "fraction": "ratio",
}


@dataclass
class Family:
    """One metric family (a gauge): its name without the prefix, its help,
    its label names and its samples (label values in that order, value)."""

    name: str
    help: str
    labels: tuple[str, ...]
    samples: list[tuple[tuple[str, ...], float]]


def render(families: Iterable[Family]) -> str:
    """The families as exposition text (prometheus_client's: # HELP and
    # TYPE lines, label values escaped)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    class Verdict:
        def collect(self):
            for family in families:
                gauge = GaugeMetricFamily(PREFIX + family.name, family.help, labels=family.labels)
                for values, value in family.samples:
                    gauge.add_metric(values, value)
                yield gauge

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Verdict())
    return generate_latest(registry).decode("utf-8")


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


# Each population's label names, before benchmark and metric: a node's
# results name it, a pair's both its ends (its stored label too, for a pair
# that cannot be split), a set's its node set; each result is one sample,
# so that summing over nodes counts a pair or a set once.
_POPULATION_LABELS = {LabelKind.NODE: ("node",), LabelKind.PAIR: ("pair", "node_a", "node_b"),
                      LabelKind.SET: ("nodes",)}


def result_families(series: Sequence[Series], known: set[str]) -> tuple[list[Family], set[str]]:
    """One family per population and dimension (``node_result_bytes_per_second``,
    ``pair_result_seconds``, ``set_result_seconds``...) holding the best value
    of the newest run of each series in that dimension's base unit; and the
    nodes the results judged.  A result in a unit oddnode does not know is
    left out: it has no base unit to be given in."""
    samples: dict[tuple[LabelKind, str], list[tuple[tuple[str, ...], float]]] = {}
    judged: set[str] = set()
    for s in series:
        try:
            dimension, scale = base_scale(s.unit)
        except UnknownUnitError:
            continue
        suffix = UNIT_SUFFIXES.get(dimension, "")
        for label, value in zip(s.labels, s.values):
            label = str(label)
            members = label_nodes(label, s.label_kind, known)
            judged.update(members)
            if s.label_kind is LabelKind.PAIR:
                where: tuple[str, ...] = (label, *(members or ("", "")))
            else:
                where = (label,)
            samples.setdefault((s.label_kind, suffix), []).append(
                ((*where, s.benchmark, s.metric), rounded(float(value) * scale)))
    families = []
    for kind, suffix in sorted(samples, key=lambda key: (list(LabelKind).index(key[0]), key[1])):
        name = f"{kind.value}_result" + (f"_{suffix}" if suffix else "")
        unit = suffix.replace("_", " ") if suffix else "its unit (a count, or none)"
        families.append(Family(
            name, f"Best value of the newest run of each {kind.value} benchmark series, in {unit}.",
            (*_POPULATION_LABELS[kind], "benchmark", "metric"),
            sorted(samples[(kind, suffix)], key=lambda sample: (natural_key(sample[0][0]), sample[0][1:]))))
    return families, judged


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
    results, with_results = result_families(series, known)
    seen = with_results | set(checked)
    known |= seen
    judged_nodes = seen if judged else set()
    everyone = sorted(known, key=natural_key)
    pairs = sorted({(kind, severity) for _, kind, severity in counts},
                   key=lambda ks: (ks[0], Severity(ks[1]).rank))
    return [
        Family("findings", "Current findings that name the node, by kind and severity (an analysis made "
                           "when this file was written, and the latest recorded analysis or check).",
               ("node", "kind", "severity"),
               [((n, k, sev), float(counts[(n, k, sev)])) for n in everyone for k, sev in pairs]),
        Family("node_findings", "Current findings of any kind and severity that name the node.", ("node",),
               [((n,), float(per_node[n])) for n in everyone]),
        Family("node_ok", "1 when a result or a check judged the node and no current finding at warning "
                          "or above names it, else 0.", ("node",),
               [((n,), 1.0 if n in judged_nodes and worst.get(n, -1) < Severity.WARNING.rank else 0.0)
                for n in everyone]),
        *results,
        Family("last_check_timestamp_seconds", "Unix time when the latest check that ran on the node started.",
               ("node",), [((n,), checked[n].replace(tzinfo=timezone.utc).timestamp())
                           for n in everyone if n in checked]),
        Family("analysis_timestamp_seconds", "Unix time of the analysis whose findings this file carries.",
               (), [((), analysed)]),
        Family("textfile_written_timestamp_seconds", "Unix time when oddnode wrote this file.", (),
               [((), written)]),
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
