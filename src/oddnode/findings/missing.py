"""Nodes that should have results but have none.

A node is expected when the cluster's node list declares it (see
``Dataset.declared_nodes``), when it is in the inventory, or when another
benchmark measured it.  A declared node with nothing at all (no fact, no
result, no failed run, no status: it never booted, or was never reached) is
an error, the first finding of the report.  A node missing from some
single-node benchmarks, or a declared node missing from the inventory, while
present elsewhere, is a warning.
"""

from __future__ import annotations

from collections import defaultdict

from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.model import Dataset, Finding, LabelKind, Severity
from oddnode.core.nodes import fold, label_members

# How many benchmarks a message spells out.
MESSAGE_BENCHMARKS = 6
# The subjects of the two findings that are not about one benchmark.
NODE_LIST = "node list"
INVENTORY = "inventory"


def _without_a_trace(dataset: Dataset, nodes: set[str]) -> set[str]:
    """The nodes that left nothing: no fact, no result (alone, in a pair or
    in a set), no failed run, no status, no process accounting, no detailed
    report (an affinity sample).  The cheap sources are asked first; pair and
    set labels are split only while some node is still unseen."""
    unseen = nodes - dataset.inventory_nodes() - set(dataset.node_trouble) - set(dataset.processes)
    for reports in dataset.details.values():
        unseen.difference_update(reports)
    for failure in dataset.failures:
        unseen.difference_update(failure.members or (failure.label,))
    for series in dataset.series:
        if series.label_kind is LabelKind.NODE:
            unseen.difference_update(series.labels.tolist())
    for series in dataset.series:
        if not unseen:
            break
        if series.label_kind is not LabelKind.NODE:
            for label in series.labels.tolist():
                unseen.difference_update(label_members(label, series.label_kind))
    return unseen


def _never_seen(nodes: set[str], declared: int) -> Finding:
    folded = fold(nodes)
    one = len(nodes) == 1
    return Finding(
        kind="missing",
        severity=Severity.ERROR,
        subject=NODE_LIST,
        nodes=folded,
        message=(
            f"{folded} ({len(nodes)} of the {declared} declared {'node' if declared == 1 else 'nodes'}) "
            f"left nothing at all: no inventory, no result, no failed run, no status"
        ),
        evidence={"missing": len(nodes), "declared_nodes": declared},
        remedy=(
            f"Find out whether {folded} {'is' if one else 'are'} up: did {'it' if one else 'they'} boot, "
            "answer ssh, join the allocation? Every other finding is judged without "
            f"{'it' if one else 'them'}. Bring {'it' if one else 'them'} up and run the inventory and the "
            f"benchmarks there, or take {'it' if one else 'them'} out of the node list."
        ),
    )


def _missing_from(absent: frozenset[str], names: list[str], known: int) -> Finding:
    """Nodes missing from some benchmarks (or the inventory) while seen elsewhere."""
    nodes = fold(absent)
    one = len(absent) == 1
    what = "inventory" if names == [INVENTORY] else f"result for {first_few(names, MESSAGE_BENCHMARKS)}"
    step = "the inventory probe" if names == [INVENTORY] else "the benchmark"
    return Finding(
        kind="missing",
        severity=Severity.WARNING,
        subject=", ".join(names),
        nodes=nodes,
        message=(
            f"{nodes} ({len(absent)} {'node' if one else 'nodes'}) {'has' if one else 'have'} no {what}, "
            f"although {'it is' if one else 'they are'} in the node list, the inventory or other benchmarks"
        ),
        evidence={"benchmarks": names, "missing": len(absent), "known_nodes": known},
        remedy=(
            f"Find out why {nodes} did not run: did it boot, is it in the allocation, did "
            f"{step} start and write its output there? Fix that and rerun on those nodes."
        ),
    )


@rule("missing")
def missing(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """An error for the declared nodes with nothing at all; a warning per
    distinct set of nodes missing from some benchmarks (named together) or
    from the inventory."""
    declared = set(dataset.declared_nodes)
    never_seen = _without_a_trace(dataset, declared) if declared else set()
    findings = [_never_seen(never_seen, len(declared))] if never_seen else []

    node_series = [s for s in dataset.series if s.label_kind is LabelKind.NODE]
    known = dataset.inventory_nodes() | (declared - never_seen)
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
    findings += [_missing_from(absent, names, len(known)) for absent, names in benchmarks_by_missing.items()]
    # The inventory is judged against the node list only, once there is one:
    # a node whose probe failed is the reachability rule's.
    inventoried = dataset.inventory_nodes()
    if inventoried and declared:
        no_inventory = declared - never_seen - inventoried - set(dataset.node_trouble)
        if no_inventory:
            findings.append(_missing_from(frozenset(no_inventory), [INVENTORY], len(known)))
    return findings
