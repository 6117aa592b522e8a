"""Nodes that have no result for a single-node benchmark although they
exist: in the inventory or in the results of other benchmarks."""

from __future__ import annotations

from collections import defaultdict

from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.model import Dataset, Finding, LabelKind, Severity
from oddnode.nodes import fold

# How many benchmarks a message spells out.
MESSAGE_BENCHMARKS = 6


@rule("missing")
def missing(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """One finding per distinct set of missing nodes, naming every benchmark it is missing from."""
    node_series = [s for s in dataset.series if s.label_kind is LabelKind.NODE]
    if not node_series:
        return []
    known = dataset.inventory_nodes()
    for series in node_series:
        known.update(series.labels.tolist())
    failed: dict[str, set[str]] = defaultdict(set)
    for failure in dataset.failures:
        failed[failure.benchmark].update(failure.members or (failure.label,))

    benchmarks_by_missing: dict[frozenset[str], list[str]] = defaultdict(list)
    for series in node_series:
        # Labels are distinct nodes of ``known``: equal sizes mean none is missing.
        if len(series) >= len(known):
            continue
        absent = known.difference(series.labels.tolist()) - failed.get(series.benchmark, set())
        if absent:
            names = benchmarks_by_missing[frozenset(absent)]
            if series.name not in names:
                names.append(series.name)

    findings = []
    for absent, names in benchmarks_by_missing.items():
        nodes = fold(absent)
        shown = first_few(names, MESSAGE_BENCHMARKS)
        findings.append(
            Finding(
                kind="missing",
                severity=Severity.WARNING,
                subject=", ".join(names),
                nodes=nodes,
                message=(
                    f"{nodes} ({len(absent)} {'node' if len(absent) == 1 else 'nodes'}) "
                    f"{'has' if len(absent) == 1 else 'have'} no result for {shown}, although "
                    f"{'it is' if len(absent) == 1 else 'they are'} in the inventory or in other benchmarks"
                ),
                evidence={"benchmarks": names, "missing": len(absent), "known_nodes": len(known)},
                remedy=(
                    f"Find out why {nodes} did not run: did it boot, is it in the allocation, did the "
                    "benchmark start and write its output there? Fix that and rerun on those nodes."
                ),
            )
        )
    return findings
